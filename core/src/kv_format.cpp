// KV cache formats: names, sizes, and the shared quantise / dequantise routines (see
// inferlab/kv_format.h for the byte layouts).
#include "inferlab/kv_format.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "inferlab/model_config.h"

namespace inferlab {

const char* kv_dtype_name(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF32: return "f32";
    case KvDtype::kF16: return "f16";
    case KvDtype::kInt8: return "int8";
    case KvDtype::kInt4: return "int4";
  }
  return "unknown";
}

int kv_dtype_bits(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF32: return 32;
    case KvDtype::kF16: return 16;
    case KvDtype::kInt8: return 8;
    case KvDtype::kInt4: return 4;
  }
  return 0;
}

std::string KvFormat::dtype_name() const {
  if (keys == values) return kv_dtype_name(keys);
  if (values == KvDtype::kF32) return std::string(kv_dtype_name(keys)) + "-keys";
  if (keys == KvDtype::kF32) return std::string(kv_dtype_name(values)) + "-values";
  return std::string("keys ") + kv_dtype_name(keys) + ", values " + kv_dtype_name(values);
}

std::string KvFormat::name() const {
  std::string n = dtype_name();
  if (!all_f32()) n += group_size > 0 ? " g" + std::to_string(group_size) : std::string(" per token-head");
  if (!all_f32() && (f32_first_layers > 0 || f32_last_layers > 0))
    n += " f32 layers " + std::to_string(f32_first_layers) + "+" + std::to_string(f32_last_layers);
  return n;
}

bool parse_kv_dtypes(const std::string& text, KvFormat& format) {
  struct Entry {
    const char* name;
    KvDtype keys, values;
  };
  static const Entry kEntries[] = {
      {"f32", KvDtype::kF32, KvDtype::kF32},         {"int8", KvDtype::kInt8, KvDtype::kInt8},
      {"int4", KvDtype::kInt4, KvDtype::kInt4},      {"int8-keys", KvDtype::kInt8, KvDtype::kF32},
      {"int4-keys", KvDtype::kInt4, KvDtype::kF32},  {"int8-values", KvDtype::kF32, KvDtype::kInt8},
      {"int4-values", KvDtype::kF32, KvDtype::kInt4},
  };
  for (const Entry& e : kEntries)
    if (text == e.name) {
      format.keys = e.keys;
      format.values = e.values;
      return true;
    }
  return false;
}

std::string kv_format_problem(const KvFormat& f, const ModelConfig& model) {
  for (KvDtype d : {f.keys, f.values})
    if (d == KvDtype::kF16) return "KV dtype f16 has no storage (allowed: f32, int8, int4)";
  const int hd = model.n_heads > 0 ? model.head_dim() : 0;
  const int g = kv_group(f, hd);
  if (!f.all_f32() && (g < 2 || g % 2 != 0 || hd % g != 0))
    return "KV group_size " + std::to_string(f.group_size) + " must be even and divide head_dim " + std::to_string(hd) +
           " of model '" + model.name + "' (0 = one group per token-head)";
  if (f.f32_first_layers < 0 || f.f32_last_layers < 0 || f.f32_first_layers + f.f32_last_layers > model.n_layers)
    return "f32_first_layers + f32_last_layers = " + std::to_string(f.f32_first_layers) + " + " +
           std::to_string(f.f32_last_layers) + " exceeds the " + std::to_string(model.n_layers) +
           " layers of model '" + model.name + "'";
  return "";
}

std::string kv_format_waste(const KvFormat& f, const ModelConfig& model) {
  if (f.keys != KvDtype::kInt4 && f.values != KvDtype::kInt4) return "";
  KvFormat as_int8 = f;
  for (KvDtype* side : {&as_int8.keys, &as_int8.values})
    if (*side == KvDtype::kInt4) *side = KvDtype::kInt8;
  const std::uint64_t int4 = kv_bytes_per_token(model, f), int8 = kv_bytes_per_token(model, as_int8);
  if (int4 < int8) return "";
  const int hd = model.head_dim();
  return "kv.group_size = " + std::to_string(f.group_size) + " gives int4 KV " + std::to_string(int4) +
         " bytes/token, no smaller than int8's " + std::to_string(int8) + " (model '" + model.name + "', head_dim " +
         std::to_string(hd) + "): each group of " + std::to_string(kv_group(f, hd)) +
         " values carries an 8-byte (scale, min) pair; " +
         (hd > 8 ? "use a group_size of 16 or more that divides head_dim" : "use kv.dtype int8 on this model");
}

