// manifest.json of a results folder: everything needed to tell two runs apart — the config file
// and its hash, --set overrides, git commit and dirty flag, compiler, CPU, threads, model and
// trace hashes, every plugin's version, library path and SHA-256, each variant's stack, the
// per-repeat seeds, and a note when the model's fp32 reference is a dequantised quantized file.
#pragma once
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "inferlab/run/runner.h"
#include "inferlab/tokenizer/tokenizer.h"

namespace inferlab {

// `model` is the config of the weights the run loaded; `requests` the workload's size;
// `tokenizer` the model's (null: none), whose BOS/EOS conventions as applied are recorded.
std::string manifest_json(const Plan& plan, const Registry& registry, const ModelConfig& model,
                          std::size_t requests, int threads, const Tokenizer* tokenizer = nullptr);

// Where a run stands, kept in manifest.json under "run" and rewritten after every cell.
struct CellRef {
  std::string variant;
  int repeat = 0;
};
// A `run --resume --force-config` that accepted an edited config.toml.
struct ConfigChange {
  int resume = 0;                 // the resume that accepted it (1 = the first)
  std::vector<std::string> keys;  // changed_config_keys: "key (old → new)"
  std::string from, to;           // text_hash of config.toml before and after
};
struct RunState {
  std::string status = "running";  // running, complete, interrupted, failed (or partial: merge)
  std::string signal;               // the signal that interrupted it ("SIGINT")
  std::string reason;               // failed: why ("cannot write …: no space left on device (…)")
  long long pid = 0;                // the process that last ran the folder, and its host
  std::string host;
  std::string config_hash;          // text_hash of the config.toml its cells were made with
  std::vector<ConfigChange> config_forced;
  std::vector<CellRef> done, missing;
  int resumes = 0;                  // times `run --resume` continued this folder
  // --check-determinism: per variant, "same" or "differs" with both hashes.
  std::vector<std::pair<std::string, std::string>> determinism;
  Shard shard;               // the part of the grid this folder runs (count 1: all of it)
  std::string merged_from;   // merge: a JSON array of the shards' provenance ("" = not merged)
};
// `manifest` (from manifest_json, or a manifest.json read back) with its "run" block replaced.
std::string manifest_with_state(const std::string& manifest, const RunState& state);
// The number after "resumes": in a manifest's run block (0 when absent).
int manifest_resumes(const std::string& manifest);
// The run block's "shard" ({0, 1} when absent).
Shard manifest_shard(const std::string& manifest);
// The run block's config record: config_hash ("" in folders of older builds) and config_forced.
void manifest_config_record(const std::string& manifest, RunState& state);

// The CPU's model name from /proc/cpuinfo; "unknown" where there is none.
std::string cpu_model();

}  // namespace inferlab
