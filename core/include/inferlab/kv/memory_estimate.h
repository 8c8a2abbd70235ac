// The memory a run will need, estimated before anything is allocated (inferlab validate and
// run, through plan_experiment), so a run that cannot fit is refused with the figures instead
// of being killed hours in. What is counted (each term an upper bound of what the run holds at
// once; cells run one after another, so the largest variant counts):
//   source weights   the loaded weights, kept for every cell: every parameter in fp32, but a
//                    GGUF's block-quantized linears as their blocks and a preset's matrices not
//                    at all (seeded_weights: drawn when a model is built); plus the largest such
//                    matrix once in fp32, while a model is built
//   variant weights  the cell's model: norms (and an untied embedding) in fp32, each linear as the variant's
//                    quantization stores it (Quantization::planned_bytes: by default asked of
//                    the strategy itself on a probe of each linear's shape)
//   KV pool          kv.num_blocks blocks (or the engine's own sizing: every request at once,
//                    capped at kAutoKvPoolBytes) × bytes per token of the variant's KV dtype
//   activations      the forward pass's scratch for the largest step the scheduler can form,
//                    and the logits
//   prompts          every request's prompt and output tokens
//   process          what the planning process already holds resident (code and shared
//                    libraries: with CUDA built in, cuBLAS alone is ~150 MB), read from
//                    /proc/self/statm — a run's process loads the same libraries
// Not counted: a draft model, calibration statistics.
#pragma once
#include <cstdint>
#include <string>

#include "inferlab/model/model_config.h"

namespace inferlab {

class Quantization;
class Registry;
struct Plan;

struct MemoryEstimate {
  std::uint64_t source_weights = 0;
  std::uint64_t variant_weights = 0;
  std::string weights_variant;  // the variant whose model is largest
  std::uint64_t kv_pool = 0;
  std::string kv_variant;       // the variant whose KV pool is largest
  std::uint64_t activations = 0;
  std::uint64_t prompts = 0;
  std::uint64_t process = 0;
  std::uint64_t total() const { return source_weights + variant_weights + kv_pool + activations + prompts + process; }
  // "1.2 GiB = weights 800 MiB (fp32) + 200 MiB (variant 'int4') + KV pool 128 MiB (variant
  // 'base') + activations 16 MiB + prompts 1 MiB"
  std::string describe() const;
};

// The estimate for a planned run; reads the workload's lengths (no prompt is drawn), no weight.
// A simulated run (device kind "sim") materialises no weights, KV or activations: prompts only.
MemoryEstimate estimate_run_memory(const Plan& plan, const Registry& registry, const ModelConfig& model);
// The terms it sums, for callers that build models outside a plan (inferlab bench):
// the loaded weights of a model of config c (seeded: a preset's seeded_weights) ...
std::uint64_t loaded_weight_bytes(const ModelConfig& c, bool seeded);
// ... and the Model that `quant` builds of it (norms in fp32, each linear's planned_bytes).
std::uint64_t estimate_model_bytes(Quantization& quant, const ModelConfig& c);

// The memory this process may use: the least of physical memory (sysconf), its address-space
// limit (RLIMIT_AS, inherited by every cell) and its cgroups' limits (cgroup_memory_limit).
// `what` names the one that binds, for messages: "this machine has 16.0 GiB", "this process's
// address-space limit (RLIMIT_AS, ulimit -v) is 5.6 GiB", "its cgroup's memory limit (...) is ...".
struct MemoryLimit {
  std::uint64_t bytes = 0;
  std::string what;
  bool enforced = false;  // RLIMIT_AS or a cgroup binds (not physical memory, which swap extends)
};
MemoryLimit memory_limit();

// memory_limit().bytes: the default limit of a run's memory estimate.
std::uint64_t machine_memory_bytes();

// The tightest limit of the cgroups named by `proc_self_cgroup` (the text of /proc/self/cgroup),
// read under sys_root (normally /sys/fs/cgroup): v2 memory.max and v1
// memory/memory.limit_in_bytes of each group and its ancestors; "max" and the v1 "unlimited"
// value (about 2^63) are no limit. 0 when none applies; `file` is set to the binding file.
std::uint64_t cgroup_memory_limit(const std::string& proc_self_cgroup, const std::string& sys_root, std::string* file = nullptr);

// "16GiB", "512 MB", "1.5G", "100000000": a positive number and an optional unit, B, KB, MB,
// GB, TB (powers of 1000), KiB, MiB, GiB, TiB or K, M, G, T (powers of 1024; case-insensitive).
// Throws Error("<where> <text>: ...; allowed: ...") otherwise.
std::uint64_t parse_memory_size(const std::string& text, const std::string& where);

// "512 B", "3.0 KiB", "1.25 GiB".
std::string format_bytes(std::uint64_t bytes);

}  // namespace inferlab