std::size_t kv_code_bytes(KvDtype dtype, int d) {
  switch (dtype) {
    case KvDtype::kInt8: return static_cast<std::size_t>(d);
    case KvDtype::kInt4: return static_cast<std::size_t>(d) / 2;
    case KvDtype::kF16: return 2 * static_cast<std::size_t>(d);
    case KvDtype::kF32: break;
  }
  return 4 * static_cast<std::size_t>(d);
}

std::size_t kv_param_floats(KvDtype dtype, int d, int g) {
  if (dtype == KvDtype::kInt8) return static_cast<std::size_t>(d / g);
  if (dtype == KvDtype::kInt4) return 2 * static_cast<std::size_t>(d / g);
  return 0;
}

std::uint64_t kv_bytes_per_token(const ModelConfig& model, const KvFormat& format, const std::vector<bool>& skipped) {
  const int d = model.head_dim(), h = model.n_kv_heads;
  const auto token_head = [&](KvDtype t) {
    return kv_code_bytes(t, d) + 4 * kv_param_floats(t, d, kv_group(format, d));
  };
  std::uint64_t total = 0;
  for (int l = 0; l < model.n_layers; ++l)
    if (static_cast<std::size_t>(l) >= skipped.size() || !skipped[static_cast<std::size_t>(l)])
      total += static_cast<std::uint64_t>(h) *
             (token_head(format.key_dtype(l, model.n_layers)) + token_head(format.value_dtype(l, model.n_layers)));
  return total;
}

void kv_quantize_row(KvDtype dtype, int g, const float* x, int d, void* codes, float* params) {
  if (dtype == KvDtype::kInt8) {  // per group of g: symmetric, scale = max|x| / 127
    auto* q = static_cast<signed char*>(codes);
    for (int g0 = 0, gi = 0; g0 < d; g0 += g, ++gi) {
      float amax = 0.0f;
      for (int c = g0; c < g0 + g; ++c) amax = std::max(amax, std::fabs(x[c]));
      const float s = amax / 127.0f, inv = s > 0.0f ? 1.0f / s : 0.0f;
      params[gi] = s;
      for (int c = g0; c < g0 + g; ++c) q[c] = static_cast<signed char>(std::clamp(std::lround(x[c] * inv), -127L, 127L));
    }
    return;
  }
  // int4: per group of g, asymmetric min/max over 16 levels.
  auto* q = static_cast<unsigned char*>(codes);
  for (int g0 = 0, gi = 0; g0 < d; g0 += g, ++gi) {
    float lo = x[g0], hi = x[g0];
    for (int c = g0; c < g0 + g; ++c) lo = std::min(lo, x[c]), hi = std::max(hi, x[c]);
    const float s = (hi - lo) / 15.0f, inv = s > 0.0f ? 1.0f / s : 0.0f;
    params[2 * gi] = s;
    params[2 * gi + 1] = lo;
    for (int c = g0; c < g0 + g; c += 2) {
      const long a = std::clamp(std::lround((x[c] - lo) * inv), 0L, 15L);
      const long b = std::clamp(std::lround((x[c + 1] - lo) * inv), 0L, 15L);
      q[c / 2] = static_cast<unsigned char>(a | (b << 4));
    }
  }
}

void kv_dequantize_row(KvDtype dtype, int g, const void* codes, const float* params, int d, float* out) {
  if (dtype == KvDtype::kInt8) {
    const auto* q = static_cast<const signed char*>(codes);
    for (int g0 = 0, gi = 0; g0 < d; g0 += g, ++gi) {
      const float s = params[gi];
      for (int c = g0; c < g0 + g; ++c) out[c] = s * static_cast<float>(q[c]);
    }
    return;
  }
  const auto* q = static_cast<const unsigned char*>(codes);
  for (int g0 = 0, gi = 0; g0 < d; g0 += g, ++gi) {
    const float s = params[2 * gi], lo = params[2 * gi + 1];
    for (int c = g0; c < g0 + g; c += 2) {
      const unsigned char b = q[c / 2];
      out[c] = lo + s * static_cast<float>(b & 0x0F);
      out[c + 1] = lo + s * static_cast<float>(b >> 4);
    }
  }
}

float kv_row_error_bound(KvDtype dtype, int g, const float* x, int d) {
  if (dtype != KvDtype::kInt8 && dtype != KvDtype::kInt4) return 0.0f;
  float worst = 0.0f;
  for (int g0 = 0; g0 < d; g0 += g) {
    float lo = x[g0], hi = x[g0], amax = 0.0f;
    for (int c = g0; c < g0 + g; ++c) lo = std::min(lo, x[c]), hi = std::max(hi, x[c]), amax = std::max(amax, std::fabs(x[c]));
    worst = std::max(worst, dtype == KvDtype::kInt8 ? 0.5f * amax / 127.0f : 0.5f * (hi - lo) / 15.0f);
  }
  return worst;
}

}  // namespace inferlab
