// Paged KV cache: block pool with ref counts, per-sequence block tables, copy on write.
#include "inferlab/kv_cache.h"

#include <algorithm>
#include <functional>
#include <string>

#include "inferlab/error.h"

namespace inferlab {

const char* kv_dtype_name(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF32:
      return "f32";
  }
  return "unknown";
}

// ---- BlockPool ----------------------------------------------------------------------------
// free_ is a min-heap (std::greater) so allocate() always returns the lowest free id: block
// placement is deterministic whatever order blocks were released in.

BlockPool::BlockPool(int num_blocks) {
  check(num_blocks >= 0, "BlockPool: num_blocks must be >= 0, got " + std::to_string(num_blocks));
  refs_.assign(static_cast<std::size_t>(num_blocks), 0);
  free_.reserve(static_cast<std::size_t>(num_blocks));
  for (int b = 0; b < num_blocks; ++b) free_.push_back(b);  // ascending = valid min-heap
}

int BlockPool::allocate() {
  if (free_.empty()) return -1;
  std::pop_heap(free_.begin(), free_.end(), std::greater<int>());
  const int block = free_.back();
  free_.pop_back();
  refs_[static_cast<std::size_t>(block)] = 1;
  return block;
}

void BlockPool::retain(int block) {
  check(block >= 0 && block < total(), "BlockPool::retain: no block " + std::to_string(block));
  int& ref = refs_[static_cast<std::size_t>(block)];
  check(ref > 0, "BlockPool::retain: block " + std::to_string(block) + " is free");
  ++ref;
}

void BlockPool::release(int block) {
  check(block >= 0 && block < total(), "BlockPool::release: no block " + std::to_string(block));
  int& ref = refs_[static_cast<std::size_t>(block)];
  check(ref > 0, "BlockPool::release: block " + std::to_string(block) + " is already free");
  if (--ref == 0) {
    free_.push_back(block);
    std::push_heap(free_.begin(), free_.end(), std::greater<int>());
  }
}

// ---- KvCache ------------------------------------------------------------------------------

namespace {

int checked_num_blocks(const KvCacheConfig& config) {
  check(config.block_size > 0,
        "KvCache: block_size must be > 0, got " + std::to_string(config.block_size));
  check(config.num_blocks > 0, "KvCache: num_blocks must be > 0 when the cache is built, got " +
                                   std::to_string(config.num_blocks) +
                                   " (0 means the engine must pick a size first)");
  return config.num_blocks;
}

}  // namespace

KvCache::KvCache(const ModelConfig& model, const KvCacheConfig& config)
    : config_(config),
      n_layers_(model.n_layers),
      n_kv_heads_(model.n_kv_heads),
      head_dim_(model.n_heads > 0 ? model.head_dim() : 0),
      kv_dim_(model.n_heads > 0 ? model.kv_dim() : 0),
      pool_(checked_num_blocks(config)) {
  check(n_layers_ > 0 && n_kv_heads_ > 0 && head_dim_ > 0,
        "KvCache: model '" + model.name + "' needs n_layers, n_heads, n_kv_heads and dim > 0");
  const std::size_t floats = static_cast<std::size_t>(config_.num_blocks) *
                             static_cast<std::size_t>(config_.block_size) *
                             static_cast<std::size_t>(kv_dim_);
  k_.assign(static_cast<std::size_t>(n_layers_), std::vector<float>(floats, 0.0f));
  v_.assign(static_cast<std::size_t>(n_layers_), std::vector<float>(floats, 0.0f));
}

int KvCache::blocks_needed(int seq, int tokens) const {
  check(tokens >= 0, "KvCache::blocks_needed: tokens must be >= 0");
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

bool KvCache::reserve(int seq, int tokens) {
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
      const int copy = pool_.allocate();  // cannot fail: counted in blocks_needed
      copy_block(block, copy);
      pool_.release(block);
      block = copy;
    }
  }
  while (static_cast<int>(sb.blocks.size()) < blocks_for(tokens)) sb.blocks.push_back(pool_.allocate());
  note_peak();
  return true;
}

void KvCache::set_length(int seq, int tokens) {
  const int cap = capacity(seq);  // throws on an unknown seq
  check(tokens >= 0 && tokens <= cap, "KvCache::set_length: seq " + std::to_string(seq) +
                                          " has capacity " + std::to_string(cap) + ", asked " +
                                          std::to_string(tokens));
  seqs_.at(seq).length = tokens;
}

void KvCache::truncate(int seq, int tokens, bool keep_capacity) {
  const int len = length(seq);  // throws on an unknown seq
  check(tokens >= 0 && tokens <= len, "KvCache::truncate: seq " + std::to_string(seq) +
                                          " holds " + std::to_string(len) + " tokens, asked " +
                                          std::to_string(tokens));
  SeqBlocks& sb = seqs_.at(seq);
  sb.length = tokens;
  if (keep_capacity) return;
  const auto keep = static_cast<std::size_t>(blocks_for(tokens));
  while (sb.blocks.size() > keep) {
    pool_.release(sb.blocks.back());
    sb.blocks.pop_back();
  }
}

