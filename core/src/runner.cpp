#include "inferlab/runner.h"

#include <charconv>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>
#include <unistd.h>

#include "inferlab/checkpoint.h"
#include "inferlab/engine.h"
#include "inferlab/error.h"
#include "inferlab/log.h"
#include "inferlab/model.h"
#include "inferlab/quality.h"
#include "inferlab/report.h"
#include "inferlab/workload.h"

namespace inferlab {

namespace {

std::string shell_line(const std::string& cmd) {
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[256];
    while (fgets(buf, sizeof buf, p)) out += buf;
    pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

// A float as TOML that reads back to the same double: the shortest round-trip digits, with a
// ".0" when they look like an integer (so a float parameter stays a float).
std::string toml_float(double d) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d);
  std::string out(buf, res.ptr);
  if (out.find_first_of(".eEn") == std::string::npos) out += ".0";  // not 1e+20, inf, nan
  return out;
}

std::string toml_value(const ParamValue& v) {
  if (const double* d = std::get_if<double>(&v)) return toml_float(*d);
  if (const std::string* str = std::get_if<std::string>(&v)) return json_quote(*str);
  return param_value_to_string(v);
}

}  // namespace

Params& ResolvedVariant::params(PluginKind kind) {
  switch (kind) {
    case PluginKind::kAttention: return attention;
    case PluginKind::kQuantization: return quantization;
    case PluginKind::kScheduling: return scheduler;
    case PluginKind::kDecoding: return decoding;
  }
  return attention;
}
const Params& ResolvedVariant::params(PluginKind kind) const { return const_cast<ResolvedVariant*>(this)->params(kind); }

ModelConfig experiment_model_config(const ModelSpec& spec) {
  if (!spec.preset.empty()) {
    ModelConfig c = preset_config(spec.preset);
    if (spec.n_layers > 0) c.n_layers = spec.n_layers;
    return c;
  }
  return load_experiment_model(spec).weights.config;
}

LoadedModel load_experiment_model(const ModelSpec& spec) {
  if (!spec.preset.empty()) {
    ModelConfig c = experiment_model_config(spec);
    const double bytes = static_cast<double>(c.parameter_count()) * 4.0;
    const double avail = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
    if (bytes * 2.2 > avail)  // float weights + the variant's copy
      throw Error("model preset '" + spec.preset + "' needs about " + std::to_string(static_cast<long long>(bytes * 2.2 / (1 << 20))) +
                  " MiB for fp32 weights, this machine has " + std::to_string(static_cast<long long>(avail / (1 << 20))) +
                  " MiB; set [model] n_layers to a smaller depth");
    LoadedModel m;
    m.weights = random_weights(c, spec.seed);
    return m;
  }
  LoadedModel m = load_model(spec.path, parse_model_format(spec.format), spec.tokenizer);
  if (spec.n_layers > m.weights.config.n_layers)  // cannot add layers to a checkpoint
    throw Error("[model] n_layers = " + std::to_string(spec.n_layers) + ", but " + spec.path + " has " +
                std::to_string(m.weights.config.n_layers) + " layers; allowed: 1.." +
                std::to_string(m.weights.config.n_layers));
  if (spec.n_layers > 0 && spec.n_layers < m.weights.config.n_layers) {
    m.weights.layers.resize(static_cast<std::size_t>(spec.n_layers));
    m.weights.config.n_layers = spec.n_layers;
  }
  return m;
}

Plan plan_experiment(const ExperimentSpec& spec, const Registry& registry, const ModelConfig& model) {
  Plan plan;
  plan.spec = spec;
  plan.repeats = spec.repeats;
  for (const Variant& v : spec.variants) {
    ResolvedVariant rv{v.name, v.stack, {}, {}, {}, {}};
    for (PluginKind k : kStackKinds) {
      const PluginChoice& ch = v.stack.choice(k);
      const std::string where = ch.where + ": variant '" + v.name + "'";
      rv.params(k) = registry.resolve(k, ch.name, ch.params, where);
    }
    // KV storage comes from the quantization strategy; attention must be able to read it.
    auto quant = registry.create_quantization(v.stack.quantization.name, rv.quantization);
    for (PluginKind k : kStackKinds) {
      const PluginChoice& ch = v.stack.choice(k);
      SupportQuery q{model, spec.device.kind, quant->kv_dtype(), rv.params(k)};
      auto reasons = registry.check_support(k, ch.name, q);
      if (!reasons.empty()) {
        std::string all;
        for (const auto& r : reasons) all += (all.empty() ? "" : "; ") + r;
        throw Error(ch.where + ": variant '" + v.name + "': " + plugin_kind_name(k) + " '" + ch.name +
                    "' cannot run this: " + all);
      }
    }
    plan.variants.push_back(std::move(rv));
  }
  return plan;
}

