#include "model_fixtures.h"

#include <algorithm>

#include "inferlab/error.h"
#include "kernels/cpu/matmul.h"
#include "kernels/ref/attention.h"
#include "plugins/common/decoding/sampling.h"
#include "plugins/common/quantization/float_linear.h"
#if INFERLAB_HAVE_CUDA
#include "plugins/common/quantization/float_linear_cuda.h"
#endif

namespace inferlab::testing {
namespace {

class FloatLinear final : public Linear {
 public:
  FloatLinear(std::vector<float> w, int out, int in) : Linear(out, in), w_(std::move(w)) {
    check(w_.size() == static_cast<std::size_t>(out) * static_cast<std::size_t>(in), "FloatLinear: bad size");
  }
  void forward(const float* x, float* y, int n, Device& device) const override {
    cpu::matmul_f32(x, w_.data(), y, n, out_features(), in_features(), cpu_pool(device, "test FloatLinear"));
  }
  std::uint64_t weight_bytes() const override { return w_.size() * sizeof(float); }
  void dequantize_row(int row, float* out) const override {
    check_linear_row(*this, row, "test FloatLinear");
    std::copy_n(w_.data() + static_cast<std::size_t>(row) * static_cast<std::size_t>(in_features()), in_features(), out);
  }

 private:
  std::vector<float> w_;  // [out, in]
};

}  // namespace

std::unique_ptr<Linear> FloatQuantization::make_linear(const std::string& /*name*/, std::vector<float> weight,
                                                       int out, int in) {
  ++built_;
  return std::make_unique<FloatLinear>(std::move(weight), out, in);
}

std::vector<float> cpu_logits(const ModelWeights& weights, const std::vector<int>& tokens) {
  CpuDevice device(1);
  FloatQuantization quant;
  Model model(weights, quant, device);
  RefAttention attention;
  SequenceRunner runner(model, attention);
  return runner.feed_all_logits(tokens);
}

void RefAttention::forward(const AttentionBatch& batch, const KvLayerView& kv, const float* q, float* out,
                           Device& /*device*/) {
  ref::ref_paged_attention(batch, kv, q, out);
}

namespace {
int runner_blocks(const Model& model, int block_size, int num_blocks) {
  return num_blocks > 0 ? num_blocks : (model.config().max_seq_len + block_size - 1) / block_size;
}
}  // namespace

SequenceRunner::SequenceRunner(Model& model, Attention& attention, int block_size, int num_blocks,
                               const KvFormat& format)
    : model_(model),
      attention_(attention),
      kv_(KvCacheConfig{block_size, runner_blocks(model, block_size, num_blocks), false}),
      storage_(model.device(), model.config(), runner_blocks(model, block_size, num_blocks), block_size, format) {}

const std::vector<float>& SequenceRunner::feed(const std::vector<int>& tokens) { return step(tokens, false); }

const std::vector<float>& SequenceRunner::feed_all_logits(const std::vector<int>& tokens) {
  return step(tokens, true);
}

const std::vector<float>& SequenceRunner::step(const std::vector<int>& tokens, bool all_logits) {
  const int start = kv_.has(0) ? kv_.length(0) : 0;
  const int end = start + static_cast<int>(tokens.size());
  std::vector<BlockCopy> copies;  // one private sequence: never any
  check(kv_.reserve(0, end, copies), "SequenceRunner: KV cache full");
  batch_.clear();
  const int n = static_cast<int>(tokens.size());
  batch_.add_sequence(tokens, start, kv_.block_table(0), kv_.block_size(), all_logits ? 0 : n - 1, n);
  model_.forward(batch_, storage_, attention_, logits_);
  kv_.set_length(0, end);
  return logits_;
}

std::vector<int> generate_greedy(Model& model, Attention& attention, int bos, int max_steps) {
  SequenceRunner runner(model, attention);
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

std::unique_ptr<Quantization> none_quantization(Device& device) {
#if INFERLAB_HAVE_CUDA
  if (device.kind() == DeviceKind::kCuda) return std::make_unique<FloatCudaQuantization>(device);
#endif
  (void)device;
  return std::make_unique<NoQuantization>();
}

}  // namespace inferlab::testing