void KvCache::fork(int src, int dst) {
  check(has(src), "KvCache::fork: unknown source seq " + std::to_string(src));
  check(!has(dst), "KvCache::fork: destination seq " + std::to_string(dst) + " already exists");
  SeqBlocks copy = seqs_.at(src);
  for (int block : copy.blocks) pool_.retain(block);
  seqs_.emplace(dst, std::move(copy));
}

void KvCache::free(int seq) {
  const auto it = seqs_.find(seq);
  check(it != seqs_.end(), "KvCache::free: unknown seq " + std::to_string(seq));
  for (int block : it->second.blocks) pool_.release(block);
  seqs_.erase(it);
}

int KvCache::length(int seq) const {
  const auto it = seqs_.find(seq);
  check(it != seqs_.end(), "KvCache::length: unknown seq " + std::to_string(seq));
  return it->second.length;
}

int KvCache::capacity(int seq) const {
  const auto it = seqs_.find(seq);
  check(it != seqs_.end(), "KvCache::capacity: unknown seq " + std::to_string(seq));
  return static_cast<int>(it->second.blocks.size()) * config_.block_size;
}

std::span<const int> KvCache::block_table(int seq) const {
  const auto it = seqs_.find(seq);
  check(it != seqs_.end(), "KvCache::block_table: unknown seq " + std::to_string(seq));
  return it->second.blocks;
}

int KvCache::slot(int seq, int pos) const {
  const auto table = block_table(seq);
  const int cap = static_cast<int>(table.size()) * config_.block_size;
  check(pos >= 0 && pos < cap, "KvCache::slot: position " + std::to_string(pos) +
                                   " outside seq " + std::to_string(seq) + "'s capacity " +
                                   std::to_string(cap));
  return table[static_cast<std::size_t>(pos / config_.block_size)] * config_.block_size +
         pos % config_.block_size;
}

KvLayerView KvCache::layer(int l) const {
  check(l >= 0 && l < n_layers_, "KvCache::layer: no layer " + std::to_string(l));
  KvLayerView view;
  view.k = k_[static_cast<std::size_t>(l)].data();
  view.v = v_[static_cast<std::size_t>(l)].data();
  view.block_size = config_.block_size;
  view.n_kv_heads = n_kv_heads_;
  view.head_dim = head_dim_;
  return view;
}

KvStats KvCache::stats() const {
  KvStats s;
  s.blocks_total = pool_.total();
  s.blocks_free = pool_.free_count();
  s.blocks_reserved = s.blocks_total - s.blocks_free;
  // Valid tokens per physical block: the most any sequence sharing it has written there.
  std::vector<int> valid(static_cast<std::size_t>(s.blocks_total), 0);
  for (const auto& [seq, sb] : seqs_) {
    const int full = sb.length / config_.block_size;
    const int rest = sb.length % config_.block_size;
    for (int b = 0; b < full; ++b) valid[static_cast<std::size_t>(sb.blocks[static_cast<std::size_t>(b)])] = config_.block_size;
    if (rest > 0) {
      int& v = valid[static_cast<std::size_t>(sb.blocks[static_cast<std::size_t>(full)])];
      v = std::max(v, rest);
    }
  }
  for (int v : valid) {
    if (v > 0) ++s.blocks_used;
    s.tokens_stored += v;
  }
  return s;
}

std::uint64_t KvCache::bytes() const {
  return 2ull * static_cast<std::uint64_t>(n_layers_) *
         static_cast<std::uint64_t>(config_.num_blocks) *
         static_cast<std::uint64_t>(config_.block_size) * static_cast<std::uint64_t>(kv_dim_) *
         sizeof(float);
}

void KvCache::copy_block(int from, int to) {
  const std::size_t span = static_cast<std::size_t>(config_.block_size) * static_cast<std::size_t>(kv_dim_);
  const std::size_t src = static_cast<std::size_t>(from) * span;
  const std::size_t dst = static_cast<std::size_t>(to) * span;
  for (int l = 0; l < n_layers_; ++l) {
    auto& k = k_[static_cast<std::size_t>(l)];
    auto& v = v_[static_cast<std::size_t>(l)];
    std::copy_n(k.begin() + static_cast<std::ptrdiff_t>(src), span, k.begin() + static_cast<std::ptrdiff_t>(dst));
    std::copy_n(v.begin() + static_cast<std::ptrdiff_t>(src), span, v.begin() + static_cast<std::ptrdiff_t>(dst));
  }
}

void KvCache::note_peak() {
  peak_reserved_ = std::max(peak_reserved_, pool_.total() - pool_.free_count());
}

}  // namespace inferlab
