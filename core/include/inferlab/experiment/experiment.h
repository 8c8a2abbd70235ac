// An experiment file parsed and checked: model, device, workload, and the stacks to compare
// (the baseline first, then [[variant]]s and [sweep] grid points). Every error names the file,
// line and column and what is allowed.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "inferlab/kv/kv_cache.h"
#include "inferlab/results/metrics.h"
#include "inferlab/plugin/params.h"
#include "inferlab/plugin/plugin.h"
#include "inferlab/experiment/quantization_rules.h"
#include "inferlab/workload/workload.h"

namespace inferlab {

// The four plugin kinds in stack order: the order of a stack's keys in TOML, the manifest and
// every listing of a stack.
inline constexpr PluginKind kStackKinds[] = {PluginKind::kAttention, PluginKind::kQuantization,
                                             PluginKind::kScheduling, PluginKind::kDecoding};
// The TOML key of a kind's choice in a stack: "attention", "quantization", "scheduler",
// "decoding" (not plugin_kind_name, which says "scheduling").
const char* stack_key(PluginKind kind);
// The kind a stack key names; false for "kv" or anything else.
bool stack_key_kind(const std::string& key, PluginKind& kind);

struct PluginChoice {
  std::string name;
  std::map<std::string, ParamValue> params;  // as given (checked against the plugin later)
  std::string where;                          // "file:line:col" of the choice
};

struct Stack {
  PluginChoice attention{"naive", {}, ""};
  PluginChoice quantization{"none", {}, ""};
  PluginChoice scheduler{"continuous", {}, ""};
  PluginChoice decoding{"sampling", {}, ""};
  // quantization = { ..., rules = [...] }: per-layer policies, first match wins
  // (quantization_rules.h). They belong to the quantization choice: naming another plugin
  // without rules drops the inherited ones, as it drops the parameters.
  std::vector<QuantRule> quantization_rules;
  KvCacheConfig kv;
  std::string kv_where;  // "file:line:col" of the [kv] table that set it (or of the stack)
  PluginChoice& choice(PluginKind kind);
  const PluginChoice& choice(PluginKind kind) const;
};

struct ModelSpec {
  std::string preset;     // random seeded weights of this shape …
  std::string path;       // … or a checkpoint (resolved path)
  std::string tokenizer;  // optional tokenizer file (llama2c)
  std::string format = "auto";
  int n_layers = 0;       // override the preset's depth (0 = keep)
  std::uint64_t seed = 0; // weights seed for presets (defaults to experiment seed)
  std::optional<bool> add_bos;  // prepend BOS to text; unset = what the model file says
};

struct Variant {
  std::string name;
  Stack stack;
  // [[variant]] model = { preset = ... } or { path = ... }: this variant runs another model (a
  // smaller or distilled one) on the same requests; quality is measured against the baseline
  // model's log-probs. Unset = the experiment's [model]. The vocabulary must be the baseline's.
  std::optional<ModelSpec> model;
  std::string model_where;  // "file:line:col" of the model key
};

struct DeviceSpec {
  DeviceKind kind = DeviceKind::kCpu;  // parsed once, here: [device] kind = "cpu" | "cuda" | "sim"
  int threads = 0;  // 0 = all cores
  // Fused elementwise ops (Device::set_fuse: RMSNorm with the residual add and the int8
  // activation quantisation, RoPE with the KV write, SwiGLU with the quantisation); same results,
  // so the gain is this one line. Default: fused_by_default(kind) — on with kind = "cpu" (the
  // fast path), off with "cuda" (its fused kernels have not yet run on a GPU); refused on "sim".
  bool fuse = fused_by_default(DeviceKind::kCpu);
  // CUDA graphs for decode steps (ComputeDevice::set_cuda_graphs): each decode step is captured
  // once per padded batch bucket and replayed; prefill and mixed steps run eagerly. CUDA only:
  // refused with kind = "cpu" or "sim".
  bool cuda_graphs = false;
  // kind = "sim" only (docs/simulation.md): hardware profile, tensor and pipeline parallelism.
  std::string profile = "h100";
  int tp = 1, pp = 1;
};

// Optional [quality]: teacher-forced evaluation of every variant on a text.
struct QualitySpec {
  bool enabled = false;
  std::string text;     // resolved path of a UTF-8 text file
  int max_tokens = 512; // evaluate at most this many tokens of it
  int context = 0;      // window (0 = model's trained context)
};

// Optional [calibration]: tokens the float model runs over once, so quantization strategies
// that ask (GPTQ, AWQ, SmoothQuant) see each linear's input statistics.
struct CalibrationSpec {
  bool enabled = false;
  std::string text;      // resolved path of a UTF-8 text file
  int tokens = 512;      // use exactly this many tokens of it (fewer is an error)
  int seq_len = 256;     // window the model runs over (tokens are cut into windows)
  std::uint64_t seed = 0;  // row sampling (defaults to the experiment seed)
};

struct ExperimentSpec {
  std::string name;
  std::string description;
  std::uint64_t seed = 1;
  int repeats = 1;
  // Each variant × repeat cell in its own child process (fork): a crash, abort, time or memory
  // limit becomes that cell's failed row. false runs cells in this process.
  bool isolate = true;
  double cell_timeout_s = 0;      // kill an isolated cell after this long (0 = no limit)
  std::int64_t cell_memory_mb = 0; // address space an isolated cell may add (0 = no limit)
  ModelSpec model;
  DeviceSpec device;
  WorkloadSpec workload;
  SloSpec slo;
  QualitySpec quality;
  CalibrationSpec calibration;
  std::vector<std::string> plugin_paths;  // [plugins] paths, resolved
  std::vector<Variant> variants;          // [0] is the baseline
  std::string source_path;                // the TOML file
  std::string source_text;                // its bytes, for hashing
  std::vector<std::string> overrides;     // --set arguments, as given
};

// Parses `path` with --set overrides ("dotted.key=value", the value in TOML syntax or a bare
// string). Throws Error "file:line:col: problem; allowed: ..." on any problem.
ExperimentSpec load_experiment(const std::string& path, const std::vector<std::string>& overrides);

// The folder data paths fall back to: $INFERLAB_DATA, else ../shared beside the source tree.
std::string data_root();
// Resolves a path from a config: absolute, else relative to base_dir, the working directory,
// the source tree, or data_root() — the first that exists. Throws Error listing where it looked.
std::string resolve_data_path(const std::string& path, const std::string& base_dir, const std::string& where);

}  // namespace inferlab
