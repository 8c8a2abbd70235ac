// Random paged-attention problems for attention tests and benchmarks: sequences of given
// context lengths and query rows, K/V scattered over a (optionally shuffled) block pool.
// Every slot no sequence may read (block tails past a context, spare blocks) holds NaN, so a
// kernel that reads outside a context produces NaN and fails the NaN check.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "inferlab/plugin/attention.h"
#include "inferlab/kv/kv_cache.h"
#include "inferlab/device/device.h"

namespace inferlab::testing {

struct SeqShape {
  int context_len = 1;  // tokens in the cache, this step's included
  int query_rows = 1;   // the last query_rows positions of the context are queried
};

struct AttentionProblemSpec {
  std::vector<SeqShape> seqs;
  int n_heads = 8;
  int n_kv_heads = 2;
  int head_dim = 16;
  int block_size = 16;
  bool shuffle_blocks = true;  // non-contiguous, non-monotonic block tables
  int spare_blocks = 3;        // NaN-filled blocks nobody owns
  float q_scale = 1.0f;        // q ~ N(0, q_scale^2); large values make peaked softmaxes
  std::uint64_t seed = 1;
  // The stored K/V format (both sides): the values are drawn as for f32, then stored by
  // kv_quantize_row (int8 / int4 in groups of kv_group, 0 = head_dim); reference_output reads
  // them back through the same view.
  KvDtype kv_dtype = KvDtype::kF32;
  int kv_group = 0;
  // With kv_dtype f32: each value rounded through this format first (stored and read back), so
  // an f32 cache holds exactly what a cache of that format stands for.
  KvDtype kv_values_of = KvDtype::kF32;
};

class AttentionProblem {
 public:
  explicit AttentionProblem(const AttentionProblemSpec& spec);
  AttentionProblem(const AttentionProblem&) = delete;  // batch() points into this object
  AttentionProblem& operator=(const AttentionProblem&) = delete;

  const AttentionProblemSpec& spec() const { return spec_; }
  AttentionBatch batch() const;  // scale = 1 / sqrt(head_dim)
  KvLayerView kv() const;
  const float* q() const { return q_.data(); }  // [rows, n_heads, head_dim]
  int rows() const { return query_start_.back(); }
  std::size_t out_size() const { return q_.size(); }  // floats of [rows, n_heads, head_dim]
  // Floats of K and V a kernel must read at least once (every context token, every kv head).
  std::size_t kv_floats_read() const;

 private:
  AttentionProblemSpec spec_;
  std::vector<int> query_start_;             // [n_seqs + 1]
  std::vector<int> context_len_;             // [n_seqs]
  std::vector<int> block_table_;             // [n_seqs, max_blocks] padded with -1
  int max_blocks_ = 0;
  int num_blocks_ = 0;
  std::vector<float> k_, v_;  // [num_blocks, block_size, n_kv_heads, head_dim]
  int kv_group() const { return spec_.kv_group > 0 ? spec_.kv_group : spec_.head_dim; }
  std::vector<unsigned char> k_codes_, v_codes_;  // kv_dtype != f32: the stored rows
  std::vector<float> k_params_, v_params_;
  std::vector<float> q_;      // [rows, n_heads, head_dim]
};

// The batch shapes the design calls hard: a prefill chunk in the middle of a sequence
// (context > rows), single decode rows (short and long contexts), a speculative-verify chunk
// (3 rows at the end of a long context) and a whole 129-token prefill.
std::vector<SeqShape> mixed_step_shapes();

// out [rows, n_heads, head_dim] of ref::ref_paged_attention on the problem.
std::vector<float> reference_output(const AttentionProblem& problem);
// out of `attention` on the problem; the buffer starts NaN-filled so unwritten rows show.
std::vector<float> run_attention(Attention& attention, const AttentionProblem& problem,
                                 Device& device);

// max |got - want| / max |want| (0 when both are all zero).
double max_relative_error(std::span<const float> got, std::span<const float> want);
// Count of NaN or infinite values.
std::size_t count_non_finite(std::span<const float> values);


}  // namespace inferlab::testing
