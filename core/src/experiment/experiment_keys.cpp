#include "inferlab/experiment/experiment_keys.h"

#include "inferlab/error.h"

namespace inferlab {

const std::vector<ExperimentTable>& experiment_tables() {
  static const std::vector<ExperimentTable> tables = [] {
    const std::vector<std::string> stack = {"attention", "quantization", "scheduler", "decoding", "kv"};
    std::vector<std::string> variant = {"name", "model"};
    variant.insert(variant.end(), stack.begin(), stack.end());
    return std::vector<ExperimentTable>{
        {"file",
         {"experiment", "model", "device", "workload", "baseline", "variant", "sweep", "plugins", "slo", "quality",
          "calibration", "claim"}},
        {"experiment", {"name", "description", "seed", "repeats", "isolate", "cell_timeout_s", "cell_memory_mb"}},
        {"model", {"preset", "path", "tokenizer", "format", "n_layers", "seed", "add_bos"}},
        {"device", {"kind", "threads", "fuse", "cuda_graphs", "profile", "tp", "pp"}},
        {"workload",
         {"trace", "format", "num_requests", "arrival", "rate", "burstiness", "prompt_len", "output_len", "lengths_file",
          "prefix_block_tokens", "shared_prefix", "limit", "time_scale", "max_prompt", "max_output", "seed", "class_mix",
          "queue_timeout_s", "timeout_s", "max_new_tokens", "trace_model", "trace_log_type"}},
        {"length", {"dist", "value", "min", "max", "mean", "sigma"}},
        {"slo", {"ttft_ms", "tpot_ms", "e2e_ms", "class_ttft_ms", "class_tpot_ms", "class_e2e_ms"}},
        {"quality", {"text", "max_tokens", "context"}},
        {"calibration", {"text", "tokens", "seq_len", "seed"}},
        {"plugins", {"paths"}},
        {"stack", stack},
        {"variant", variant},
        {"kv",
         {"enabled", "block_size", "num_blocks", "gpu_memory_fraction", "reservation", "prefix_caching", "dtype",
          "group_size", "f32_first_layers", "f32_last_layers", "memory_mb"}},
        {"rule", {"match", "layers", "method"}},
    };
  }();
  return tables;
}

const std::vector<std::string>& experiment_keys(const std::string& table) {
  for (const ExperimentTable& t : experiment_tables())
    if (t.name == table) return t.keys;
  throw Error("experiment_keys: no table '" + table + "'");
}

}  // namespace inferlab
