#include "model_fixtures.h"

#include "inferlab/error.h"
#include "inferlab/sampling.h"
#include "kernels/cpu/matmul.h"
#include "kernels/ref/attention.h"

namespace inferlab::testing {
namespace {

class FloatLinear final : public Linear {
 public:
  FloatLinear(std::vector<float> w, int out, int in) : Linear(out, in), w_(std::move(w)) {
    check(w_.size() == static_cast<std::size_t>(out) * static_cast<std::size_t>(in), "FloatLinear: bad size");
  }
  void forward(const float* x, float* y, int n, ThreadPool& pool) const override {
    cpu::matmul_f32(x, w_.data(), y, n, out_features(), in_features(), pool);
  }
  std::uint64_t weight_bytes() const override { return w_.size() * sizeof(float); }

 private:
  std::vector<float> w_;  // [out, in]
};

}  // namespace

std::unique_ptr<Linear> FloatQuantization::make_linear(const std::string& /*name*/, std::vector<float> weight,
                                                       int out, int in) {
  ++built_;
  return std::make_unique<FloatLinear>(std::move(weight), out, in);
}

void RefAttention::forward(const AttentionBatch& batch, const KvLayerView& kv, const float* q, float* out,
                           ThreadPool& /*pool*/) {
  ref::ref_paged_attention(batch, kv, q, out);
}

SequenceRunner::SequenceRunner(Model& model, Attention& attention, ThreadPool& pool, int block_size,
                               int num_blocks)
    : model_(model),
      attention_(attention),
      pool_(pool),
      kv_(model.config(), KvCacheConfig{block_size,
                                        num_blocks > 0 ? num_blocks
                                                       : (model.config().max_seq_len + block_size - 1) / block_size,
                                        false}) {}

const std::vector<float>& SequenceRunner::feed(const std::vector<int>& tokens) { return step(tokens, false); }

const std::vector<float>& SequenceRunner::feed_all_logits(const std::vector<int>& tokens) {
  return step(tokens, true);
}

const std::vector<float>& SequenceRunner::step(const std::vector<int>& tokens, bool all_logits) {
  const int start = kv_.has(0) ? kv_.length(0) : 0;
  const int end = start + static_cast<int>(tokens.size());
  check(kv_.reserve(0, end), "SequenceRunner: KV cache full");
  batch_.clear();
  for (int i = 0; i < static_cast<int>(tokens.size()); ++i) {
    batch_.tokens.push_back(tokens[static_cast<std::size_t>(i)]);
    batch_.positions.push_back(start + i);
    batch_.slots.push_back(kv_.slot(0, start + i));
    if (all_logits || i + 1 == static_cast<int>(tokens.size())) batch_.logit_rows.push_back(i);
  }
  batch_.query_start.push_back(static_cast<int>(tokens.size()));
  batch_.context_len.push_back(end);
  batch_.block_tables.push_back(kv_.block_table(0));
  model_.forward(batch_, kv_, attention_, pool_, logits_);
  kv_.set_length(0, end);
  return logits_;
}

std::vector<int> generate_greedy(Model& model, Attention& attention, ThreadPool& pool, int bos, int max_steps) {
  SequenceRunner runner(model, attention, pool);
  std::vector<int> out;
  int token = bos;
  for (int pos = 0; pos < max_steps; ++pos) {
    const std::vector<float>& logits = runner.feed({token});
    const int next = argmax(logits.data(), model.config().vocab_size);
    if (next == bos) break;
    out.push_back(next);
    token = next;
  }
  return out;
}

}  // namespace inferlab::testing
