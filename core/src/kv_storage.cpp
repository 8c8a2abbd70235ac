// Per-layer K/V storage on a device (see inferlab/kv_storage.h).
#include "inferlab/kv_storage.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "inferlab/error.h"

namespace inferlab {

KvStorage::KvStorage(Device& device, const ModelConfig& model, int num_blocks, int block_size, KvDtype dtype,
                     std::vector<bool> unused_layers)
    : device_(device),
      dtype_(dtype),
      n_layers_(model.n_layers),
      n_kv_heads_(model.n_kv_heads),
      head_dim_(model.n_heads > 0 ? model.head_dim() : 0),
      kv_dim_(model.n_heads > 0 ? model.kv_dim() : 0),
      num_blocks_(num_blocks),
      block_size_(block_size),
      unused_(std::move(unused_layers)) {
  check(n_layers_ > 0 && n_kv_heads_ > 0 && head_dim_ > 0,
        "KvStorage: model '" + model.name + "' needs n_layers, n_heads, n_kv_heads and dim > 0");
  check(num_blocks > 0 && block_size > 0, "KvStorage: num_blocks and block_size must be > 0, got " +
                                              std::to_string(num_blocks) + " and " + std::to_string(block_size));
  if (dtype != KvDtype::kF32 && dtype != KvDtype::kInt8)
    throw Error(std::string("KV cache dtype '") + kv_dtype_name(dtype) +
                "' is not implemented yet (allowed: f32, int8)");
  if (dtype == KvDtype::kInt8 && device.kind() != DeviceKind::kCpu)
    throw Error("KV cache dtype 'int8' runs on the CPU only (allowed here: f32)");
  const std::size_t bytes = static_cast<std::size_t>(slots()) * static_cast<std::size_t>(kv_dim_) * elem_bytes();
  const std::size_t scale_bytes = static_cast<std::size_t>(slots()) * static_cast<std::size_t>(n_kv_heads_) * sizeof(float);
  check(unused_.empty() || static_cast<int>(unused_.size()) == n_layers_,
        "KvStorage: unused-layer mask of " + std::to_string(unused_.size()) + " for " + std::to_string(n_layers_) + " layers");
  for (int l = 0; l < n_layers_; ++l) {
    if (!held(l)) {  // a skipped layer: no K/V memory
      k_.emplace_back();
      v_.emplace_back();
      if (dtype == KvDtype::kInt8) {
        k_scale_.emplace_back();
        v_scale_.emplace_back();
      }
      continue;
    }
    k_.emplace_back(device_, bytes);
    v_.emplace_back(device_, bytes);
    if (dtype == KvDtype::kInt8) {
      k_scale_.emplace_back(device_, scale_bytes);
      v_scale_.emplace_back(device_, scale_bytes);
    }
  }
}

KvLayerView KvStorage::layer(int l) const {
  check(l >= 0 && l < n_layers_ && held(l), "KvStorage::layer: no layer " + std::to_string(l) + " held");
  KvLayerView view;
  view.dtype = dtype_;
  view.k = k_[static_cast<std::size_t>(l)].data();
  view.v = v_[static_cast<std::size_t>(l)].data();
  if (dtype_ == KvDtype::kInt8) {
    view.k_scale = k_scale_[static_cast<std::size_t>(l)].as<float>();
    view.v_scale = v_scale_[static_cast<std::size_t>(l)].as<float>();
  }
  view.num_blocks = num_blocks_;
  view.block_size = block_size_;
  view.n_kv_heads = n_kv_heads_;
  view.head_dim = head_dim_;
  return view;
}

void KvStorage::write(int layer, const float* k, const float* v, const int* slots, int rows) {
  check(layer >= 0 && layer < n_layers_ && held(layer), "KvStorage::write: no layer " + std::to_string(layer) + " held");
  const std::size_t l = static_cast<std::size_t>(layer);
  if (dtype_ == KvDtype::kF32) {
    device_.kv_write_f32(k_[l].as<float>(), v_[l].as<float>(), k, v, slots, rows, kv_dim_);
    return;
  }
  // int8 (host memory): per (token, head) scale = max|x| / 127, codes round(x / scale).
  const std::size_t hd = static_cast<std::size_t>(head_dim_), nh = static_cast<std::size_t>(n_kv_heads_);
  auto quantize = [&](const float* src, Buffer& codes, Buffer& scales) {
    auto* q = codes.as<signed char>();
    float* sc = scales.as<float>();
    for (int r = 0; r < rows; ++r) {
      const std::size_t slot = static_cast<std::size_t>(slots[r]);
      for (std::size_t h = 0; h < nh; ++h) {
        const float* x = src + static_cast<std::size_t>(r) * kv_dim_ + h * hd;
        float amax = 0.0f;
        for (std::size_t c = 0; c < hd; ++c) amax = std::max(amax, std::fabs(x[c]));
        const float s = amax / 127.0f, inv = s > 0.0f ? 1.0f / s : 0.0f;
        sc[slot * nh + h] = s;
        signed char* dst = q + (slot * nh + h) * hd;
        for (std::size_t c = 0; c < hd; ++c)
          dst[c] = static_cast<signed char>(std::clamp(std::lround(x[c] * inv), -127L, 127L));
      }
    }
  };
  quantize(k, k_[l], k_scale_[l]);
  quantize(v, v_[l], v_scale_[l]);
}

std::size_t KvStorage::elem_bytes() const { return dtype_ == KvDtype::kInt8 ? 1 : sizeof(float); }

std::uint64_t KvStorage::bytes_per_token(const ModelConfig& model, KvDtype dtype, int held_layers) {
  const std::uint64_t per_layer = static_cast<std::uint64_t>(model.kv_dim()) * static_cast<std::uint64_t>(kv_dtype_bits(dtype)) / 8 +
                                  (dtype == KvDtype::kInt8 || dtype == KvDtype::kInt4 ? 4ull * model.n_kv_heads : 0ull);
  return 2ull * static_cast<std::uint64_t>(held_layers < 0 ? model.n_layers : held_layers) * per_layer;
}

void KvStorage::copy_blocks(std::span<const BlockCopy> copies) {
  const std::size_t span = static_cast<std::size_t>(block_size_) * static_cast<std::size_t>(kv_dim_) * elem_bytes();
  const std::size_t scale_span = static_cast<std::size_t>(block_size_) * static_cast<std::size_t>(n_kv_heads_) * sizeof(float);
  for (const BlockCopy& c : copies) {
    check(c.from >= 0 && c.from < num_blocks_ && c.to >= 0 && c.to < num_blocks_,
          "KvStorage::copy_blocks: block " + std::to_string(c.from) + " -> " + std::to_string(c.to) +
              " outside the pool of " + std::to_string(num_blocks_));
    for (int l = 0; l < n_layers_; ++l) {
      if (!held(l)) continue;
      auto* k = k_[static_cast<std::size_t>(l)].as<char>();
      auto* v = v_[static_cast<std::size_t>(l)].as<char>();
      device_.copy_on_device(k + static_cast<std::size_t>(c.to) * span, k + static_cast<std::size_t>(c.from) * span, span);
      device_.copy_on_device(v + static_cast<std::size_t>(c.to) * span, v + static_cast<std::size_t>(c.from) * span, span);
      if (dtype_ == KvDtype::kInt8)
        for (Buffer* b : {&k_scale_[static_cast<std::size_t>(l)], &v_scale_[static_cast<std::size_t>(l)]}) {
          char* s = b->as<char>();
          device_.copy_on_device(s + static_cast<std::size_t>(c.to) * scale_span,
                                 s + static_cast<std::size_t>(c.from) * scale_span, scale_span);
        }
    }
  }
}

float* KvStorage::k_slot(int layer, int slot) {
  check(layer >= 0 && layer < n_layers_ && slot >= 0 && slot < slots() && device_.kind() == DeviceKind::kCpu &&
            dtype_ == KvDtype::kF32,
        "KvStorage::k_slot: layer " + std::to_string(layer) + ", slot " + std::to_string(slot) +
            " (host-addressable storage only)");
  return k_[static_cast<std::size_t>(layer)].as<float>() + static_cast<std::size_t>(slot) * kv_dim_;
}

float* KvStorage::v_slot(int layer, int slot) {
  check(layer >= 0 && layer < n_layers_ && slot >= 0 && slot < slots() && device_.kind() == DeviceKind::kCpu &&
            dtype_ == KvDtype::kF32,
        "KvStorage::v_slot: layer " + std::to_string(layer) + ", slot " + std::to_string(slot) +
            " (host-addressable storage only)");
  return v_[static_cast<std::size_t>(layer)].as<float>() + static_cast<std::size_t>(slot) * kv_dim_;
}

std::uint64_t KvStorage::bytes() const {
  int held_layers = 0;
  for (int l = 0; l < n_layers_; ++l) held_layers += held(l);
  return static_cast<std::uint64_t>(slots()) * 2ull * static_cast<std::uint64_t>(held_layers) *
         (static_cast<std::uint64_t>(kv_dim_) * static_cast<std::uint64_t>(kv_dtype_bits(dtype_)) / 8 +
          (dtype_ == KvDtype::kInt8 || dtype_ == KvDtype::kInt4 ? 4ull * static_cast<std::uint64_t>(n_kv_heads_) : 0ull));
}

}  // namespace inferlab
