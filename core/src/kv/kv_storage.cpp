// Per-layer K/V storage on a device (see inferlab/kv/kv_storage.h, layouts in inferlab/kv/kv_format.h).
#include "inferlab/kv/kv_storage.h"

#include <string>
#include <utility>

#include "inferlab/error.h"

namespace inferlab {

KvStorage::KvStorage(Device& device, const ModelConfig& model, int num_blocks, int block_size, const KvFormat& format,
                     std::vector<bool> unused_layers)
    : device_(compute_device(device, "KV storage")),
      format_(format),
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
  if (const std::string problem = kv_format_problem(format, model); !problem.empty())
    throw Error("KV cache format '" + format.name() + "': " + problem);
  if (const std::string problem = kv_storage_problem(format, model, device.kind()); !problem.empty())
    throw Error(problem);
  check(unused_.empty() || static_cast<int>(unused_.size()) == n_layers_,
        "KvStorage: unused-layer mask of " + std::to_string(unused_.size()) + " for " + std::to_string(n_layers_) + " layers");
  for (int l = 0; l < n_layers_; ++l) {
    if (!held(l)) {  // a skipped layer: no K/V memory
      k_.emplace_back();
      v_.emplace_back();
      continue;
    }
    k_.push_back(make_side(format.key_dtype(l, n_layers_)));
    v_.push_back(make_side(format.value_dtype(l, n_layers_)));
  }
}

std::string kv_storage_problem(const KvFormat& format, const ModelConfig& model, DeviceKind kind) {
  if (kind == DeviceKind::kCpu || format.all_f32()) return "";
  const std::string prefix = "KV cache format '" + format.name() + "' has no storage on device '" + device_kind_name(kind);
  if (kind == DeviceKind::kSim) return prefix + "' (allowed there: f32)";
  // f16 / bf16 on both sides: every layer is f32 or that dtype, each written and read per layer.
  if (kv_dtype_half(format.keys) && format.values == format.keys) return "";
  const int head_dim = model.n_heads > 0 ? model.head_dim() : 0;
  bool int8_per_head = kv_group(format, head_dim) == head_dim;
  for (int l = 0; l < model.n_layers && int8_per_head; ++l)
    int8_per_head = format.key_dtype(l, model.n_layers) == KvDtype::kInt8 &&
                    format.value_dtype(l, model.n_layers) == KvDtype::kInt8;
  if (int8_per_head) return "";
  return prefix + "' (allowed there: f32; f16 or bf16 on both sides, f32_first_layers / f32_last_layers allowed; " +
         "int8 on both sides of every layer with group_size 0 or head_dim " + std::to_string(head_dim) +
         "; not stored on cuda: int4, one-sided formats, int8 in groups or beside f32 layers)";
}

KvStorage::Side KvStorage::make_side(KvDtype dtype) {
  Side s;
  s.dtype = dtype;
  const std::size_t n = static_cast<std::size_t>(slots());
  s.codes = Buffer(device_, n * token_bytes(s));
  if (kv_dtype_quantized(dtype)) s.params = Buffer(device_, n * token_params(s) * sizeof(float));
  return s;
}

std::size_t KvStorage::token_bytes(const Side& s) const {
  return static_cast<std::size_t>(n_kv_heads_) * kv_code_bytes(s.dtype, head_dim_);
}

std::size_t KvStorage::token_params(const Side& s) const {
  return static_cast<std::size_t>(n_kv_heads_) * kv_param_floats(s.dtype, head_dim_, kv_group(format_, head_dim_));
}

KvLayerView KvStorage::layer(int l) const {
  check(l >= 0 && l < n_layers_ && held(l), "KvStorage::layer: no layer " + std::to_string(l) + " held");
  const Side& k = k_[static_cast<std::size_t>(l)];
  const Side& v = v_[static_cast<std::size_t>(l)];
  KvLayerView view;
  view.k_dtype = k.dtype;
  view.v_dtype = v.dtype;
  view.k = k.codes.data();
  view.v = v.codes.data();
  if (kv_dtype_quantized(k.dtype)) view.k_params = k.params.as<float>();
  if (kv_dtype_quantized(v.dtype)) view.v_params = v.params.as<float>();
  view.group_size = kv_group(format_, head_dim_);
  view.num_blocks = num_blocks_;
  view.block_size = block_size_;
  view.n_kv_heads = n_kv_heads_;
  view.head_dim = head_dim_;
  return view;
}

// Quantized side (host memory): every (row, head) through kv_quantize_row into its slot.
void KvStorage::write_side(Side& side, const float* x, const int* slots, int rows) {
  const std::size_t hd = static_cast<std::size_t>(head_dim_);
  const std::size_t code_bytes = kv_code_bytes(side.dtype, head_dim_);
  const std::size_t param_floats = kv_param_floats(side.dtype, head_dim_, kv_group(format_, head_dim_));
  auto* codes = side.codes.as<unsigned char>();
  float* params = side.params.as<float>();
  for (int r = 0; r < rows; ++r) {
    const std::size_t slot = static_cast<std::size_t>(slots[r]);
    for (std::size_t h = 0; h < static_cast<std::size_t>(n_kv_heads_); ++h) {
      const std::size_t cell = slot * static_cast<std::size_t>(n_kv_heads_) + h;
      kv_quantize_row(side.dtype, kv_group(format_, head_dim_), x + static_cast<std::size_t>(r) * kv_dim_ + h * hd, head_dim_,
                      codes + cell * code_bytes, params + cell * param_floats);
    }
  }
}

