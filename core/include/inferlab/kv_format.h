// KV cache storage formats: what each side (K, V) of each layer is stored as, the byte layout
// of the quantized formats, and the one quantise / dequantise routine every writer and every
// attention plugin shares (a new format is one case here plus its bytes).
//
// Per layer and side, for `slots` = num_blocks * block_size token slots, H = n_kv_heads,
// D = head_dim, g = group size along head_dim, G = D / g groups per token-head:
//   f32   codes [slots, H, D] float                                       4·D bytes per token-head
//   int8  codes [slots, H, D] int8 (symmetric, q in [-127, 127]),
//         params [slots, H, G] float, per group of g along D: scale = max|x| / 127, x ≈ scale·q
//                                                                          D + 4·G bytes per token-head
//         (g = D is the classic one scale per token-head)
//   int4  codes [slots, H, D/2] uint8, two 4-bit codes per byte (element 2i in the low nibble),
//         params [slots, H, G, 2] float (scale, min) per group of g along D:
//         scale = (max - min) / 15, q = round((x - min) / scale) in [0, 15], x ≈ min + scale·q
//                                                                          D/2 + 8·G bytes per token-head
// Every value is quantized once, when its token is written, from that token's own values only
// (per token, along head_dim), so paged blocks, prefix sharing and copy-on-write need nothing
// special: a slot's codes never change. (KIVI's per-channel keys need the scale of a channel over
// many tokens, which a paged cache cannot know when the first token of a block arrives; see
// docs/architecture.md, "KV formats".)
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace inferlab {

struct ModelConfig;

// How one side of one layer's K/V is stored. f16 is named (the simulator and the sizes speak
// of it) but no storage implements it.
enum class KvDtype { kF32, kF16, kInt8, kInt4 };
const char* kv_dtype_name(KvDtype dtype);
// Bits per stored element (scales not included).
int kv_dtype_bits(KvDtype dtype);

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
  // The [kv] dtype name of the sides: "f32", "int8", "int4-keys", "int8-values".
  std::string dtype_name() const;
  // dtype_name(), then " g32" for int4 and " f32 layers 1+1" when
  // layers are kept: for logs, manifests and errors.
  std::string name() const;
};

// The [kv] dtype names: "f32", "int8", "int4", "int8-keys", "int4-keys", "int8-values",
// "int4-values" (the other side f32). Sets keys/values of `format`; false for anything else.
bool parse_kv_dtypes(const std::string& text, KvFormat& format);
inline constexpr const char* kKvDtypeNames = "f32, int8, int4, int8-keys, int4-keys, int8-values, int4-values";

// Why `format` cannot store `model`'s K/V (group size not dividing head_dim, more f32 layers
// than the model has, f16); empty when it can.
std::string kv_format_problem(const KvFormat& format, const ModelConfig& model);

// Why an int4 side of `format` saves nothing over int8 on `model` (its group size leaves the
// (scale, min) pairs as large as the codes saved: group_size <= 8), naming the group size and
// both formats' bytes per token; empty when int4 is smaller or no side is int4.
std::string kv_format_waste(const KvFormat& format, const ModelConfig& model);

// Bytes of one token-head's codes and params (scales) in `dtype`, head_dim `d`, group `g` (> 0).
std::size_t kv_code_bytes(KvDtype dtype, int d);
std::size_t kv_param_floats(KvDtype dtype, int d, int g);
// The group size a format uses for `head_dim` (group_size, or head_dim when 0).
inline int kv_group(const KvFormat& f, int head_dim) { return f.group_size > 0 ? f.group_size : head_dim; }
// K and V of one token over all layers, params included. skipped: [n_layers] or empty; a layer
// marked skipped (by a layer plan) stores nothing.
std::uint64_t kv_bytes_per_token(const ModelConfig& model, const KvFormat& format, const std::vector<bool>& skipped = {});

// One token-head: x [d] -> codes [kv_code_bytes] and params [kv_param_floats] (quantized
// dtypes only).
void kv_quantize_row(KvDtype dtype, int g, const float* x, int d, void* codes, float* params);
// The inverse: out [d] = the values the codes stand for. The routine every attention plugin's
// tile loop runs (through KvLayerView::k_row / v_row).
void kv_dequantize_row(KvDtype dtype, int g, const void* codes, const float* params, int d, float* out);
// The largest |x - dequantize(quantize(x))| over the row for `dtype`: half a quantization step
// of the coarsest group (0 for f32). Tests derive their tolerances from it.
float kv_row_error_bound(KvDtype dtype, int g, const float* x, int d);

}  // namespace inferlab
