// ModelConfig checks, parameter counts and the presets of real Llama-family shapes.
#include "inferlab/model/model_config.h"

#include <functional>
#include <string>
#include <utility>

#include "inferlab/error.h"

namespace inferlab {
namespace {

struct Preset {
  const char* name;
  int dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, max_seq_len;
  float rope_theta;
  bool tied;
  int bos_id, eos_id;
};

// Shapes from each model's published config (llama2.c tinyllamas params, HF config.json).
// Llama 3.x's rope scaling and SmolLM2's chat tokens are out of scope: these drive random
// weights of the right size, and real checkpoints carry their own config.
constexpr Preset kPresets[] = {
    {"stories260k", 64, 172, 5, 8, 4, 512, 512, 10000.0f, true, 1, 2},
    {"stories15m", 288, 768, 6, 6, 6, 32000, 256, 10000.0f, true, 1, 2},
    {"stories110m", 768, 2048, 12, 12, 12, 32000, 1024, 10000.0f, true, 1, 2},
    {"smollm2-135m", 576, 1536, 30, 9, 3, 49152, 8192, 100000.0f, true, 1, 2},
    {"tinyllama-1.1b", 2048, 5632, 22, 32, 4, 32000, 2048, 10000.0f, false, 1, 2},
    {"llama-3.2-1b", 2048, 8192, 16, 32, 8, 128256, 131072, 500000.0f, true, 128000, 128001},
    {"llama-2-7b", 4096, 11008, 32, 32, 32, 32000, 4096, 10000.0f, false, 1, 2},
    // OPT-13B's attention shape (40 layers, 40 heads of 128) in a Llama block: vLLM's Table 1 model.
    {"llama-2-13b", 5120, 13824, 40, 40, 40, 32000, 4096, 10000.0f, false, 1, 2},
    // OPT-13B (vLLM's §6 model) in a Llama block: its 40 layers of 40 heads × 128, its vocabulary
    // (tied), its 2048-token context, and a gated MLP of 13653 (3 × 5120 × 13653 ≈ OPT's
    // 2 × 5120 × 20480 weights per layer), so the parameter count matches (12.8B).
    {"opt-13b", 5120, 13653, 40, 40, 40, 50272, 2048, 10000.0f, true, 2, 2},
    {"llama-3-8b", 4096, 14336, 32, 32, 8, 128256, 8192, 500000.0f, false, 128000, 128001},
};

std::string where(const ModelConfig& c) {
  return "model config" + (c.name.empty() ? std::string() : " '" + c.name + "'");
}

}  // namespace

void ModelConfig::validate() const {
  auto positive = [&](int value, const char* field) {
    check(value > 0, where(*this) + ": " + field + " must be > 0, got " + std::to_string(value));
  };
  positive(dim, "dim");
  positive(hidden_dim, "hidden_dim");
  positive(n_layers, "n_layers");
  positive(n_heads, "n_heads");
  positive(n_kv_heads, "n_kv_heads");
  positive(vocab_size, "vocab_size");
  positive(max_seq_len, "max_seq_len");
  check(dim % n_heads == 0, where(*this) + ": n_heads (" + std::to_string(n_heads) +
                                ") must divide dim (" + std::to_string(dim) + ")");
  check(n_kv_heads <= n_heads && n_heads % n_kv_heads == 0,
        where(*this) + ": n_kv_heads (" + std::to_string(n_kv_heads) + ") must divide n_heads (" +
            std::to_string(n_heads) + ")");
  check(head_dim() % 2 == 0,
        where(*this) + ": head_dim (" + std::to_string(head_dim()) + ") must be even for RoPE");
  check(rope_theta > 0.0f, where(*this) + ": rope_theta must be > 0");
  check(norm_eps > 0.0f, where(*this) + ": norm_eps must be > 0");
  check(bos_id >= 0 && bos_id < vocab_size,
        where(*this) + ": bos_id " + std::to_string(bos_id) + " outside [0, vocab_size)");
  check(eos_id >= 0 && eos_id < vocab_size,
        where(*this) + ": eos_id " + std::to_string(eos_id) + " outside [0, vocab_size)");
}

long long ModelConfig::parameter_count() const {
  const long long d = dim, h = hidden_dim, kv = kv_dim(), v = vocab_size;
  long long per_layer = 2 * d             // attention and ffn norms
                        + d * d           // wq
                        + 2 * kv * d      // wk, wv
                        + d * d           // wo
                        + 3 * h * d;      // w1, w2, w3
  if (qkv_bias) per_layer += d + 2 * kv;
  long long total = v * d + per_layer * n_layers + d;
  if (!tied_classifier) total += v * d;
  return total;
}

ModelConfig preset_config(const std::string& name) {
  for (const Preset& p : kPresets) {
    if (name != p.name) continue;
    ModelConfig c;
    c.name = p.name;
    c.dim = p.dim;
    c.hidden_dim = p.hidden_dim;
    c.n_layers = p.n_layers;
    c.n_heads = p.n_heads;
    c.n_kv_heads = p.n_kv_heads;
    c.vocab_size = p.vocab_size;
    c.max_seq_len = p.max_seq_len;
    c.rope_theta = p.rope_theta;
    c.norm_eps = 1e-5f;
    c.tied_classifier = p.tied;
    c.bos_id = p.bos_id;
    c.eos_id = p.eos_id;
    return c;
  }
  std::string known;
  for (const auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
  throw Error("unknown model preset '" + name + "'; known presets: " + known);
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.emplace_back(p.name);
  return names;
}

}  // namespace inferlab
