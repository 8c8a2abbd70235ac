// Per-layer K/V storage on a device (see inferlab/kv_storage.h).
#include "inferlab/kv_storage.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "inferlab/error.h"

namespace inferlab {

KvStorage::KvStorage(Device& device, const ModelConfig& model, int num_blocks, int block_size, KvDtype dtype)
    : device_(device),
      dtype_(dtype),
      n_layers_(model.n_layers),
      n_kv_heads_(model.n_kv_heads),
      head_dim_(model.n_heads > 0 ? model.head_dim() : 0),
      kv_dim_(model.n_heads > 0 ? model.kv_dim() : 0),
      num_blocks_(num_blocks),
      block_size_(block_size) {
  check(n_layers_ > 0 && n_kv_heads_ > 0 && head_dim_ > 0,
        "KvStorage: model '" + model.name + "' needs n_layers, n_heads, n_kv_heads and dim > 0");
  check(num_blocks > 0 && block_size > 0, "KvStorage: num_blocks and block_size must be > 0, got " +
                                              std::to_string(num_blocks) + " and " + std::to_string(block_size));
  if (dtype != KvDtype::kF32 && dtype != KvDtype::kInt8)
    throw Error(std::string("KV cache dtype '") + kv_dtype_name(dtype) +
                "' is not implemented yet (allowed: f32, int8)");
  const std::size_t bytes = static_cast<std::size_t>(slots()) * static_cast<std::size_t>(kv_dim_) * elem_bytes();
  const std::size_t scale_bytes = static_cast<std::size_t>(slots()) * static_cast<std::size_t>(n_kv_heads_) * sizeof(float);
  for (int l = 0; l < n_layers_; ++l) {
    k_.emplace_back(device_, bytes);
    v_.emplace_back(device_, bytes);
    if (dtype == KvDtype::kInt8) {
      k_scale_.emplace_back(device_, scale_bytes);
      v_scale_.emplace_back(device_, scale_bytes);
    }
  }
}

KvLayerView KvStorage::layer(int l) const {
  check(l >= 0 && l < n_layers_, "KvStorage::layer: no layer " + std::to_string(l));
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
  check(layer >= 0 && layer < n_layers_, "KvStorage::write: no layer " + std::to_string(layer));
  const std::size_t l = static_cast<std::size_t>(layer);
  if (dtype_ == KvDtype::kF32) {
    device_.kv_write_f32(k_[l].as<float>(), v_[l].as<float>(), k, v, slots, rows, kv_dim_);
    return;
  }
  // int8: per (token, head) scale = max|x| / 127, codes round(x / scale), on the device.
  device_.kv_write_int8(k_[l].as<std::int8_t>(), v_[l].as<std::int8_t>(), k_scale_[l].as<float>(),
                        v_scale_[l].as<float>(), k, v, slots, rows, n_kv_heads_, head_dim_);
}

std::size_t KvStorage::elem_bytes() const { return dtype_ == KvDtype::kInt8 ? 1 : sizeof(float); }

std::uint64_t KvStorage::bytes_per_token(const ModelConfig& model, KvDtype dtype) {
  const std::uint64_t per_layer = static_cast<std::uint64_t>(model.kv_dim()) * static_cast<std::uint64_t>(kv_dtype_bits(dtype)) / 8 +
                                  (dtype == KvDtype::kInt8 || dtype == KvDtype::kInt4 ? 4ull * model.n_kv_heads : 0ull);
  return 2ull * static_cast<std::uint64_t>(model.n_layers) * per_layer;
}

void KvStorage::copy_blocks(std::span<const BlockCopy> copies) {
  const std::size_t span = static_cast<std::size_t>(block_size_) * static_cast<std::size_t>(kv_dim_) * elem_bytes();
  const std::size_t scale_span = static_cast<std::size_t>(block_size_) * static_cast<std::size_t>(n_kv_heads_) * sizeof(float);
  for (const BlockCopy& c : copies) {
    check(c.from >= 0 && c.from < num_blocks_ && c.to >= 0 && c.to < num_blocks_,
          "KvStorage::copy_blocks: block " + std::to_string(c.from) + " -> " + std::to_string(c.to) +
              " outside the pool of " + std::to_string(num_blocks_));
    for (int l = 0; l < n_layers_; ++l) {
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
  return static_cast<std::uint64_t>(slots()) * 2ull * static_cast<std::uint64_t>(n_layers_) *
         (static_cast<std::uint64_t>(kv_dim_) * static_cast<std::uint64_t>(kv_dtype_bits(dtype_)) / 8 +
          (dtype_ == KvDtype::kInt8 || dtype_ == KvDtype::kInt4 ? 4ull * static_cast<std::uint64_t>(n_kv_heads_) : 0ull));
}

}  // namespace inferlab
