#include "commands.h"
#include "plugin_spec.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <unistd.h>

#include <boost/program_options.hpp>

#include "inferlab/formats/checkpoint.h"
#include "inferlab/engine/engine.h"
#include "inferlab/error.h"
#include "inferlab/experiment/experiment_keys.h"
#include "inferlab/experiment/input_checks.h"
#include "inferlab/engine/interrupt.h"
#include "inferlab/support/log.h"
#include "inferlab/results/quality.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/repro/reproduce.h"
#include "inferlab/results/manifest.h"
#include "inferlab/run/run_folder.h"
#include "inferlab/run/runner.h"
#include "inferlab/experiment/quantization_rules.h"
#include "inferlab/run/shard.h"
#include "inferlab/workload/workload.h"

namespace po = boost::program_options;

namespace inferlab::cli {

// Parses args against opts (+ positionals); returns false after printing help.
bool parse_options(const std::vector<std::string>& args, const std::string& usage, po::options_description& opts,
           const po::positional_options_description* pos, po::variables_map& vm) {
  opts.add_options()("help,h", "show this help")("log", po::value<std::string>()->default_value("info"),
                                                 "log level: debug, info, warn, error, quiet");
  auto parser = po::command_line_parser(args).options(opts);
  if (pos) parser.positional(*pos);
  po::store(parser.run(), vm);
  if (vm.count("help")) {
    std::cout << usage << "\n" << opts;
    return false;
  }
  po::notify(vm);
  const std::string lvl = vm["log"].as<std::string>();
  if (lvl == "debug") log::set_level(log::Level::kDebug);
  else if (lvl == "info") log::set_level(log::Level::kInfo);
  else if (lvl == "warn") log::set_level(log::Level::kWarn);
  else if (lvl == "error") log::set_level(log::Level::kError);
  else if (lvl == "quiet") log::set_level(log::Level::kQuiet);
  else throw Error("--log " + lvl + ": allowed: debug, info, warn, error, quiet");
  return true;
}

namespace {

std::vector<std::string> search_path(const std::vector<std::string>& extra) {
  std::vector<std::string> p = extra;
  for (const auto& d : Registry::default_search_path()) p.push_back(d);
  return p;
}

}  // namespace

constexpr const char* kMaxMemoryHelp =
    "refuse a run whose memory estimate exceeds this (e.g. 8GiB, 512M; default: this machine's memory)";

// --max-memory in bytes; 0 when absent (the machine's memory is the limit).
std::uint64_t max_memory(const po::variables_map& vm) {
  return vm.count("max-memory") ? parse_memory_size(vm["max-memory"].as<std::string>(), "--max-memory") : 0;
}

Loaded load_and_plan(const po::variables_map& vm) {
  Loaded l;
  std::vector<std::string> sets;
  if (vm.count("set")) sets = vm["set"].as<std::vector<std::string>>();
  l.spec = load_experiment(vm["file"].as<std::string>(), sets);
  if (vm.count("repeats")) {
    int r = vm["repeats"].as<int>();  // the TOML's range: a billion repeats would grow to gigabytes
    if (r < 1 || r > kMaxRepeats)
      throw Error("--repeats " + std::to_string(r) + " is out of range; allowed: 1 .. " + std::to_string(kMaxRepeats));
    l.spec.repeats = r;
  }
  l.registry = std::make_unique<Registry>(search_path(l.spec.plugin_paths));
  l.plan = plan_experiment(l.spec, *l.registry, experiment_model_config(l.spec.model), max_memory(vm));
  return l;
}

namespace {

void add_experiment_options(po::options_description& o) {
  o.add_options()("file", po::value<std::string>()->required(), "experiment TOML")(
      "set", po::value<std::vector<std::string>>()->composing(), "override a key: dotted.key=value (repeatable)")(
      "max-memory", po::value<std::string>(), kMaxMemoryHelp);
}

}  // namespace

int cmd_run(const std::vector<std::string>& args) {
  po::options_description o("run options");
  o.add_options()("file", po::value<std::string>(), "experiment TOML")(
      "set", po::value<std::vector<std::string>>()->composing(), "override a key: dotted.key=value (repeatable)")(
      "out", po::value<std::string>()->default_value("results"), "results root folder")(
      "repeats", po::value<int>(), "override [experiment] repeats")(
      "resume", po::value<std::string>(), "continue an interrupted run's folder: run only its missing cells")(
      "force-config", po::bool_switch(), "with --resume: accept a config.toml edited since the folder's cells ran (recorded)")(
      "check-determinism", po::bool_switch(), "rerun each variant's first repeat; exit 4 if any output token differs")(
      "shard", po::value<std::string>(), "i/n: run only cells k = repeat*variants + variant with k mod n = i (0 <= i < n)")(
      "clock", po::value<std::string>()->default_value("wall"),
      "what times a step: wall, or thread-cpu (one-thread CPU device; what a calibration with --clock thread-cpu predicts)")(
      "max-memory", po::value<std::string>(), kMaxMemoryHelp)(
      "no-report", po::bool_switch(), "write no report.html at the end (it is written by default: figures drawn when stdout is a terminal)")(
      "no-predict", po::bool_switch(), "add no pred_* columns (by default each cell is replayed on this machine's cached calibration)")(
      "calibration-cache", po::value<std::string>(), "folder of cached calibrations (default ~/.cache/inferlab/calibration), or none");
  po::positional_options_description pos;
  pos.add("file", 1);
  po::variables_map vm;
  if (!parse_options(args,
             "usage: inferlab run FILE [--set key=value]... [--out DIR] [--repeats N] [--check-determinism] [--shard i/n]\n"
             "                     [--clock wall|thread-cpu] [--max-memory SIZE] [--no-report] [--no-predict]\n"
             "                     [--calibration-cache DIR|none]\n"
             "       inferlab run --resume RESULTS_DIR [--force-config] [--check-determinism] [--max-memory SIZE]",
             o, &pos, vm))
    return 0;
  RunOptions ro;
  ro.out_root = vm["out"].as<std::string>();
  ro.check_determinism = vm["check-determinism"].as<bool>();
  Loaded l;
  if (vm.count("resume")) {
    if (vm.count("file") || vm.count("set") || vm.count("repeats") || vm.count("shard"))
      throw Error("--resume runs the folder's own config.toml (and shard); it takes no FILE, --set, --repeats or --shard");
    ro.resume_dir = vm["resume"].as<std::string>();
    ro.force_config = vm["force-config"].as<bool>();
    const std::string config = ro.resume_dir + "/config.toml";
    if (!std::filesystem::exists(config)) throw Error(ro.resume_dir + ": no config.toml; not a results folder of inferlab run");
    if (!ro.force_config) {  // an edit is named before it can fail planning (run_plan checks again, locked)
      std::ifstream in(ro.resume_dir + "/manifest.json");
      std::stringstream manifest;
      manifest << in.rdbuf();
      RunState recorded;
      manifest_config_record(manifest.str(), recorded);
      if (!recorded.config_hash.empty()) check_folder_config(ro.resume_dir, recorded, false);
    }
    l.spec = load_resolved_config(config);
    l.registry = std::make_unique<Registry>(search_path(l.spec.plugin_paths));
    l.plan = plan_experiment(l.spec, *l.registry, experiment_model_config(l.spec.model), max_memory(vm));
  } else {
    if (!vm.count("file")) throw Error("run needs an experiment FILE or --resume DIR (see inferlab run --help)");
    if (vm["force-config"].as<bool>()) throw Error("--force-config goes with --resume DIR only (a new run has nothing to accept)");
    l = load_and_plan(vm);
    if (vm.count("shard")) ro.shard = parse_shard(vm["shard"].as<std::string>());
  }
  if (vm["clock"].as<std::string>() != "wall")
    ro.clock = clock_option(vm["clock"].as<std::string>(), l.spec.device.kind == DeviceKind::kCpu ? l.spec.device.threads : 1);
  ro.progress = isatty(STDERR_FILENO) != 0 && log::level() <= log::Level::kInfo;
  ro.predict.enabled = !vm["no-predict"].as<bool>();
  ro.predict.cache_dir = calibration_cache_option(vm);
  ro.predict.clock = vm["clock"].as<std::string>();
  install_interrupt_handlers();
  ro.interrupted = interrupt_signal;
  const RunOutcome outcome = run_plan(l.plan, *l.registry, ro);
  std::ifstream summary(outcome.dir + "/summary.md");
  std::cout << summary.rdbuf() << "\nresults: " << outcome.dir << "/summary.md\n" << std::flush;
  if (!vm["no-report"].as<bool>() && !outcome.interrupted) {
    try {  // the results are written: a report that cannot be made is a warning, not a failed run
      // Figures cost seconds of matplotlib: drawn for a person at a terminal, not for scripts and jobs.
      const bool draw = isatty(STDOUT_FILENO) != 0;
      std::cout << "report: " << write_run_report({outcome.dir}, outcome.dir + "/report.html", draw) << "\n" << std::flush;
    } catch (const Error& e) {
      log::warn(std::string("report.html not written: ") + e.what());
    }
  }
  if (outcome.interrupted) return 128 + outcome.interrupted;  // the shell's convention: 130 for SIGINT
  // A failed variant is recorded in the results; the exit code says so too.
  if (outcome.failed > 0) return 3;
  return outcome.nondeterministic > 0 ? 4 : 0;
}

int cmd_merge(const std::vector<std::string>& args) {
  po::options_description o("merge options");
  o.add_options()("shards", po::value<std::vector<std::string>>()->multitoken(), "shard results folders")(
      "out", po::value<std::string>()->required(), "the merged results folder (created; must be new or empty)")(
      "allow-partial", po::bool_switch(), "merge even when cells or shards are missing (status \"partial\")");
  po::positional_options_description pos;
  pos.add("shards", -1);
  po::variables_map vm;
  if (!parse_options(args, "usage: inferlab merge SHARD_DIR... --out DIR [--allow-partial]", o, &pos, vm)) return 0;
  MergeOptions mo;
  if (vm.count("shards")) mo.shard_dirs = vm["shards"].as<std::vector<std::string>>();
  mo.out_dir = vm["out"].as<std::string>();
  mo.allow_partial = vm["allow-partial"].as<bool>();
  const MergeOutcome m = merge_shards(mo);
  for (std::size_t i = 0; i < m.report.size(); ++i)  // a shard that failed or is incomplete is a warning
    (m.report_ok[i] ? log::info : log::warn)(m.report[i]);
  std::ifstream summary(m.dir + "/summary.md");
  std::cout << summary.rdbuf() << "\nresults: " << m.dir << "/summary.md (" << m.cells << " cells";
  if (m.missing) std::cout << ", " << m.missing << " missing";
  if (m.failed) std::cout << ", " << m.failed << " failed";
  std::cout << ")\n" << std::flush;
  return m.failed > 0 ? 3 : 0;
}

int cmd_validate(const std::vector<std::string>& args) {
  po::options_description o("validate options");
  add_experiment_options(o);
  po::positional_options_description pos;
  pos.add("file", 1);
  po::variables_map vm;
  if (!parse_options(args, "usage: inferlab validate FILE [--set key=value]... [--max-memory SIZE]", o, &pos, vm)) return 0;
  // A file of published claims (experiments/repro) is checked as `reproduce` reads it: its claims,
  // and its experiment only as far as they use it (its model's shape, or a planned run).
  const std::string file = vm["file"].as<std::string>();
  if (const std::vector<Claim> claims = read_claims(file, false); !claims.empty()) {
    ClaimUse most = ClaimUse::kArguments;
    for (const Claim& c : claims) most = std::max(most, claim_quantity_use(c.quantity));
    if (most != ClaimUse::kRun) {
      std::vector<std::string> sets;
      if (vm.count("set")) sets = vm["set"].as<std::vector<std::string>>();
      if (most == ClaimUse::kModel) experiment_model_config(load_experiment(file, sets).model);
      std::cout << file << ": ok — " << claims.size() << " claim(s) computed from "
                << (most == ClaimUse::kModel ? "the model's shape" : "their own arguments")
                << ", no run; `inferlab reproduce " << file << "` checks them\n";
      return 0;
    }
  }
  Loaded l = load_and_plan(vm);  // plugins, parameters, model header, trace and lengths files, memory
  if (l.spec.device.kind == DeviceKind::kCuda) require_visible_cuda(l.spec.source_path);  // as run refuses it
  std::cout << l.spec.source_path << ": ok — " << l.plan.variants.size() << " stack(s) × " << l.plan.repeats
            << " repeat(s)\n";
  std::cout << "  memory: about " << l.plan.memory.describe() << "\n";
  for (const auto& v : l.plan.variants) {
    std::cout << "  " << v.name << ":";
    for (PluginKind k : kStackKinds) std::cout << " " << stack_key(k) << "=" << v.stack.choice(k).name;
    std::cout << " kv.block_size=" << v.stack.kv.block_size << " kv.dtype=" << v.stack.kv.format.name() << "\n";
    if (!v.stack.quantization_rules.empty()) {  // per-layer rules: how many linears each method builds
      std::cout << "    " << v.stack.quantization_rules.size() << " quantization rule(s), linears:";
      for (const auto& [method, n] : linears_per_method(v)) std::cout << " " << method << " " << n;
      std::cout << "\n";
    }
  }
  return 0;
}

int cmd_plugins(const std::vector<std::string>& args) {
  po::options_description o("plugins options");
  o.add_options()("kind", po::value<std::string>(), "attention, quantization, scheduling or decoding")(
      "path", po::value<std::vector<std::string>>()->composing(), "extra plugin folder (repeatable)");
  po::variables_map vm;
  if (!parse_options(args, "usage: inferlab plugins [--kind K]", o, nullptr, vm)) return 0;
  std::vector<std::string> extra;
  if (vm.count("path")) extra = vm["path"].as<std::vector<std::string>>();
  for (const std::string& p : extra) {  // as [plugins] paths in a TOML: a missing folder is an error
    std::error_code ec;
    if (!std::filesystem::is_directory(p, ec))
      throw Error("--path " + quote_input(p) + ": " + (std::filesystem::exists(p, ec) ? "not a folder" : "no such folder") +
                  "; allowed: an existing folder of plugin libraries");
  }
  Registry reg(search_path(extra));
  std::vector<const PluginDescriptor*> list;
  if (vm.count("kind")) {
    PluginKind k;
    if (!parse_plugin_kind(vm["kind"].as<std::string>(), k))
      throw Error("--kind " + vm["kind"].as<std::string>() + ": allowed: attention, quantization, scheduling, decoding");
    list = reg.list(k);
  } else {
    list = reg.list();
  }
  for (const auto* d : list) {
    std::cout << plugin_kind_name(d->kind) << "/" << d->name << " " << d->version << " — " << d->summary << "\n  devices:";
    for (const auto& [dev, impl] : d->devices) std::cout << " " << device_kind_name(dev);
    std::cout << "\n";
    if (d->params.empty()) std::cout << "  (no parameters)\n";
    for (const auto& p : d->params) {
      std::cout << "  " << p.name << " (" << param_type_name(p.type) << ", default " << param_value_to_string(p.default_value);
      if (p.min || p.max)
        std::cout << ", range " << param_range_text(p);
      if (!p.choices.empty()) {
        std::cout << ", one of:";
        for (const auto& c : p.choices) std::cout << " " << c;
      }
      std::cout << "): " << p.doc << "\n";
    }
  }
  for (const auto& rec : reg.load_log())
    if (!rec.ok) std::cout << "skipped " << rec.path << ": " << rec.message << "\n";
  if (list.empty()) std::cout << "no plugins found (searched: INFERLAB_PLUGIN_PATH and the build's plugins folder)\n";
  return 0;
}

namespace {

struct ModelStack {
  LoadedModel loaded;
  std::unique_ptr<Registry> registry;
  std::unique_ptr<Device> device;  // outlives everything created on it
  std::shared_ptr<Attention> attention;
  std::shared_ptr<Quantization> quant;
  std::unique_ptr<Model> model;
};

void add_model_options(po::options_description& o) {
  o.add_options()("model", po::value<std::string>()->required(), "checkpoint: llama2.c .bin, .gguf, or a Hugging Face folder")(
      "tokenizer", po::value<std::string>()->default_value(""), "tokenizer file (llama2.c tokenizer.bin)")(
      "format", po::value<std::string>()->default_value("auto"), "auto, llama2c, gguf or hf")(
      "attention", po::value<std::string>()->default_value("flash"), "attention plugin")(
      "quantization", po::value<std::string>()->default_value("none"), "quantization plugin, NAME[:KEY=VALUE...]")(
      "threads", po::value<int>()->default_value(0), "threads (0 = all cores)");
}

// An int option that must lie in [lo, hi]; `allowed` says what the range means.
int int_option(const po::variables_map& vm, const std::string& name, int lo, int hi, const std::string& allowed) {
  const int v = vm[name].as<int>();
  if (v < lo || v > hi) throw Error("--" + name + " = " + std::to_string(v) + " is out of range; allowed: " + allowed);
  return v;
}

ModelStack load_stack(const po::variables_map& vm) {
  int_option(vm, "threads", 0, 4096, "0 (all cores) .. 4096");
  ModelStack s;
  s.loaded = load_model(vm["model"].as<std::string>(), parse_model_format(vm["format"].as<std::string>()),
                        vm["tokenizer"].as<std::string>());
  s.registry = std::make_unique<Registry>(search_path({}));
  s.device = make_device(DeviceKind::kCpu, vm["threads"].as<int>());
  const auto an = vm["attention"].as<std::string>(), qn = vm["quantization"].as<std::string>();
  s.attention = s.registry->create_attention(an, s.registry->resolve(PluginKind::kAttention, an, {}, "--attention"), *s.device);
  // NAME[:KEY=VALUE...] as bench takes it; the weights go to the strategy, since one that runs
  // the checkpoint's own blocks (gguf) would otherwise build fp32 linears from dequantised copies.
  const PluginSpec qs = parse_plugin_spec(*s.registry, PluginKind::kQuantization, qn, "--quantization");
  s.quant = s.registry->create_quantization(
      qs.name, s.registry->resolve(PluginKind::kQuantization, qs.name, qs.params, "--quantization " + qn), *s.device,
      &s.loaded.weights);
  s.model = std::make_unique<Model>(s.loaded.weights, *s.quant, *s.device);
  return s;
}

}  // namespace

int cmd_generate(const std::vector<std::string>& args) {
  po::options_description o("generate options");
  add_model_options(o);
  o.add_options()("prompt", po::value<std::string>()->default_value(""), "prompt text (empty = start from BOS)")(
      "temperature", po::value<double>()->default_value(0.0), "0 = greedy")(
      "top-k", po::value<int>()->default_value(0), "sample among the k most likely (0 = off)")(
      "top-p", po::value<double>()->default_value(1.0), "nucleus mass")(
      "max-tokens", po::value<int>()->default_value(256), "tokens to generate at most")(
      "seed", po::value<std::string>()->default_value("0"), "sampling seed (0 .. 2^64-1)")(
      "decoding", po::value<std::string>()->default_value("sampling"), "decoding plugin (sampling, prompt_lookup)")(
      "no-bos", "no BOS before the prompt, whatever the model file says");
  po::variables_map vm;
  if (!parse_options(args, "usage: inferlab generate --model M [--prompt P] [--temperature X] [--max-tokens N] [--seed S]", o,
             nullptr, vm))
    return 0;
  std::uint64_t seed = 0;  // read as a string, since Boost would read -1 as 2^64-1
  {
    const std::string text = vm["seed"].as<std::string>();
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seed);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size())
      throw Error("--seed " + text + " is not allowed; allowed: an integer 0 .. 18446744073709551615");
  }
  ModelStack s = load_stack(vm);
  if (!s.loaded.tokenizer) throw Error(vm["model"].as<std::string>() + ": no tokenizer found; pass --tokenizer FILE");
  const Tokenizer& tok = *s.loaded.tokenizer;
  const int max_tokens = vm["max-tokens"].as<int>();
  // The prompt and the output share the model's trained context: checked up front, since the
  // scheduler would only say the request never fits its KV pool, after prefilling the prompt.
  const std::string model_path = vm["model"].as<std::string>();
  const int context = s.model->config().max_seq_len;
  if (max_tokens < 1 || (context > 0 && max_tokens >= context))
    throw Error("--max-tokens " + std::to_string(max_tokens) + " is out of range for " + model_path + " (context " +
                std::to_string(context) + " tokens); allowed: 1 .. " + std::to_string(std::max(1, context - 1)) +
                ", less the prompt's tokens");

  const std::string dn = vm["decoding"].as<std::string>();
  std::map<std::string, ParamValue> dp;
  if (dn == "sampling") {
    dp = {{"temperature", vm["temperature"].as<double>()},
          {"top_k", static_cast<std::int64_t>(vm["top-k"].as<int>())},
          {"top_p", vm["top-p"].as<double>()}};
  } else if (vm["temperature"].as<double>() != 0.0) {
    throw Error("--temperature applies to --decoding sampling; " + dn + " decodes greedily");
  }
  auto decoder = s.registry->create_decoder(dn, s.registry->resolve(PluginKind::kDecoding, dn, dp, "--decoding"), *s.device,
                                            &s.loaded.weights, s.attention.get());
  const std::string sn = "continuous";
  auto scheduler = s.registry->create_scheduler(sn, s.registry->resolve(PluginKind::kScheduling, sn, {}, "generate"), *s.device);

  Request req;
  // The prompt as the file says (BOS per tokenizer.ggml.add_bos_token); an empty prompt starts
  // from BOS all the same, since a request needs a token to start from.
  req.prompt = tok.encode(vm["prompt"].as<std::string>(),
                          EncodeOptions{vm.count("no-bos") ? false : tok.conventions().add_bos, false, true});
  if (req.prompt.empty()) {
    if (tok.bos_id() < 0) throw Error("generate: an empty prompt needs a BOS token, and the tokenizer has none");
    req.prompt.push_back(tok.bos_id());
  }
  if (context > 0 && req.prompt.size() + static_cast<std::size_t>(max_tokens) > static_cast<std::size_t>(context))
    throw Error("--prompt is " + std::to_string(req.prompt.size()) + " tokens and --max-tokens " +
                std::to_string(max_tokens) + ": together more than " + model_path + "'s context of " +
                std::to_string(context) + " tokens; allowed: prompt tokens + --max-tokens <= " + std::to_string(context));
  req.max_output = max_tokens;
  EngineOptions eo;
  eo.seed = seed;
  eo.stop_tokens = {tok.bos_id(), tok.eos_id()};
  int prev = req.prompt.back();
  std::cout << vm["prompt"].as<std::string>() << std::flush;
  eo.on_token = [&](int, int t) {
    if (t != tok.bos_id() && t != tok.eos_id()) std::cout << tok.decode_token(prev, t) << std::flush;
    prev = t;
  };
  Engine engine(*s.model, *s.attention, *scheduler, *decoder, eo);
  RunResult r = engine.run({req});
  std::cout << "\n";
  const auto& rt = r.timeline.requests.front();
  std::ostringstream stats;
  stats << "generated " << rt.output_tokens << " tokens; " << rt.output_tokens / std::max(1e-9, rt.finish_s - rt.arrival_s)
        << " tok/s";
  if (r.timeline.spec_proposed)
    stats << "; speculative acceptance " << static_cast<double>(r.timeline.spec_accepted) / static_cast<double>(r.timeline.spec_proposed);
  log::info(stats.str());
  return 0;
}