bool KvStorage::f32_layer(int layer, float*& k, float*& v) {
  check(layer >= 0 && layer < n_layers_ && held(layer), "KvStorage::f32_layer: no layer " + std::to_string(layer) + " held");
  Side& ks = k_[static_cast<std::size_t>(layer)];
  Side& vs = v_[static_cast<std::size_t>(layer)];
  if (ks.dtype != KvDtype::kF32 || vs.dtype != KvDtype::kF32) return false;
  k = ks.codes.as<float>();
  v = vs.codes.as<float>();
  return true;
}

bool KvStorage::half_layer(int layer, KvDtype& dtype, void*& k, void*& v) {
  check(layer >= 0 && layer < n_layers_ && held(layer), "KvStorage::half_layer: no layer " + std::to_string(layer) + " held");
  Side& ks = k_[static_cast<std::size_t>(layer)];
  Side& vs = v_[static_cast<std::size_t>(layer)];
  if (!kv_dtype_half(ks.dtype) || vs.dtype != ks.dtype) return false;
  dtype = ks.dtype;
  k = ks.codes.data();
  v = vs.codes.data();
  return true;
}

void KvStorage::write(int layer, const float* k, const float* v, const int* slots, int rows) {
  check(layer >= 0 && layer < n_layers_ && held(layer), "KvStorage::write: no layer " + std::to_string(layer) + " held");
  Side& ks = k_[static_cast<std::size_t>(layer)];
  Side& vs = v_[static_cast<std::size_t>(layer)];
  if (ks.dtype == KvDtype::kF32 && vs.dtype == KvDtype::kF32) {
    device_.kv_write_f32(ks.codes.as<float>(), vs.codes.as<float>(), k, v, slots, rows, kv_dim_);
    return;
  }
  if (kv_dtype_half(ks.dtype) && vs.dtype == ks.dtype) {
    device_.kv_write_half(ks.dtype, ks.codes.data(), vs.codes.data(), k, v, slots, rows, kv_dim_);
    return;
  }
  if (device_.kind() != DeviceKind::kCpu) {  // int8 per token-head (the constructor checked)
    device_.kv_write_int8(ks.codes.as<std::int8_t>(), vs.codes.as<std::int8_t>(), ks.params.as<float>(),
                          vs.params.as<float>(), k, v, slots, rows, n_kv_heads_, head_dim_);
    return;
  }
  // Mixed or quantized sides on host memory.
  for (auto [side, x] : {std::pair<Side*, const float*>{&ks, k}, {&vs, v}}) {
    if (side->dtype != KvDtype::kF32) {
      write_side(*side, x, slots, rows);
      continue;
    }
    float* dst = side->codes.as<float>();
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < kv_dim_; ++c)
        dst[static_cast<std::size_t>(slots[r]) * kv_dim_ + c] = x[static_cast<std::size_t>(r) * kv_dim_ + c];
  }
}

std::uint64_t KvStorage::bytes_per_token(const ModelConfig& model, const KvFormat& format,
                                         const std::vector<bool>& unused_layers) {
  return kv_bytes_per_token(model, format, unused_layers);
}

void KvStorage::copy_blocks(std::span<const BlockCopy> copies) {
  const std::size_t bs = static_cast<std::size_t>(block_size_);
  for (const BlockCopy& c : copies) {
    check(c.from >= 0 && c.from < num_blocks_ && c.to >= 0 && c.to < num_blocks_,
          "KvStorage::copy_blocks: block " + std::to_string(c.from) + " -> " + std::to_string(c.to) +
              " outside the pool of " + std::to_string(num_blocks_));
    for (int l = 0; l < n_layers_; ++l)
      for (Side* s : {&k_[static_cast<std::size_t>(l)], &v_[static_cast<std::size_t>(l)]}) {
        if (!held(l)) continue;
        const std::size_t span = bs * token_bytes(*s);
        auto* codes = s->codes.as<char>();
        device_.copy_on_device(codes + static_cast<std::size_t>(c.to) * span,
                               codes + static_cast<std::size_t>(c.from) * span, span);
        if (!kv_dtype_quantized(s->dtype)) continue;
        const std::size_t pspan = bs * token_params(*s) * sizeof(float);
        auto* params = s->params.as<char>();
        device_.copy_on_device(params + static_cast<std::size_t>(c.to) * pspan,
                               params + static_cast<std::size_t>(c.from) * pspan, pspan);
      }
  }
}

float* KvStorage::k_slot(int layer, int slot) {
  check(layer >= 0 && layer < n_layers_ && held(layer) && slot >= 0 && slot < slots() && device_.kind() == DeviceKind::kCpu &&
            k_[static_cast<std::size_t>(layer)].dtype == KvDtype::kF32,
        "KvStorage::k_slot: layer " + std::to_string(layer) + ", slot " + std::to_string(slot) +
            " (host-addressable f32 storage only)");
  return k_[static_cast<std::size_t>(layer)].codes.as<float>() + static_cast<std::size_t>(slot) * kv_dim_;
}

float* KvStorage::v_slot(int layer, int slot) {
  check(layer >= 0 && layer < n_layers_ && held(layer) && slot >= 0 && slot < slots() && device_.kind() == DeviceKind::kCpu &&
            v_[static_cast<std::size_t>(layer)].dtype == KvDtype::kF32,
        "KvStorage::v_slot: layer " + std::to_string(layer) + ", slot " + std::to_string(slot) +
            " (host-addressable f32 storage only)");
  return v_[static_cast<std::size_t>(layer)].codes.as<float>() + static_cast<std::size_t>(slot) * kv_dim_;
}

std::uint64_t KvStorage::bytes() const {
  std::uint64_t total = 0;
  for (const auto* sides : {&k_, &v_})
    for (const Side& s : *sides)
      if (s.codes.bytes() > 0)
        total += static_cast<std::uint64_t>(slots()) * (token_bytes(s) + token_params(s) * sizeof(float));
  return total;
}

}  // namespace inferlab
