// The KV cache's host bookkeeping: block pool with ref counts, per-sequence block tables,
// copy on write (as BlockCopy lists), prefix index, and O(1) stats (see block_manager.h).
#include "inferlab/kv/block_manager.h"

#include <algorithm>
#include <functional>
#include <string>

#include "inferlab/error.h"

namespace inferlab {

// ---- BlockPool ----------------------------------------------------------------------------
// free_ is a min-heap (std::greater) so allocate() always returns the lowest free id: block
// placement is deterministic whatever order blocks were released in.

BlockPool::BlockPool(int num_blocks, bool contiguous) : contiguous_(contiguous), free_count_(num_blocks) {
  check(num_blocks >= 0, "BlockPool: num_blocks must be >= 0, got " + std::to_string(num_blocks));
  refs_.assign(static_cast<std::size_t>(num_blocks), 0);
  if (contiguous_) return;  // runs are found by scanning refs_
  free_.reserve(static_cast<std::size_t>(num_blocks));
  for (int b = 0; b < num_blocks; ++b) free_.push_back(b);  // ascending = valid min-heap
}

int BlockPool::allocate() {
  check(!contiguous_, "BlockPool::allocate on a contiguous pool (use allocate_run)");
  if (free_.empty()) return -1;
  std::pop_heap(free_.begin(), free_.end(), std::greater<int>());
  const int block = free_.back();
  free_.pop_back();
  refs_[static_cast<std::size_t>(block)] = 1;
  --free_count_;
  return block;
}

int BlockPool::allocate_run(int n) {
  check(contiguous_, "BlockPool::allocate_run on a paged pool");
  check(n > 0, "BlockPool::allocate_run: n must be > 0, got " + std::to_string(n));
  int run = 0;
  for (int b = 0; b < total(); ++b) {
    run = refs_[static_cast<std::size_t>(b)] == 0 ? run + 1 : 0;
    if (run < n) continue;
    const int first = b - n + 1;
    std::fill(refs_.begin() + first, refs_.begin() + b + 1, 1);
    free_count_ -= n;
    return first;
  }
  return -1;
}

int BlockPool::largest_free_run() const {
  int run = 0, best = 0;
  for (int r : refs_) {
    run = r == 0 ? run + 1 : 0;
    best = std::max(best, run);
  }
  return best;
}

int BlockPool::free_in_runs_shorter_than(int n) const {
  int run = 0, small = 0;
  for (std::size_t b = 0; b <= refs_.size(); ++b) {
    if (b < refs_.size() && refs_[b] == 0) {
      ++run;
      continue;
    }
    if (run < n) small += run;
    run = 0;
  }
  return small;
}

void BlockPool::retain(int block) {
  check(block >= 0 && block < total(), [&] { return "BlockPool::retain: no block " + std::to_string(block); });
  int& ref = refs_[static_cast<std::size_t>(block)];
  check(ref > 0, [&] { return "BlockPool::retain: block " + std::to_string(block) + " is free"; });
  ++ref;
}

void BlockPool::release(int block) {
  check(block >= 0 && block < total(), [&] { return "BlockPool::release: no block " + std::to_string(block); });
  int& ref = refs_[static_cast<std::size_t>(block)];
  check(ref > 0, [&] { return "BlockPool::release: block " + std::to_string(block) + " is already free"; });
  if (--ref == 0) {
    ++free_count_;
    if (contiguous_) return;
    free_.push_back(block);
    std::push_heap(free_.begin(), free_.end(), std::greater<int>());
  }
}

// ---- BlockManager ------------------------------------------------------------------------------

namespace {

int checked_num_blocks(const KvCacheConfig& config) {
  check(config.block_size > 0,
        "BlockManager: block_size must be > 0, got " + std::to_string(config.block_size));
  check(config.num_blocks > 0, "BlockManager: num_blocks must be > 0 when the cache is built, got " +
                                   std::to_string(config.num_blocks) +
                                   " (0 means the engine must pick a size first)");
  // Contiguous regions are private to one sequence: nothing may share their blocks.
  check(!(config.contiguous() && config.prefix_caching),
        std::string("BlockManager: kv.reservation = ") + kv_reservation_name(config.reservation) +
            " places contiguous per-sequence regions and cannot share blocks with prefix caching");
  return config.num_blocks;
}

}  // namespace

BlockManager::BlockManager(const KvCacheConfig& config)
    : config_(config),
      pool_(checked_num_blocks(config), config.contiguous()),
      valid_(static_cast<std::size_t>(config.num_blocks), 0),
      holders_(static_cast<std::size_t>(config.num_blocks) * static_cast<std::size_t>(config.block_size + 1), 0) {}

int BlockManager::blocks_needed(int seq, int tokens) const {
  check(tokens >= 0, "BlockManager::blocks_needed: tokens must be >= 0");
  const auto it = seqs_.find(seq);
  if (it == seqs_.end()) return blocks_for(tokens);  // an unknown seq starts empty
  const SeqBlocks& sb = it->second;
  const int have = static_cast<int>(sb.blocks.size());
  int needed = std::max(0, blocks_for(tokens) - have);
  if (tokens > sb.length) {
    // Existing blocks that this write touches and that are shared must be copied first.
    const int first = sb.length / config_.block_size;
    const int last = std::min(have - 1, (tokens - 1) / config_.block_size);
    for (int b = first; b <= last; ++b)
      if (pool_.ref_count(sb.blocks[static_cast<std::size_t>(b)]) > 1) ++needed;
  }
  return needed;
}

int BlockManager::blocks_needed(std::span<const int> seqs, int tokens) const {
  int needed = 0;
  std::vector<int> touched;  // shared blocks the writes touch, once per writer
  for (int seq : seqs) {
    const auto it = seqs_.find(seq);
    if (it == seqs_.end()) {
      needed += blocks_for(tokens);
      continue;
    }
    const SeqBlocks& sb = it->second;
    const int have = static_cast<int>(sb.blocks.size());
    needed += std::max(0, blocks_for(tokens) - have);
    if (tokens <= sb.length) continue;
    const int last = std::min(have - 1, (tokens - 1) / config_.block_size);
    for (int b = sb.length / config_.block_size; b <= last; ++b)
      if (pool_.ref_count(sb.blocks[static_cast<std::size_t>(b)]) > 1) touched.push_back(sb.blocks[static_cast<std::size_t>(b)]);
  }
  // w writers of a block with r references copy it w times, or w - 1 when they hold every
  // reference (the last one then writes in place).
  std::sort(touched.begin(), touched.end());
  for (std::size_t i = 0; i < touched.size();) {
    std::size_t j = i;
    while (j < touched.size() && touched[j] == touched[i]) ++j;
    const int writers = static_cast<int>(j - i);
    needed += pool_.ref_count(touched[i]) > writers ? writers : writers - 1;
    i = j;
  }
  return needed;
}

bool BlockManager::reserve(int seq, int tokens, std::vector<BlockCopy>& copies) {
  const int needed = blocks_needed(seq, tokens);
  if (!can_allocate(needed)) return false;
  SeqBlocks& sb = seqs_[seq];
  const int have = static_cast<int>(sb.blocks.size());
  if (tokens > sb.length && have > 0) {
    const int first = sb.length / config_.block_size;
    const int last = std::min(have - 1, (tokens - 1) / config_.block_size);
    for (int b = first; b <= last; ++b) {
      int& block = sb.blocks[static_cast<std::size_t>(b)];
      if (pool_.ref_count(block) <= 1) continue;
      const int copy = allocate_block();  // cannot fail: counted in blocks_needed
      copies.push_back({block, copy});
      const int held = written(sb.length, b);
      change_holder(block, held, 0);
      change_holder(copy, 0, held);
      release_block(block);
      block = copy;
    }
  }
  const int grow = blocks_for(tokens) - static_cast<int>(sb.blocks.size());
  if (pool_.contiguous() && grow > 0) {
    const int first = pool_.allocate_run(grow);  // cannot fail: free_blocks() is the largest run
    for (int b = first; b < first + grow; ++b) sb.blocks.push_back(b);
  }
  while (static_cast<int>(sb.blocks.size()) < blocks_for(tokens)) sb.blocks.push_back(allocate_block());
  note_peak();
  return true;
}

void BlockManager::set_length(int seq, int tokens) {
  const int cap = capacity(seq);  // throws on an unknown seq
  check(tokens >= 0 && tokens <= cap, [&] {
    return "BlockManager::set_length: seq " + std::to_string(seq) + " has capacity " + std::to_string(cap) +
           ", asked " + std::to_string(tokens);
  });
  SeqBlocks& sb = seqs_.at(seq);
  if (tokens < sb.length) {
    truncate(seq, tokens, true);
    return;
  }
  for (int b = sb.length / config_.block_size; b * config_.block_size < tokens; ++b)
    change_holder(sb.blocks[static_cast<std::size_t>(b)], written(sb.length, b), written(tokens, b));
  sb.length = tokens;
}

void BlockManager::truncate(int seq, int tokens, bool keep_capacity) {
  const int len = length(seq);  // throws on an unknown seq
  check(tokens >= 0 && tokens <= len, [&] {
    return "BlockManager::truncate: seq " + std::to_string(seq) + " holds " + std::to_string(len) + " tokens, asked " +
           std::to_string(tokens);
  });
  SeqBlocks& sb = seqs_.at(seq);
  for (int b = tokens / config_.block_size; b * config_.block_size < len; ++b)
    change_holder(sb.blocks[static_cast<std::size_t>(b)], written(len, b), written(tokens, b));
  sb.length = tokens;
  if (sb.published * config_.block_size > tokens) {  // re-derive the chain on the next publish
    sb.published = 0;
    sb.chain = 0;
  }
  if (keep_capacity) return;
  const auto keep = static_cast<std::size_t>(blocks_for(tokens));
  while (sb.blocks.size() > keep) {
    release_block(sb.blocks.back());
    sb.blocks.pop_back();
  }
}

void BlockManager::fork(int src, int dst) {
  check(has(src), [&] { return "BlockManager::fork: unknown source seq " + std::to_string(src); });
  check(!has(dst), [&] { return "BlockManager::fork: destination seq " + std::to_string(dst) + " already exists"; });
  SeqBlocks copy = seqs_.at(src);
  for (std::size_t b = 0; b < copy.blocks.size(); ++b) {
    pool_.retain(copy.blocks[b]);
    change_holder(copy.blocks[b], 0, written(copy.length, static_cast<int>(b)));
  }
  seqs_.emplace(dst, std::move(copy));
}

void BlockManager::free(int seq) {
  const auto it = seqs_.find(seq);
  check(it != seqs_.end(), [&] { return "BlockManager::free: unknown seq " + std::to_string(seq); });
  const SeqBlocks& sb = it->second;
  for (std::size_t b = 0; b < sb.blocks.size(); ++b) {
    change_holder(sb.blocks[b], written(sb.length, static_cast<int>(b)), 0);
    release_block(sb.blocks[b]);
  }
  seqs_.erase(it);
}

int BlockManager::length(int seq) const {
  const auto it = seqs_.find(seq);
  check(it != seqs_.end(), [&] { return "BlockManager::length: unknown seq " + std::to_string(seq); });
  return it->second.length;
}

int BlockManager::capacity(int seq) const {
  const auto it = seqs_.find(seq);
  check(it != seqs_.end(), [&] { return "BlockManager::capacity: unknown seq " + std::to_string(seq); });
  return static_cast<int>(it->second.blocks.size()) * config_.block_size;
}

std::span<const int> BlockManager::block_table(int seq) const {
  const auto it = seqs_.find(seq);
  check(it != seqs_.end(), [&] { return "BlockManager::block_table: unknown seq " + std::to_string(seq); });
  return it->second.blocks;
}

int BlockManager::slot(int seq, int pos) const {
  const auto table = block_table(seq);
  const int cap = static_cast<int>(table.size()) * config_.block_size;
  check(pos >= 0 && pos < cap, [&] {
    return "BlockManager::slot: position " + std::to_string(pos) + " outside seq " + std::to_string(seq) +
           "'s capacity " + std::to_string(cap);
  });
  return table[static_cast<std::size_t>(pos / config_.block_size)] * config_.block_size +
         pos % config_.block_size;
}

KvStats BlockManager::stats() const {
  KvStats s;
  s.blocks_total = pool_.total();
  s.blocks_free = pool_.free_count() + static_cast<int>(evictable_.size());
  s.blocks_cached = static_cast<int>(evictable_.size());
  s.blocks_reserved = s.blocks_total - s.blocks_free;
  s.blocks_used = blocks_used_;
  s.tokens_stored = tokens_stored_;
  return s;
}

int BlockManager::written(int length, int b) const {
  return std::clamp(length - b * config_.block_size, 0, config_.block_size);
}

void BlockManager::change_holder(int block, int from, int to) {
  if (from == to) return;
  const std::size_t row = static_cast<std::size_t>(block) * static_cast<std::size_t>(config_.block_size + 1);
  if (from > 0) --holders_[row + static_cast<std::size_t>(from)];
  if (to > 0) ++holders_[row + static_cast<std::size_t>(to)];
  int& v = valid_[static_cast<std::size_t>(block)];
  int now = v;
  if (to > now) {
    now = to;
  } else if (from == now) {  // the most written holder left or shrank: the next most, if any
    while (now > 0 && holders_[row + static_cast<std::size_t>(now)] == 0) --now;
  }
  blocks_used_ += (now > 0) - (v > 0);
  tokens_stored_ += now - v;
  v = now;
}

void BlockManager::note_peak() {
  peak_reserved_ = std::max(peak_reserved_, pool_.total() - pool_.free_count() - static_cast<int>(evictable_.size()));
}

// ---- prefix caching -------------------------------------------------------------------------

namespace {

// Extends a hash chain by one block of token ids.
std::uint64_t chain_hash(std::uint64_t parent, std::span<const int> block) {
  std::uint64_t h = parent ^ 0x9E3779B97F4A7C15ull;
  for (int t : block) {
    h ^= static_cast<std::uint64_t>(static_cast<std::uint32_t>(t));
    h *= 0x100000001b3ull;
    h ^= h >> 29;
  }
  return h * 0xBF58476D1CE4E5B9ull ^ (h >> 31);
}

}  // namespace

int BlockManager::allocate_block() {
  int block = pool_.allocate();
  if (block >= 0 || evictable_.empty()) return block;
  const int victim = evictable_.front();  // least recently released
  evictable_.pop_front();
  prefix_index_.erase(cached_.at(victim).hash);
  cached_.erase(victim);
  pool_.release(victim);  // the cache's reference was the last one
  return pool_.allocate();
}

void BlockManager::release_block(int block) {
  pool_.release(block);
  auto it = cached_.find(block);
  if (it != cached_.end() && pool_.ref_count(block) == 1 && !it->second.evictable) {
    it->second.evictable = true;
    it->second.where = evictable_.insert(evictable_.end(), block);
  }
}

void BlockManager::match_prefix(std::span<const int> tokens, int max_tokens, std::vector<int>& blocks) const {
  blocks.clear();
  if (!config_.prefix_caching) return;
  const int bs = config_.block_size;
  const int limit = std::min<int>(max_tokens, static_cast<int>(tokens.size()));
  std::uint64_t chain = 0;
  for (int b = 0; (b + 1) * bs <= limit; ++b) {
    const auto block_tokens = tokens.subspan(static_cast<std::size_t>(b * bs), static_cast<std::size_t>(bs));
    chain = chain_hash(chain, block_tokens);
    const auto found = prefix_index_.find(chain);
    if (found == prefix_index_.end()) break;
    const CachedBlock& entry = cached_.at(found->second);
    if (!std::equal(entry.tokens.begin(), entry.tokens.end(), block_tokens.begin())) break;
    blocks.push_back(found->second);
  }
}

int BlockManager::acquire_prefix(int seq, std::span<const int> tokens, int max_tokens) {
  if (!config_.prefix_caching) return 0;
  check(!has(seq), [&] { return "BlockManager::acquire_prefix: seq " + std::to_string(seq) + " already exists"; });
  SeqBlocks sb;
  match_prefix(tokens, max_tokens, sb.blocks);
  if (sb.blocks.empty()) return 0;
  const int bs = config_.block_size;
  for (int block : sb.blocks) {
    pool_.retain(block);
    CachedBlock& entry = cached_.at(block);
    if (entry.evictable) {
      evictable_.erase(entry.where);
      entry.evictable = false;
    }
    change_holder(block, 0, bs);
    sb.chain = entry.hash;
  }
  const int matched = static_cast<int>(sb.blocks.size()) * bs;
  sb.length = matched;
  sb.published = static_cast<int>(sb.blocks.size());
  seqs_.emplace(seq, std::move(sb));
  note_peak();
  return matched;
}

int BlockManager::seq_refs(int block) const {
  const auto it = cached_.find(block);
  return pool_.ref_count(block) - (it != cached_.end() ? 1 : 0);
}

void BlockManager::publish_prefix(int seq, std::span<const int> tokens) {
  if (!config_.prefix_caching) return;
  SeqBlocks& sb = seqs_.at(seq);
  const int bs = config_.block_size;
  const int full = std::min(sb.length, static_cast<int>(tokens.size())) / bs;
  for (int b = sb.published; b < full; ++b) {
    const auto block_tokens = tokens.subspan(static_cast<std::size_t>(b * bs), static_cast<std::size_t>(bs));
    sb.chain = chain_hash(sb.chain, block_tokens);
    const int block = sb.blocks[static_cast<std::size_t>(b)];
    if (prefix_index_.count(sb.chain) || cached_.count(block)) continue;  // already indexed
    pool_.retain(block);  // the cache's own reference
    cached_[block] = CachedBlock{sb.chain, std::vector<int>(block_tokens.begin(), block_tokens.end()), false, {}};
    prefix_index_[sb.chain] = block;
  }
  sb.published = std::max(sb.published, full);
}

}  // namespace inferlab