std::string resolved_config_toml(const Plan& plan) {
  const auto& s = plan.spec;
  std::ostringstream t;
  t << "# Fully resolved by inferlab from " << s.source_path << "\n";
  for (const auto& o : s.overrides) t << "# --set " << o << "\n";
  t << "\n[experiment]\nname = " << json_quote(s.name) << "\ndescription = " << json_quote(s.description)
    << "\nseed = " << s.seed << "\nrepeats = " << plan.repeats << "\n\n[model]\n";
  if (!s.model.preset.empty()) t << "preset = " << json_quote(s.model.preset) << "\n";
  if (!s.model.path.empty()) t << "path = " << json_quote(s.model.path) << "\nformat = " << json_quote(s.model.format) << "\n";
  if (!s.model.tokenizer.empty()) t << "tokenizer = " << json_quote(s.model.tokenizer) << "\n";
  if (s.model.n_layers) t << "n_layers = " << s.model.n_layers << "\n";
  t << "seed = " << s.model.seed << "\n\n[device]\nkind = " << json_quote(s.device.kind)
    << "\nthreads = " << s.device.threads << "\n\n";
  if (!s.plugin_paths.empty()) {
    t << "[plugins]\npaths = [";
    for (std::size_t i = 0; i < s.plugin_paths.size(); ++i) t << (i ? ", " : "") << json_quote(s.plugin_paths[i]);
    t << "]\n\n";
  }
  t << "[workload]\n";
  const auto& w = s.workload;
  if (!w.trace.empty()) {
    t << "trace = " << json_quote(w.trace) << "\nformat = " << json_quote(w.format) << "\n";
  } else {
    auto len = [](const LengthSpec& l) {
      std::ostringstream o;
      o << "{ dist = \"" << l.dist << "\", value = " << l.value << ", min = " << l.min << ", max = " << l.max
        << ", mean = " << toml_float(l.mean) << ", sigma = " << toml_float(l.sigma) << " }";
      return o.str();
    };
    t << "num_requests = " << w.num_requests << "\narrival = " << json_quote(w.arrival) << "\nrate = " << toml_float(w.rate)
      << "\nburstiness = " << toml_float(w.burstiness) << "\nprompt_len = " << len(w.prompt_len)
      << "\noutput_len = " << len(w.output_len) << "\n";
    if (!w.lengths_file.empty()) t << "lengths_file = " << json_quote(w.lengths_file) << "\n";
  }
  t << "prefix_block_tokens = " << w.prefix_block_tokens << "\nshared_prefix = " << w.shared_prefix
    << "\nlimit = " << w.limit
    << "\ntime_scale = " << toml_float(w.time_scale) << "\nmax_prompt = " << w.max_prompt
    << "\nmax_output = " << w.max_output << "\nseed = " << w.seed << "\n";
  if (s.slo.ttft_ms || s.slo.tpot_ms || s.slo.e2e_ms)
    t << "\n[slo]\nttft_ms = " << toml_float(s.slo.ttft_ms) << "\ntpot_ms = " << toml_float(s.slo.tpot_ms)
      << "\ne2e_ms = " << toml_float(s.slo.e2e_ms) << "\n";
  if (s.quality.enabled)
    t << "\n[quality]\ntext = " << json_quote(s.quality.text) << "\nmax_tokens = " << s.quality.max_tokens
      << "\ncontext = " << s.quality.context << "\n";
  auto stack = [&](const ResolvedVariant& v) {
    for (PluginKind k : kStackKinds) {
      t << stack_key(k) << " = { name = " << json_quote(v.stack.choice(k).name);
      for (const auto& [pk, pv] : v.params(k).values()) t << ", " << pk << " = " << toml_value(pv);
      t << " }\n";
    }
    t << "kv = { enabled = " << (v.stack.kv.enabled ? "true" : "false") << ", block_size = " << v.stack.kv.block_size << ", num_blocks = " << v.stack.kv.num_blocks
      << ", reservation = \"" << (v.stack.kv.reserve_full ? "full" : "on_demand")
      << "\", prefix_caching = " << (v.stack.kv.prefix_caching ? "true" : "false") << " }\n";
  };
  t << "\n[baseline]\n";
  stack(plan.variants.front());
  for (std::size_t i = 1; i < plan.variants.size(); ++i) {
    t << "\n[[variant]]\nname = " << json_quote(plan.variants[i].name) << "\n";
    stack(plan.variants[i]);
  }
  return t.str();
}

