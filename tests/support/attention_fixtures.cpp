#include "attention_fixtures.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "inferlab/error.h"
#include "inferlab/support/rng.h"
#include "kernels/ref/attention.h"

namespace inferlab::testing {

AttentionProblem::AttentionProblem(const AttentionProblemSpec& spec) : spec_(spec) {
  check(spec.block_size > 0 && spec.head_dim > 0 && spec.n_kv_heads > 0 &&
            spec.n_heads % spec.n_kv_heads == 0,
        "AttentionProblem: bad head/block configuration");
  Rng rng(spec.seed);
  const int bs = spec.block_size;
  const std::size_t kv_dim = static_cast<std::size_t>(spec.n_kv_heads) * spec.head_dim;

  query_start_.push_back(0);
  int total_blocks = spec.spare_blocks;
  for (const SeqShape& s : spec.seqs) {
    check(s.query_rows >= 0 && s.query_rows <= s.context_len,
          "AttentionProblem: query_rows must lie in [0, context_len]");
    query_start_.push_back(query_start_.back() + s.query_rows);
    context_len_.push_back(s.context_len);
    total_blocks += (s.context_len + bs - 1) / bs;
  }

  // Physical block ids handed out in shuffled (or plain) order.
  std::vector<int> ids(static_cast<std::size_t>(total_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  if (spec.shuffle_blocks)
    for (std::size_t i = ids.size(); i > 1; --i)
      std::swap(ids[i - 1], ids[static_cast<std::size_t>(rng.uniform_int(0, static_cast<std::int64_t>(i)))]);

  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::size_t floats = static_cast<std::size_t>(total_blocks) * bs * kv_dim;
  k_.assign(floats, nan);
  v_.assign(floats, nan);
  num_blocks_ = total_blocks;
  for (const SeqShape& s : spec.seqs) max_blocks_ = std::max(max_blocks_, (s.context_len + bs - 1) / bs);
  std::size_t next = 0;
  for (const SeqShape& s : spec.seqs) {
    std::vector<int> table;
    for (int b = 0; b < (s.context_len + bs - 1) / bs; ++b) table.push_back(ids[next++]);
    for (int p = 0; p < s.context_len; ++p) {
      const std::size_t slot = static_cast<std::size_t>(table[static_cast<std::size_t>(p / bs)]) * bs + p % bs;
      for (std::size_t c = 0; c < kv_dim; ++c) {
        k_[slot * kv_dim + c] = static_cast<float>(rng.uniform() * 2.0 - 1.0);
        v_[slot * kv_dim + c] = static_cast<float>(rng.uniform() * 2.0 - 1.0);
      }
    }
    table.resize(static_cast<std::size_t>(max_blocks_), -1);  // padding nobody may read
    block_table_.insert(block_table_.end(), table.begin(), table.end());
  }

  q_.resize(static_cast<std::size_t>(rows()) * spec.n_heads * spec.head_dim);
  for (float& x : q_) x = static_cast<float>(rng.normal()) * spec.q_scale;

  const int g = kv_group();
  if (spec.kv_dtype == KvDtype::kF32 && spec.kv_values_of != KvDtype::kF32) {
    const int d = spec.head_dim;
    const std::size_t cb = kv_code_bytes(spec.kv_values_of, d), pf = kv_param_floats(spec.kv_values_of, d, g);
    std::vector<unsigned char> codes(cb);
    std::vector<float> params(pf + 1);
    for (std::vector<float>* side : {&k_, &v_})
      for (std::size_t c = 0; c * d < side->size(); ++c) {
        float* x = side->data() + c * d;
        if (std::isnan(x[0])) continue;
        kv_quantize_row(spec.kv_values_of, g, x, d, codes.data(), params.data());
        kv_dequantize_row(spec.kv_values_of, g, codes.data(), params.data(), d, x);
      }
  }
  if (spec.kv_dtype != KvDtype::kF32) {  // every cell stored, the NaN ones as NaN half / codes 0xFF
    const int d = spec.head_dim;
    const std::size_t cells = static_cast<std::size_t>(total_blocks) * bs * spec.n_kv_heads;
    const std::size_t cb = kv_code_bytes(spec.kv_dtype, d), pf = kv_param_floats(spec.kv_dtype, d, g);
    k_codes_.assign(cells * cb, 0xFF);
    v_codes_.assign(cells * cb, 0xFF);
    k_params_.assign(cells * pf, nan);
    v_params_.assign(cells * pf, nan);
    for (std::size_t c = 0; c < cells; ++c) {
      if (std::isnan(k_[c * d])) continue;
      kv_quantize_row(spec.kv_dtype, g, k_.data() + c * d, d, k_codes_.data() + c * cb, k_params_.data() + c * pf);
      kv_quantize_row(spec.kv_dtype, g, v_.data() + c * d, d, v_codes_.data() + c * cb, v_params_.data() + c * pf);
    }
  }
}

AttentionBatch AttentionProblem::batch() const {
  AttentionBatch b;
  b.query_start = query_start_;
  b.context_len = context_len_;
  b.block_table = block_table_;
  b.max_blocks = max_blocks_;
  b.n_heads = spec_.n_heads;
  b.n_kv_heads = spec_.n_kv_heads;
  b.head_dim = spec_.head_dim;
  b.scale = 1.0f / std::sqrt(static_cast<float>(spec_.head_dim));
  return b;
}

KvLayerView AttentionProblem::kv() const {
  KvLayerView view;
  view.k = k_.data();
  view.v = v_.data();
  if (spec_.kv_dtype != KvDtype::kF32) {
    view.k_dtype = view.v_dtype = spec_.kv_dtype;
    view.k = k_codes_.data();
    view.v = v_codes_.data();
    view.k_params = k_params_.empty() ? nullptr : k_params_.data();
    view.v_params = v_params_.empty() ? nullptr : v_params_.data();
    view.group_size = kv_group();
  }
  view.num_blocks = num_blocks_;
  view.block_size = spec_.block_size;
  view.n_kv_heads = spec_.n_kv_heads;
  view.head_dim = spec_.head_dim;
  return view;
}

std::size_t AttentionProblem::kv_floats_read() const {
  std::size_t tokens = 0;
  for (int c : context_len_) tokens += static_cast<std::size_t>(c);
  return 2 * tokens * static_cast<std::size_t>(spec_.n_kv_heads) * spec_.head_dim;
}

std::vector<SeqShape> mixed_step_shapes() {
  return {
      {40, 7},     // prefill chunk mid-sequence: rows 33..39
      {1, 1},      // first decode-style row of a new sequence
      {77, 1},     // decode, context ends inside a block
      {300, 3},    // speculative verify: 3 rows at the end of a long context
      {129, 129},  // whole prefill of an awkward length
      {16, 1},     // decode, context ends exactly on a block boundary
  };
}

std::vector<float> reference_output(const AttentionProblem& problem) {
  std::vector<float> out(problem.out_size(), std::numeric_limits<float>::quiet_NaN());
  ref::ref_paged_attention(problem.batch(), problem.kv(), problem.q(), out.data());
  return out;
}

std::vector<float> run_attention(Attention& attention, const AttentionProblem& problem,
                                 Device& device) {
  std::vector<float> out(problem.out_size(), std::numeric_limits<float>::quiet_NaN());
  attention.forward(problem.batch(), problem.kv(), problem.q(), out.data(), device);
  return out;
}

double max_relative_error(std::span<const float> got, std::span<const float> want) {
  check(got.size() == want.size(), "max_relative_error: sizes differ");
  double max_diff = 0.0, max_want = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i]) || !std::isfinite(want[i]))
      return std::numeric_limits<double>::infinity();
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(got[i]) - want[i]));
    max_want = std::max(max_want, std::fabs(static_cast<double>(want[i])));
  }
  if (max_want == 0.0) return max_diff;
  return max_diff / max_want;
}

std::size_t count_non_finite(std::span<const float> values) {
  return static_cast<std::size_t>(
      std::count_if(values.begin(), values.end(), [](float x) { return !std::isfinite(x); }));
}

}  // namespace inferlab::testing
