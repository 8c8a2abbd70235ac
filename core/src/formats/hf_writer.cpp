// Hugging Face export (see write_hf in inferlab/formats/formats.h): config.json and one
// model.safetensors in the layout transformers' LlamaForCausalLM / Qwen2ForCausalLM and load_hf
// read. PyTorch keeps a linear as [out, in], which is our row-major layout, so matrices are
// written as held; only the RoPE pairing differs: a model with interleaved RoPE (llama2.c, GGUF
// "llama", the presets) has its Q/K rows (and biases) permuted to the half-rotation order
// Hugging Face's rotate_half expects — the inverse of what convert_hf_to_gguf.py does.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "inferlab/error.h"
#include "inferlab/formats/formats.h"
#include "kernels/ref/half.h"

namespace fs = std::filesystem;

namespace inferlab {

namespace {

// Interleaved rows (pair i of a head = rows 2i, 2i + 1) -> half rotation (rows i, i + head_dim/2).
std::vector<float> half_rope_rows(const std::vector<float>& w, int heads, int head_dim, std::size_t row) {
  std::vector<float> out(w.size());
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < head_dim / 2; ++i)
      for (int j = 0; j < 2; ++j) {
        const auto from = static_cast<std::size_t>(h * head_dim + 2 * i + j);
        const auto to = static_cast<std::size_t>(h * head_dim + j * head_dim / 2 + i);
        std::copy_n(w.begin() + static_cast<std::ptrdiff_t>(from * row), row,
                    out.begin() + static_cast<std::ptrdiff_t>(to * row));
      }
  return out;
}

struct Tensor {
  std::string name;
  std::vector<std::uint64_t> shape;
  std::function<std::vector<float>()> values;  // made when written: one matrix in memory at a time
};

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace

HfExportSummary write_hf(const std::string& dir, const ModelWeights& w, const HfExportOptions& o) {
  const ModelConfig& c = w.config;
  if (o.dtype != "F32" && o.dtype != "F16" && o.dtype != "BF16")
    throw Error("Hugging Face export: dtype " + o.dtype + "; allowed: F32, F16, BF16");
  const fs::path folder(dir);
  for (const char* f : {"config.json", "model.safetensors"})
    if (fs::exists(folder / f))
      throw Error("Hugging Face export: " + (folder / f).string() + " exists; allowed: a folder without config.json "
                  "and model.safetensors (an earlier export is never overwritten)");
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) throw Error("Hugging Face export: cannot create " + dir + ": " + ec.message());

  w.validate();  // every tensor's size, lazy matrices included, before anything is written
  HfExportSummary summary;
  summary.model_type = c.qkv_bias ? "qwen2" : "llama";
  summary.permuted = c.rope_style == RopeStyle::kInterleaved;
  const auto d = static_cast<std::uint64_t>(c.dim), h = static_cast<std::uint64_t>(c.hidden_dim),
             kv = static_cast<std::uint64_t>(c.kv_dim()), v = static_cast<std::uint64_t>(c.vocab_size),
             qd = static_cast<std::uint64_t>(c.n_heads) * static_cast<std::uint64_t>(c.head_dim());

  // Matrices come from ModelWeights::matrix when written (a GGUF's blocks dequantised, a preset's
  // seeded values drawn), Q/K rows (and biases) moved to the half rotation then.
  auto rows_of = [&](std::vector<float> t, int heads, std::size_t row) {
    return summary.permuted && !t.empty() ? half_rope_rows(t, heads, c.head_dim(), row) : t;
  };
  std::vector<Tensor> tensors;
  auto vec = [&](const std::string& name, std::uint64_t n, const std::vector<float>& v, int rope_heads = 0) {
    tensors.push_back({name, {n}, [&v, rope_heads, &rows_of] { return rope_heads ? rows_of(v, rope_heads, 1) : v; }});
  };
  auto mat = [&](const std::string& name, std::uint64_t out, std::uint64_t in, const std::string& linear,
                 int rope_heads = 0) {
    tensors.push_back({name, {out, in}, [&w, linear, rope_heads, d, &rows_of] {
                         return rope_heads ? rows_of(w.matrix(linear), rope_heads, d) : w.matrix(linear);
                       }});
  };
  mat("model.embed_tokens.weight", v, d, c.tied_classifier ? "classifier" : "embedding");
  for (std::size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& L = w.layers[l];
    const std::string p = "model.layers." + std::to_string(l) + ".", e = "layers." + std::to_string(l) + ".";
    vec(p + "input_layernorm.weight", d, L.attn_norm);
    mat(p + "self_attn.q_proj.weight", qd, d, e + "wq", c.n_heads);
    mat(p + "self_attn.k_proj.weight", kv, d, e + "wk", c.n_kv_heads);
    mat(p + "self_attn.v_proj.weight", kv, d, e + "wv");
    mat(p + "self_attn.o_proj.weight", d, qd, e + "wo");
    if (c.qkv_bias) {
      vec(p + "self_attn.q_proj.bias", qd, L.bq, c.n_heads);
      vec(p + "self_attn.k_proj.bias", kv, L.bk, c.n_kv_heads);
      vec(p + "self_attn.v_proj.bias", kv, L.bv);
    }
    vec(p + "post_attention_layernorm.weight", d, L.ffn_norm);
    mat(p + "mlp.gate_proj.weight", h, d, e + "w1");
    mat(p + "mlp.down_proj.weight", d, h, e + "w2");
    mat(p + "mlp.up_proj.weight", h, d, e + "w3");
  }
  vec("model.norm.weight", d, w.final_norm);
  if (!c.tied_classifier) mat("lm_head.weight", v, d, "classifier");

