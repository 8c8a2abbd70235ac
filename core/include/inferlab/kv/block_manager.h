// The host half of the paged KV cache: a ref-counted pool of block ids, per-sequence block
// tables and lengths, copy on write, and the prefix-cache index. It never touches K/V data:
// a write into a shared block returns the copy to make (BlockCopy) and the caller's KvStorage
// makes it. A full pool is a return value (false), never an exception.
#pragma once
#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "inferlab/kv/kv_cache.h"

namespace inferlab {

// Ref-counted pool of block ids. allocate() returns -1 when empty; the lowest free id first.
// A contiguous pool hands out runs of consecutive ids instead (allocate_run, first fit), as a
// cache without block tables must place each sequence's region.
class BlockPool {
 public:
  explicit BlockPool(int num_blocks, bool contiguous = false);
  int allocate();            // paged pools only
  // First block of the lowest run of n consecutive free blocks, all taken; -1 when none. O(total).
  int allocate_run(int n);   // contiguous pools only
  void retain(int block);
  void release(int block);  // frees the block when its count reaches zero
  int ref_count(int block) const { return refs_.at(static_cast<std::size_t>(block)); }
  int free_count() const { return free_count_; }
  int total() const { return static_cast<int>(refs_.size()); }
  bool contiguous() const { return contiguous_; }
  // The longest run of consecutive free blocks. O(total).
  int largest_free_run() const;
  // Free blocks lying in runs shorter than n blocks (holes no n-block region fits). O(total).
  int free_in_runs_shorter_than(int n) const;

 private:
  bool contiguous_ = false;
  int free_count_ = 0;
  std::vector<int> refs_;
  std::vector<int> free_;  // paged: min-heap of the free ids (unused when contiguous)
};

class BlockManager {
 public:
  explicit BlockManager(const KvCacheConfig& config);

  const KvCacheConfig& config() const { return config_; }
  int block_size() const { return config_.block_size; }
  int num_blocks() const { return config_.num_blocks; }
  int blocks_for(int tokens) const { return (tokens + config_.block_size - 1) / config_.block_size; }

  // Blocks that must be newly allocated for `seq` to hold `tokens` tokens and to write
  // positions [length(seq), tokens) (including copies of shared blocks to be written).
  int blocks_needed(int seq, int tokens) const;
  // The same for every seq in `seqs` growing to `tokens` in turn (a request's branches): a
  // shared block that only they hold is copied by every writer but the last, which then holds
  // it alone and writes in place.
  int blocks_needed(std::span<const int> seqs, int tokens) const;
  bool can_allocate(int blocks) const { return free_blocks() >= blocks; }
  // Blocks a reservation can take: free ones plus cached ones no sequence holds (evicted least
  // recently released first). A contiguous cache (config.contiguous()): the largest run of free
  // blocks, the most one new region can take.
  int free_blocks() const {
    return pool_.contiguous() ? pool_.largest_free_run() : pool_.free_count() + static_cast<int>(evictable_.size());
  }
  // Contiguous cache: free blocks in holes shorter than n blocks, which a region of n blocks
  // cannot use (external fragmentation); 0 for a paged cache, where any free block serves.
  int fragmented_blocks(int n) const { return pool_.contiguous() ? pool_.free_in_runs_shorter_than(n) : 0; }
  // Grows seq's block table to hold `tokens` tokens (in a contiguous cache the new blocks are
  // one run of consecutive ids) and makes the blocks covering
  // [length, tokens) private: each shared block is replaced by a fresh one, and the copy the
  // storage must make is appended to `copies`. Returns false, changing nothing, when the pool
  // cannot supply blocks_needed(seq, tokens).
  bool reserve(int seq, int tokens, std::vector<BlockCopy>& copies);
  // Declares positions [0, tokens) valid (after the model wrote them). tokens <= capacity.
  void set_length(int seq, int tokens);
  // Rolls back to `tokens` valid tokens; releases blocks past the ones needed when
  // keep_capacity is false.
  void truncate(int seq, int tokens, bool keep_capacity);
  // dst shares all of src's blocks (ref counted) and its length.
  void fork(int src, int dst);

  // Prefix caching (config.prefix_caching; no-ops otherwise). Full blocks whose K/V are
  // computed are indexed by a hash chain over their token ids (verified token by token on a
  // match) and outlive the sequences that wrote them until the pool needs the space.
  // Gives `seq` (which must not exist yet) the cached blocks matching the longest run of full
  // blocks at the start of tokens[0, max_tokens); returns the tokens matched (a multiple of
  // block_size, 0 when nothing matched, in which case seq is not created).
  int acquire_prefix(int seq, std::span<const int> tokens, int max_tokens);
  // The blocks acquire_prefix would give now, in order, without taking them (`blocks` is
  // cleared first; empty when prefix caching is off). Only an eviction or a publish changes it.
  void match_prefix(std::span<const int> tokens, int max_tokens, std::vector<int>& blocks) const;
  // Sequences holding `block` (its references less the prefix cache's own): 0 for a free or an
  // evictable block. Freeing every holder makes it allocatable (free_blocks counts it).
  int seq_refs(int block) const;
  // Indexes seq's full blocks among its first length(seq) tokens; `tokens` are its token ids.
  void publish_prefix(int seq, std::span<const int> tokens);
  void free(int seq);
  bool has(int seq) const { return seqs_.count(seq) != 0; }
  int length(int seq) const;
  int capacity(int seq) const;
  std::span<const int> block_table(int seq) const;
  // Physical slot of position pos of seq (block * block_size + offset).
  int slot(int seq, int pos) const;

  // O(1): kept exact by every call above (shared blocks count once; a block's valid tokens are
  // the most any sequence holding it has written there).
  KvStats stats() const;
  int peak_blocks_reserved() const { return peak_reserved_; }

 private:
  struct SeqBlocks {
    std::vector<int> blocks;
    int length = 0;
    int published = 0;             // leading blocks already offered to the prefix index
    std::uint64_t chain = 0;       // hash chain up to `published`
  };
  struct CachedBlock {
    std::uint64_t hash = 0;
    std::vector<int> tokens;       // the block's token ids, to verify a hash match
    bool evictable = false;        // only the cache holds it (it sits in evictable_ at `where`)
    std::list<int>::iterator where;
  };
  int allocate_block();            // evicts a cached block when the pool is empty
  void release_block(int block);   // a cached block left by its last sequence becomes evictable
  // Tokens a sequence of `length` tokens has written into its b-th block.
  int written(int length, int b) const;
  // One sequence's written tokens in `block` change from `from` to `to` (0 = not held);
  // keeps valid_, blocks_used_ and tokens_stored_ exact.
  void change_holder(int block, int from, int to);
  void note_peak();

  KvCacheConfig config_;
  BlockPool pool_;
  std::unordered_map<int, SeqBlocks> seqs_;
  std::unordered_map<std::uint64_t, int> prefix_index_;  // chain hash -> block
  std::unordered_map<int, CachedBlock> cached_;          // block -> its index entry
  std::list<int> evictable_;                              // least recently released first
  std::vector<int> valid_;     // [num_blocks] valid tokens: the most any holding sequence wrote
  std::vector<int> holders_;   // [num_blocks, block_size + 1] sequences holding it with t written
  int blocks_used_ = 0;
  long long tokens_stored_ = 0;
  int peak_reserved_ = 0;
};

}  // namespace inferlab
