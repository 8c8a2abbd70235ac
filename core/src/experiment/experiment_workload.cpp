// The [workload] table (see experiment_workload.h).
#include "experiment/experiment_workload.h"

#include "inferlab/experiment/experiment_keys.h"
#include "inferlab/experiment/input_checks.h"
#include "inferlab/workload/workload.h"

namespace inferlab {

using namespace experiment_parse;  // Ctx, check_keys, get_* (experiment_parse.h)

namespace {

// The keys a table with each dist must give: a table missing one is refused, not completed from
// LengthSpec's defaults (a silent 64 tokens).
struct LengthKeys {
  const char* dist;
  std::vector<std::string> required;
  const char* example;
};
const std::vector<LengthKeys> kLengthKeys = {
    {"fixed", {"value"}, "{ dist = \"fixed\", value = 64 }"},
    {"uniform", {"min", "max"}, "{ dist = \"uniform\", min = 16, max = 256 }"},
    {"lognormal", {"mean", "sigma"}, "{ dist = \"lognormal\", mean = 64, sigma = 0.8, min = 8, max = 256 } (min, max optional)"},
    {"trace", {}, "{ dist = \"trace\" } with [workload] lengths_file"},
};

void parse_length(const Ctx& c, const toml::node& n, const std::string& key, LengthSpec& l) {
  if (n.as_integer()) {
    l.dist = "fixed";
    l.value = static_cast<int>(get_int(c, n, key, 1, kMaxRequestTokens));
    return;
  }
  const auto& t = get_table(c, n, key);
  check_keys(c, t, key, experiment_keys("length"));
  const toml::node* dist = t.get("dist");
  if (!dist)
    throw Error(c.at(n) + ": " + key + " table needs 'dist'; allowed: fixed, uniform, lognormal, trace, e.g. " + key +
                " = { dist = \"fixed\", value = 64 } (or " + key + " = 64)");
  l.dist = get_string(c, *dist, key + ".dist");
  const LengthKeys* keys = nullptr;
  for (const auto& k : kLengthKeys)
    if (l.dist == k.dist) keys = &k;
  if (!keys)
    throw Error(c.at(*dist) + ": " + key + ".dist = \"" + quote_input(l.dist) + "\"; allowed: fixed, uniform, lognormal, trace");
  // Keys of another distribution are still read (a resolved config.toml writes them all).
  std::vector<std::string> missing;
  for (const auto& r : keys->required)
    if (!t.get(r)) missing.push_back("'" + r + "'");
  if (!missing.empty())
    throw Error(c.at(n) + ": " + key + " with dist = \"" + l.dist + "\" needs " + join(missing) + "; allowed: " +
                keys->example);
  if (auto v = t.get("value")) l.value = static_cast<int>(get_int(c, *v, key + ".value", 1, kMaxRequestTokens));
  if (auto v = t.get("min")) l.min = static_cast<int>(get_int(c, *v, key + ".min", 1, kMaxRequestTokens));
  if (auto v = t.get("max")) l.max = static_cast<int>(get_int(c, *v, key + ".max", 1, kMaxRequestTokens));
  if (auto v = t.get("mean")) l.mean = get_float(c, *v, key + ".mean", 1.0, static_cast<double>(kMaxRequestTokens));
  if (auto v = t.get("sigma")) l.sigma = get_float(c, *v, key + ".sigma", 0.0, kMaxLengthSigma);
  if (l.min > l.max) throw Error(c.at(n) + ": " + key + ".min > " + key + ".max");
}


}  // namespace

void parse_workload(const Ctx& c, const toml::table& t, const std::string& base_dir, WorkloadSpec& w) {
  check_keys(c, t, "[workload]", experiment_keys("workload"));
  if (auto v = t.get("trace_model")) w.trace_model = get_string(c, *v, "trace_model");
  if (auto v = t.get("trace_log_type")) w.trace_log_type = get_string(c, *v, "trace_log_type");
  if (auto v = t.get("trace")) w.trace = resolve_data_path(get_string(c, *v, "trace"), base_dir, c.at(*v));
  if (auto v = t.get("format")) {
    w.format = get_string(c, *v, "format");
    if (w.format != "auto" && w.format != "canonical" && w.format != "azure" && w.format != "mooncake" &&
        w.format != "vidur" && w.format != "burstgpt")
      throw Error(c.at(*v) + ": format = \"" + quote_input(w.format) + "\"; allowed: auto, canonical, azure, mooncake, vidur, burstgpt");
  }
  if (auto v = t.get("num_requests")) w.num_requests = static_cast<int>(get_int(c, *v, "num_requests", 1, 10000000));
  if (auto v = t.get("arrival")) {
    w.arrival = get_string(c, *v, "arrival");
    if (w.arrival != "all_at_once" && w.arrival != "poisson" && w.arrival != "gamma")
      throw Error(c.at(*v) + ": arrival = \"" + quote_input(w.arrival) + "\"; allowed: all_at_once, poisson, gamma");
  }
  if (auto v = t.get("rate")) w.rate = get_float(c, *v, "rate", kMinRate, kMaxRate);
  if (auto v = t.get("burstiness")) w.burstiness = get_float(c, *v, "burstiness", kMinBurstiness, kMaxBurstiness);
  if (auto v = t.get("prompt_len")) parse_length(c, *v, "prompt_len", w.prompt_len);
  if (auto v = t.get("output_len")) parse_length(c, *v, "output_len", w.output_len);
  if (auto v = t.get("lengths_file"))
    w.lengths_file = resolve_data_path(get_string(c, *v, "lengths_file"), base_dir, c.at(*v));
  if ((w.prompt_len.dist == "trace" || w.output_len.dist == "trace") && w.lengths_file.empty())
    throw Error(c.at(t) + ": a length with dist = \"trace\" needs [workload] lengths_file (e.g. "
                "\"traces/sharegpt_8k_filtered_stats_llama2_tokenizer.csv\")");
  if (auto v = t.get("shared_prefix"))
    w.shared_prefix = static_cast<int>(get_int(c, *v, "shared_prefix", 0, 1 << 24));
  if (auto v = t.get("prefix_block_tokens"))
    w.prefix_block_tokens = static_cast<int>(get_int(c, *v, "prefix_block_tokens", 1, 1 << 20));
  if (auto v = t.get("limit")) w.limit = static_cast<int>(get_int(c, *v, "limit", 0, 100000000));
  if (auto v = t.get("time_scale")) w.time_scale = get_float(c, *v, "time_scale", 0.0, kMaxTimeScale);
  if (auto v = t.get("max_prompt")) w.max_prompt = static_cast<int>(get_int(c, *v, "max_prompt", 0, 1 << 24));
  if (auto v = t.get("max_output")) w.max_output = static_cast<int>(get_int(c, *v, "max_output", 0, 1 << 24));
  if (auto v = t.get("seed")) w.seed = static_cast<std::uint64_t>(get_int(c, *v, "seed", 0, INT64_MAX));
  if (auto v = t.get("class_mix")) w.class_mix = get_float_list(c, *v, "class_mix");
  if (auto v = t.get("queue_timeout_s")) w.queue_timeout_s = get_float(c, *v, "queue_timeout_s", 0.0, kMaxSeconds);
  if (auto v = t.get("timeout_s")) w.timeout_s = get_float(c, *v, "timeout_s", 0.0, kMaxSeconds);
  if (auto v = t.get("shared_prefix"); v && w.trace.empty() && w.prompt_len.dist != "trace") {
    const int longest = w.prompt_len.dist == "fixed" ? w.prompt_len.value : w.prompt_len.max;
    if (w.shared_prefix > longest)
      throw Error(c.at(*v) + ": shared_prefix = " + std::to_string(w.shared_prefix) +
                  " is longer than any prompt (prompt_len at most " + std::to_string(longest) + "); allowed: 0.." +
                  std::to_string(longest));
  }
  if (auto v = t.get("max_new_tokens")) w.max_new_tokens = static_cast<int>(get_int(c, *v, "max_new_tokens", 0, 1 << 24));
}

}  // namespace inferlab