int cmd_perplexity(const std::vector<std::string>& args) {
  po::options_description o("perplexity options");
  add_model_options(o);
  o.add_options()("text", po::value<std::string>()->required(), "UTF-8 text file")(
      "context", po::value<int>()->default_value(0), "window length (0 = the model's context)")(
      "stride", po::value<int>()->default_value(0), "window advance (0 = context: non-overlapping)")(
      "max-tokens", po::value<int>()->default_value(0), "evaluate at most this many tokens (0 = all)")(
      "no-bos", "no BOS before the text, whatever the model file says");
  po::variables_map vm;
  if (!parse_options(args, "usage: inferlab perplexity --model M --text FILE [--context N] [--stride S]", o, nullptr, vm)) return 0;
  if (vm["context"].as<int>() != 0) int_option(vm, "context", 2, 1 << 24, "0 (the model's context) or 2 .. 16777216");
  int_option(vm, "stride", 0, 1 << 24, "0 (= context) .. 16777216");
  int_option(vm, "max-tokens", 0, 1 << 30, "0 (all) or a positive count");
  const std::string path = vm["text"].as<std::string>();
  const std::string text = read_text_file(path, "--text");  // a FIFO or device is refused, not read
  ModelStack s = load_stack(vm);
  if (!s.loaded.tokenizer) throw Error(vm["model"].as<std::string>() + ": no tokenizer found; pass --tokenizer FILE");
  const std::optional<bool> add_bos = vm.count("no-bos") ? std::optional<bool>(false) : std::nullopt;
  auto tokens = quality_tokens(text, s.loaded.tokenizer.get(), s.model->config().vocab_size, vm["max-tokens"].as<int>(),
                               add_bos);
  if (tokens.size() < 2)
    throw Error(path + ": " + std::to_string(tokens.size()) +
                " token(s) to evaluate, BOS included if any; allowed: a non-empty text and --max-tokens 0 or >= 2");
  auto r = evaluate_perplexity(*s.model, *s.attention, tokens, vm["context"].as<int>(), vm["stride"].as<int>());
  const bool bos = add_bos.value_or(s.loaded.tokenizer->conventions().add_bos);
  std::cout << "model: " << vm["model"].as<std::string>() << "\ntext: " << path << "\nbos: " << (bos ? "yes" : "no")
            << "\ntokens: " << r.tokens
            << "\nmean_nll: " << r.mean_nll << " nats/token\nperplexity: " << r.perplexity << "\n";
  return 0;
}

}  // namespace inferlab::cli
