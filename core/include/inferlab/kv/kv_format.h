// KV cache formats: what each side (K, V) of each layer is stored as (KvFormat, parsed from
// [kv] dtype and friends), and their sizes. The byte layouts of the dtypes and the one
// quantise / dequantise routine every writer and attention plugin shares are in the base
// library's paged_kv.h (below kernels and core).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "inferlab/paged_kv.h"

namespace inferlab {

struct ModelConfig;

// The cache's format: a dtype per side, an int4 group size, and layers kept in f32 (the first
// and last few, whose K/V errors cost the most). Implicitly built from one dtype for both sides.
struct KvFormat {
  KvDtype keys = KvDtype::kF32;
  KvDtype values = KvDtype::kF32;
  // head_dim values per scale (int8) or (scale, min) pair (int4); must divide head_dim.
  // 0 = head_dim: one group per token-head.
  int group_size = 32;
  int f32_first_layers = 0;  // layers [0, f32_first_layers) store both sides in f32
  int f32_last_layers = 0;   // layers [n_layers - f32_last_layers, n_layers) likewise

  KvFormat() = default;
  KvFormat(KvDtype both) : keys(both), values(both) {}  // NOLINT: a dtype is a format
  bool operator==(const KvFormat&) const = default;

  bool layer_in_f32(int layer, int n_layers) const {
    return layer < f32_first_layers || layer >= n_layers - f32_last_layers;
  }
  KvDtype key_dtype(int layer, int n_layers) const { return layer_in_f32(layer, n_layers) ? KvDtype::kF32 : keys; }
  KvDtype value_dtype(int layer, int n_layers) const {
    return layer_in_f32(layer, n_layers) ? KvDtype::kF32 : values;
  }
  bool all_f32() const { return keys == KvDtype::kF32 && values == KvDtype::kF32; }
  // A side is int8 or int4: group_size shapes it.
  bool quantized() const { return kv_dtype_quantized(keys) || kv_dtype_quantized(values); }
  // The [kv] dtype name of the sides: "f32", "f16", "int8", "int4-keys", "int8-values".
  std::string dtype_name() const;
  // dtype_name(), then " g32" for int8 / int4 and " f32 layers 1+1" when
  // layers are kept: for logs, manifests and errors.
  std::string name() const;
};

// The [kv] dtype names: "f32", "f16", "bf16" (both sides), "int8", "int4", "int8-keys",
// "int4-keys", "int8-values", "int4-values" (the other side f32). Sets keys/values of `format`;
// false for anything else.
bool parse_kv_dtypes(const std::string& text, KvFormat& format);
inline constexpr const char* kKvDtypeNames =
    "f32, f16, bf16, int8, int4, int8-keys, int4-keys, int8-values, int4-values";

// Why `format` cannot store `model`'s K/V (a quantized side's group size not dividing head_dim,
// more f32 layers than the model has); empty when it can.
std::string kv_format_problem(const KvFormat& format, const ModelConfig& model);

// Why an int4 side of `format` saves nothing over int8 on `model` (its group size leaves the
// (scale, min) pairs as large as the codes saved: group_size <= 8), naming the group size and
// both formats' bytes per token; empty when int4 is smaller or no side is int4.
std::string kv_format_waste(const KvFormat& format, const ModelConfig& model);

// The group size a format uses for `head_dim` (group_size, or head_dim when 0).
inline int kv_group(const KvFormat& f, int head_dim) { return f.group_size > 0 ? f.group_size : head_dim; }
// K and V of one token over all layers, params included. skipped: [n_layers] or empty; a layer
// marked skipped (by a layer plan) stores nothing.
std::uint64_t kv_bytes_per_token(const ModelConfig& model, const KvFormat& format, const std::vector<bool>& skipped = {});

}  // namespace inferlab