  // safetensors: u64 header length, the JSON header (padded with spaces to 8 bytes), the data.
  const std::uint64_t esize = o.dtype == "F32" ? 4 : 2;
  std::ostringstream header;
  header << "{\"__metadata__\":{\"format\":\"pt\"}";
  std::uint64_t offset = 0;
  for (const Tensor& t : tensors) {
    std::uint64_t count = 1;
    for (std::uint64_t s : t.shape) count *= s;
    header << ",\"" << t.name << "\":{\"dtype\":\"" << o.dtype << "\",\"shape\":[";
    for (std::size_t i = 0; i < t.shape.size(); ++i) header << (i ? "," : "") << t.shape[i];
    header << "],\"data_offsets\":[" << offset << "," << offset + count * esize << "]}";
    offset += count * esize;
  }
  header << "}";
  std::string json = header.str();
  json.append((8 - json.size() % 8) % 8, ' ');
  const fs::path st = folder / "model.safetensors";
  std::ofstream out(st, std::ios::binary);
  if (!out) throw Error("Hugging Face export: cannot write " + st.string());
  const std::uint64_t n = json.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(json.data(), static_cast<std::streamsize>(json.size()));
  std::vector<std::uint16_t> halves;
  for (const Tensor& t : tensors) {
    const std::vector<float> values = t.values();
    if (o.dtype == "F32") {
      out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * 4));
      continue;
    }
    halves.resize(values.size());
    for (std::size_t i = 0; i < halves.size(); ++i)
      halves[i] = o.dtype == "BF16" ? ref::float_to_bf16(values[i]) : ref::float_to_f16(values[i]);
    out.write(reinterpret_cast<const char*>(halves.data()), static_cast<std::streamsize>(halves.size() * 2));
  }
  out.close();
  if (!out) throw Error("Hugging Face export: writing " + st.string() + " failed");
  summary.tensor_bytes = offset;

  const char* torch_dtype = o.dtype == "F32" ? "float32" : o.dtype == "BF16" ? "bfloat16" : "float16";
  std::ostringstream cfg;
  cfg << "{\n"
      << "  \"architectures\": [\"" << (c.qkv_bias ? "Qwen2ForCausalLM" : "LlamaForCausalLM") << "\"],\n"
      << "  \"model_type\": \"" << summary.model_type << "\",\n"
      << "  \"hidden_size\": " << c.dim << ",\n"
      << "  \"intermediate_size\": " << c.hidden_dim << ",\n"
      << "  \"num_hidden_layers\": " << c.n_layers << ",\n"
      << "  \"num_attention_heads\": " << c.n_heads << ",\n"
      << "  \"num_key_value_heads\": " << c.n_kv_heads << ",\n"
      << "  \"head_dim\": " << c.head_dim() << ",\n"
      << "  \"vocab_size\": " << c.vocab_size << ",\n"
      << "  \"max_position_embeddings\": " << c.max_seq_len << ",\n"
      << "  \"rope_theta\": " << number(c.rope_theta) << ",\n"
      << "  \"rms_norm_eps\": " << number(c.norm_eps) << ",\n"
      << "  \"hidden_act\": \"silu\",\n"
      << (c.qkv_bias ? "" : "  \"attention_bias\": false,\n  \"mlp_bias\": false,\n")
      << "  \"tie_word_embeddings\": " << (c.tied_classifier ? "true" : "false") << ",\n"
      << "  \"bos_token_id\": " << c.bos_id << ",\n"
      << "  \"eos_token_id\": " << c.eos_id << ",\n"
      << "  \"torch_dtype\": \"" << torch_dtype << "\"\n"
      << "}\n";
  const fs::path cp = folder / "config.json";
  std::ofstream cf(cp);
  cf << cfg.str();
  cf.close();
  if (!cf) throw Error("Hugging Face export: writing " + cp.string() + " failed");
  return summary;
}

}  // namespace inferlab
