// KV cache formats: parsing, names and sizes of KvFormat (the dtypes' layouts and row routines
// are in base/src/paged_kv.cpp).
#include "inferlab/kv/kv_format.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "inferlab/model/model_config.h"

namespace inferlab {

std::string KvFormat::dtype_name() const {
  if (keys == values) return kv_dtype_name(keys);
  if (values == KvDtype::kF32) return std::string(kv_dtype_name(keys)) + "-keys";
  if (keys == KvDtype::kF32) return std::string(kv_dtype_name(values)) + "-values";
  return std::string("keys ") + kv_dtype_name(keys) + ", values " + kv_dtype_name(values);
}

std::string KvFormat::name() const {
  std::string n = dtype_name();
  if (quantized()) n += group_size > 0 ? " g" + std::to_string(group_size) : std::string(" per token-head");
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
      {"f32", KvDtype::kF32, KvDtype::kF32},         {"f16", KvDtype::kF16, KvDtype::kF16},
      {"bf16", KvDtype::kBf16, KvDtype::kBf16},      {"int8", KvDtype::kInt8, KvDtype::kInt8},
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
  const int hd = model.n_heads > 0 ? model.head_dim() : 0;
  const int g = kv_group(f, hd);
  if (f.quantized() && (g < 2 || g % 2 != 0 || hd % g != 0))
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


}  // namespace inferlab
