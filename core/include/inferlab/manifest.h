// manifest.json of a results folder: everything needed to tell two runs apart — the config file
// and its hash, --set overrides, git commit and dirty flag, compiler, CPU, threads, model and
// trace hashes, every plugin's version, each variant's stack and the per-repeat seeds.
#pragma once
#include <cstddef>
#include <string>

#include "inferlab/runner.h"
#include "inferlab/tokenizer.h"

namespace inferlab {

// `model` is the config of the weights the run loaded; `requests` the workload's size;
// `tokenizer` the model's (null: none), whose BOS/EOS conventions as applied are recorded.
std::string manifest_json(const Plan& plan, const Registry& registry, const ModelConfig& model,
                          std::size_t requests, int threads, const Tokenizer* tokenizer = nullptr);

// The CPU's model name from /proc/cpuinfo; "unknown" where there is none.
std::string cpu_model();

}  // namespace inferlab