std::string run_plan(const Plan& plan, const Registry& registry, const RunOptions& options) {
  const ExperimentSpec& spec = plan.spec;
  auto t_load = std::chrono::steady_clock::now();
  LoadedModel loaded = load_experiment_model(spec.model);
  const ModelWeights& weights = loaded.weights;
  log::info("model " + weights.config.name + ": " + std::to_string(weights.config.parameter_count()) +
            " parameters, loaded in " +
            std::to_string(std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count()) + " s");
  std::vector<Request> requests = build_workload(spec.workload, weights.config.vocab_size);
  log::info("workload: " + std::to_string(requests.size()) + " requests");
  ThreadPool pool(spec.device.threads);

  ResultWriter out(options.out_root, spec.name);
  std::vector<std::string> names;
  for (const auto& v : plan.variants) names.push_back(v.name);
  std::vector<std::string> notes = {
      "model: " + weights.config.name + (spec.model.preset.empty() ? " (checkpoint)" : " (seeded random weights)") +
          ", " + std::to_string(weights.config.parameter_count()) + " parameters",
      "workload: " + std::to_string(requests.size()) + " requests" +
          (spec.workload.trace.empty() ? " (synthetic, " + spec.workload.arrival + ")" : " from " + spec.workload.trace),
      "device: " + spec.device.kind + ", " + std::to_string(pool.size()) + " threads, " + cpu_model()};
  // Positions past max_seq_len still run (RoPE extrapolates) but the model was never trained
  // there: say so rather than let a long-context sweep pass silently.
  std::size_t beyond = 0;
  for (const Request& r : requests)
    beyond += static_cast<long long>(r.prompt.size()) + r.max_output - 1 > weights.config.max_seq_len;
  if (beyond > 0) {
    notes.push_back("context: " + std::to_string(beyond) + " of " + std::to_string(requests.size()) +
                    " requests run past the model's trained context of " +
                    std::to_string(weights.config.max_seq_len) + " tokens (positions beyond it are extrapolated)");
    log::warn(notes.back());
  }
  out.set_header(spec.name, spec.description, names, notes);
  out.write_text("config.toml", resolved_config_toml(plan));

  // Manifest: everything needed to tell two runs apart.
  {
    std::ostringstream m;
    const std::string src = INFERLAB_SOURCE_DIR;
    std::string commit = shell_line("git -C '" + src + "' rev-parse HEAD 2>/dev/null");
    std::string dirty = shell_line("git -C '" + src + "' status --porcelain --untracked-files=no 2>/dev/null");
    m << "{\n  \"experiment\": " << json_quote(spec.name) << ",\n  \"config_file\": " << json_quote(spec.source_path)
      << ",\n  \"config_hash\": " << json_quote(text_hash(spec.source_text)) << ",\n  \"overrides\": [";
    for (std::size_t i = 0; i < spec.overrides.size(); ++i) m << (i ? ", " : "") << json_quote(spec.overrides[i]);
    m << "],\n  \"git_commit\": " << json_quote(commit.empty() ? "unknown" : commit)
      << ",\n  \"git_dirty\": " << (dirty.empty() ? "false" : "true") << ",\n  \"compiler\": " << json_quote(INFERLAB_CXX_COMPILER)
      << ",\n  \"cpu\": " << json_quote(cpu_model()) << ",\n  \"hardware_threads\": " << std::thread::hardware_concurrency()
      << ",\n  \"threads\": " << pool.size() << ",\n  \"device\": " << json_quote(spec.device.kind)
      << ",\n  \"model\": {\"name\": " << json_quote(weights.config.name) << ", \"preset\": " << json_quote(spec.model.preset)
      << ", \"path\": " << json_quote(spec.model.path)
      << ", \"hash\": " << json_quote(spec.model.path.empty() ? "" : file_hash(spec.model.path))
      << ", \"parameters\": " << weights.config.parameter_count() << ", \"weights_seed\": " << spec.model.seed << "},\n"
      << "  \"workload\": {\"trace\": " << json_quote(spec.workload.trace)
      << ", \"trace_hash\": " << json_quote(spec.workload.trace.empty() ? "" : file_hash(spec.workload.trace))
      << ", \"requests\": " << requests.size() << ", \"seed\": " << spec.workload.seed << "},\n"
      << "  \"seed\": " << spec.seed << ",\n  \"repeats\": " << plan.repeats << ",\n  \"plugins\": [";
    bool first = true;
    for (const auto* d : registry.list()) {
      m << (first ? "\n" : ",\n") << "    {\"kind\": \"" << plugin_kind_name(d->kind) << "\", \"name\": " << json_quote(d->name)
        << ", \"version\": " << json_quote(d->version) << "}";
      first = false;
    }
    m << "\n  ],\n  \"stacks\": [";
    for (std::size_t i = 0; i < plan.variants.size(); ++i) {
      const auto& v = plan.variants[i];
      m << (i ? ",\n" : "\n") << "    {\"variant\": " << json_quote(v.name);
      for (PluginKind k : kStackKinds) {
        const auto& d = registry.find(k, v.stack.choice(k).name);
        m << ", \"" << plugin_kind_name(k) << "\": " << json_quote(d.name + " " + d.version);
      }
      m << "}";
    }
    m << "\n  ],\n  \"repeat_seeds\": [";
    for (int rep = 0; rep < plan.repeats; ++rep)
      m << (rep ? ", " : "") << mix_seed(spec.seed, static_cast<std::uint64_t>(rep));
    m << "]\n}\n";
    out.write_text("manifest.json", m.str());
  }

  std::unique_ptr<QualityEvaluator> quality;
  if (spec.quality.enabled) {
    std::ifstream in(spec.quality.text, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    auto tokens = quality_tokens(text.str(), loaded.tokenizer.get(), weights.config.vocab_size, spec.quality.max_tokens);
    notes.push_back("quality: " + std::to_string(tokens.size()) + " tokens of " + spec.quality.text +
                    (loaded.tokenizer ? "" : " (UTF-8 bytes as ids: the model has no tokenizer)"));
    out.set_header(spec.name, spec.description, names, notes);
    quality = std::make_unique<QualityEvaluator>(spec.quality, std::move(tokens), pool);
  }

  // Repeats outermost so slow drift of a shared machine spreads over all variants alike.
  for (int rep = 0; rep < plan.repeats; ++rep) {
    for (const ResolvedVariant& v : plan.variants) {
      ResultRow row;
      row.variant = v.name;
      row.repeat = rep;
      std::vector<RequestTimeline> request_rows;
      auto t0 = std::chrono::steady_clock::now();
      try {
        auto attention = registry.create_attention(v.stack.attention.name, v.attention);
        auto quant = registry.create_quantization(v.stack.quantization.name, v.quantization);
        auto scheduler = registry.create_scheduler(v.stack.scheduler.name, v.scheduler);
        auto decoder = registry.create_decoder(v.stack.decoding.name, v.decoding);
        Model model(weights, *quant);
        EngineOptions eo;
        eo.kv = v.stack.kv;
        eo.seed = mix_seed(spec.seed, static_cast<std::uint64_t>(rep));
        eo.clock = options.clock;
        Engine engine(model, *attention, *scheduler, *decoder, pool, eo);
        log::info("run " + v.name + " repeat " + std::to_string(rep));
        RunResult r = engine.run(requests);
        row.metrics = compute_metrics(r.timeline, spec.slo);
        if (quality) {
          // Quality is deterministic: measured once per variant, repeated in every row.
          auto q = quality->evaluate(v.name, model, *attention, rep == 0 && &v == &plan.variants.front());
          row.metrics.insert(row.metrics.end(), q.begin(), q.end());
        }
        request_rows = std::move(r.timeline.requests);
      } catch (const std::exception& e) {
        row.ok = false;
        row.error = e.what();
        row.metrics.clear();
        log::error("variant '" + v.name + "' repeat " + std::to_string(rep) + " failed: " + e.what());
      }
      row.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      out.add(row, request_rows);
    }
  }
  return out.dir();
}

}  // namespace inferlab
