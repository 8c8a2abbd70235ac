// Quantization strategy interface: builds each linear layer from float weights with its own
// storage and kernel, and chooses the KV cache storage format.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "inferlab/device.h"
#include "inferlab/kv_cache.h"

namespace inferlab {

class Linear {
 public:
  Linear(int out_features, int in_features) : out_(out_features), in_(in_features) {}
  virtual ~Linear() = default;
  // y[n, out] = x[n, in] · W^T, W being [out, in]; x and y are memory of `device`, the one
  // the strategy was created for. Bias, if any, is the model's business.
  virtual void forward(const float* x, float* y, int n, Device& device) const = 0;
  // Bytes of weight storage (including scales).
  virtual std::uint64_t weight_bytes() const = 0;
  int out_features() const { return out_; }
  int in_features() const { return in_; }

 private:
  int out_, in_;
};

class Quantization {
 public:
  virtual ~Quantization() = default;
  // `name` identifies the tensor ("layers.3.wq", "classifier") for strategies that treat
  // some layers differently. weight: [out, in], consumed.
  virtual std::unique_ptr<Linear> make_linear(const std::string& name, std::vector<float> weight,
                                              int out, int in) = 0;
  virtual KvDtype kv_dtype() const { return KvDtype::kF32; }
};

}  // namespace inferlab
