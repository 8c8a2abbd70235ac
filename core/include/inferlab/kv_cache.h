// Paged KV cache: one pool of fixed-size blocks shared by all layers' K and V, per-sequence
// block tables, ref-counted blocks (fork shares them, writes copy on write), allocation on
// demand. A block_size >= the longest sequence with reserve_full reproduces contiguous
// pre-allocation. A full cache is a return value (false), never an exception.
#pragma once
#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "inferlab/model_config.h"

namespace inferlab {

enum class KvDtype { kF32 };
const char* kv_dtype_name(KvDtype dtype);

struct KvCacheConfig {
  int block_size = 16;     // tokens per block
  int num_blocks = 0;      // blocks in the pool (0 = engine picks from the workload)
  bool reserve_full = false;  // reserve prompt + max output at admission (contiguous-style)
  bool prefix_caching = false;  // keep computed full blocks for reuse by later sequences
  // false = the no-KV-cache baseline: a sequence's K/V are dropped once a step has produced its
  // next token, so every token recomputes the whole sequence (the engine applies this).
  bool enabled = true;
};

// Read-only view of one layer's storage for attention kernels.
struct KvLayerView {
  const float* k = nullptr;  // [num_blocks, block_size, n_kv_heads, head_dim]
  const float* v = nullptr;  // [num_blocks, block_size, n_kv_heads, head_dim]
  int block_size = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  // Start of the K (or V) vector of `kv_head` at a physical slot (block * block_size + offset).
  const float* k_at(int slot, int kv_head) const {
    return k + (static_cast<std::size_t>(slot) * n_kv_heads + kv_head) * head_dim;
  }
  const float* v_at(int slot, int kv_head) const {
    return v + (static_cast<std::size_t>(slot) * n_kv_heads + kv_head) * head_dim;
  }
};

// Ref-counted pool of block ids. allocate() returns -1 when empty.
class BlockPool {
 public:
  explicit BlockPool(int num_blocks);
  int allocate();
  void retain(int block);
  void release(int block);  // frees the block when its count reaches zero
  int ref_count(int block) const { return refs_.at(static_cast<std::size_t>(block)); }
  int free_count() const { return static_cast<int>(free_.size()); }
  int total() const { return static_cast<int>(refs_.size()); }

 private:
  std::vector<int> refs_;
  std::vector<int> free_;  // stack; lowest ids handed out first
};

struct KvStats {
  int blocks_total = 0;
  int blocks_reserved = 0;  // allocated to some sequence (distinct blocks)
  int blocks_used = 0;      // holding at least one valid token
  int blocks_free = 0;      // allocatable: never used, or cached and held by no sequence
  int blocks_cached = 0;    // prefix-cached blocks held by no sequence (counted in blocks_free)
  long long tokens_stored = 0;  // valid tokens over all sequences (shared blocks counted once)
};

class KvCache {
 public:
  KvCache(const ModelConfig& model, const KvCacheConfig& config);

  const KvCacheConfig& config() const { return config_; }
  int block_size() const { return config_.block_size; }
  int blocks_for(int tokens) const { return (tokens + config_.block_size - 1) / config_.block_size; }

  // Blocks that must be newly allocated for `seq` to hold `tokens` tokens and to write
  // positions [length(seq), tokens) (including copies of shared blocks to be written).
  int blocks_needed(int seq, int tokens) const;
  bool can_allocate(int blocks) const { return free_blocks() >= blocks; }
  // Blocks a reservation can take: free ones plus cached ones no sequence holds (evicted least
  // recently released first).
  int free_blocks() const { return pool_.free_count() + static_cast<int>(evictable_.size()); }
  // Grows seq's block table to hold `tokens` tokens and makes the blocks covering
  // [length, tokens) private (copy on write). Returns false, changing nothing, when the pool
  // cannot supply blocks_needed(seq, tokens).
  bool reserve(int seq, int tokens);
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
  // Indexes seq's full blocks among its first length(seq) tokens; `tokens` are its token ids.
  void publish_prefix(int seq, std::span<const int> tokens);
  void free(int seq);
  bool has(int seq) const { return seqs_.count(seq) != 0; }
  int length(int seq) const;
  int capacity(int seq) const;
  std::span<const int> block_table(int seq) const;
  // Physical slot of position pos of seq (block * block_size + offset).
  int slot(int seq, int pos) const;

  // Storage of one layer. Writes go through k_slot/v_slot: [n_kv_heads * head_dim] floats.
  KvLayerView layer(int l) const;
  float* k_slot(int l, int slot) { return k_[static_cast<std::size_t>(l)].data() + static_cast<std::size_t>(slot) * kv_dim_; }
  float* v_slot(int l, int slot) { return v_[static_cast<std::size_t>(l)].data() + static_cast<std::size_t>(slot) * kv_dim_; }

  KvStats stats() const;
  int peak_blocks_reserved() const { return peak_reserved_; }
  std::uint64_t bytes() const;  // storage of the whole pool

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
  void copy_block(int from, int to);
  void note_peak();

  KvCacheConfig config_;
  int n_layers_, n_kv_heads_, head_dim_, kv_dim_;
  BlockPool pool_;
  std::vector<std::vector<float>> k_, v_;  // per layer: [num_blocks * block_size * kv_dim]
  std::unordered_map<int, SeqBlocks> seqs_;
  std::unordered_map<std::uint64_t, int> prefix_index_;  // chain hash -> block
  std::unordered_map<int, CachedBlock> cached_;          // block -> its index entry
  std::list<int> evictable_;                              // least recently released first
  int peak_reserved_ = 0;
};

}  // namespace inferlab
