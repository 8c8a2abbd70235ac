// inferlab bench: llama-bench-style throughput of model stacks (attention × quantization) —
// prompt processing (-p), token generation (-n) and batched decode (--batch) — timed with the
// stacks in alternation within each repetition, reported as mean ± sd, bytes/s against the
// machine's read-bandwidth roofline, and the ratio to the first stack. See bench.h for the tests.
#include <algorithm>
#include <cstdio>
#include <charconv>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include <boost/program_options.hpp>

#include "bench.h"
#include "commands.h"
#include "plugin_spec.h"
#include "inferlab/formats/checkpoint.h"
#include "inferlab/error.h"
#include "inferlab/kv/memory_estimate.h"
#include "inferlab/plugin/plugin.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/run/runner.h"

namespace po = boost::program_options;

namespace inferlab::cli {

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');)
    if (!x.empty()) out.push_back(x);
  return out;
}

void check_range(const std::string& flag, int v, int lo, int hi, const std::string& what) {
  if (v < lo || v > hi)
    throw Error("bench: " + flag + " = " + std::to_string(v) + " is out of range; allowed: " + what);
}

struct Stack {
  std::string attention_name, quant_name;
  std::shared_ptr<Attention> attention;
  std::shared_ptr<Model> model;  // one per quantization, shared by its attention stacks
};

}  // namespace

std::vector<int> int_list(const std::string& command, const std::string& text, const std::string& flag, int lo, int hi) {
  std::vector<int> out;
  for (const std::string& item : split(text)) {
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || used == 0 || v < lo || v > hi)
      throw Error(command + ": " + flag + " = " + text + ": '" + item + "' is not allowed; allowed: comma-separated integers " +
                  std::to_string(lo) + " .. " + std::to_string(hi));
    out.push_back(static_cast<int>(v));
  }
  return out;
}

int cmd_bench(const std::vector<std::string>& args) {
  po::options_description o("bench options");
  add_preset_model_options(o);
  o.add_options()("attention", po::value<std::string>()->default_value("flash"), "comma-separated attention plugins, each NAME[:key=value...]")(
      "quantization", po::value<std::string>()->default_value("none,int8"), "comma-separated quantization plugins, each NAME[:key=value...], e.g. int8:activations=int8")(
      "n-prompt,p", po::value<std::string>()->default_value("128"), "prompt-processing tests: prefill lengths, e.g. 128,512 (empty = none)")(
      "n-gen,n", po::value<std::string>()->default_value("32"), "token-generation tests: decode steps, e.g. 64 (empty = none)")(
      "batch", po::value<std::string>()->default_value(""), "batched-decode tests: sequences decoding together, e.g. 1,8 (each runs every -n)")(
      "context", po::value<int>()->default_value(128), "tokens each batched-decode sequence holds before decoding")(
      "repeats,r", po::value<int>()->default_value(5), "timed repetitions (stacks alternate within each)")(
      "threads,t", po::value<int>()->default_value(0), "threads (0 = all cores)")(
      "device", po::value<std::string>()->default_value("cpu"), "cpu or cuda (every forward ends in a logits download, which waits for the GPU)")(
      "fuse", po::value<bool>()->implicit_value(true), "fused ops, as [device] fuse (RMSNorm + residual, RoPE + KV write, int8 activation blocks quantised once per shared input; the backend column ends in ' fused'): on by default with --device cpu, off with cuda; --fuse=false or --fuse=true sets it")(
      "cuda-graphs", po::bool_switch(), "CUDA only: decode steps captured and replayed as CUDA graphs, as [device] cuda_graphs = true (a capturable attention: flash); the backend column adds ' graphs'")(
      "device-choice", po::bool_switch(), "decode steps choose their greedy tokens on the device and download only the ids, as the engine does for greedy or untruncated sampling (else they download every logit); the backend column adds ' device-choice'")(
      "output,o", po::value<std::string>()->default_value("md"), "md, csv or json (to stdout)")(
      "bandwidth", po::value<double>(), "read bandwidth in GB/s for the roofline column (default: the built-in probe)")(
      "bandwidth-cache", po::value<std::string>()->default_value(default_bandwidth_cache()),
      "file caching the probe per CPU model, host and threads; 'none' probes every run");
  po::variables_map vm;
  if (!parse_options(args,
                     "usage: inferlab bench [--model M | --preset P] [--attention a,b] [--quantization x[:key=value...],y] [-p 128,512] "
                     "[-n 64] [--batch 1,8 --context N] [-r R] [-t T] [--device cpu|cuda] [--fuse[=false]] [--cuda-graphs] [--device-choice] [-o md|csv|json]",
                     o, nullptr, vm))
    return 0;
  const std::vector<int> prompts = int_list("bench", vm["n-prompt"].as<std::string>(), "--n-prompt (-p)", 1, 1 << 20);
  const std::vector<int> gens = int_list("bench", vm["n-gen"].as<std::string>(), "--n-gen (-n)", 1, 1 << 20);
  const std::vector<int> batches = int_list("bench", vm["batch"].as<std::string>(), "--batch", 1, 4096);
  const int context = vm["context"].as<int>(), repeats = vm["repeats"].as<int>(), threads = vm["threads"].as<int>();
  check_range("--context", context, 1, 1 << 20, "1 .. 1048576");
  check_range("--repeats", repeats, 1, 1000, "1 .. 1000");
  check_range("--threads", threads, 0, 4096, "0 (all cores) .. 4096");
  const std::string output = vm["output"].as<std::string>();
  if (output != "md" && output != "csv" && output != "json")
    throw Error("bench: --output = " + output + "; allowed: md, csv, json");
  if (vm.count("bandwidth") && !(vm["bandwidth"].as<double>() > 0 && vm["bandwidth"].as<double>() < 1e6))
    throw Error("bench: --bandwidth = " + std::to_string(vm["bandwidth"].as<double>()) +
                "; allowed: GB/s, a number in (0, 1e6)");
  if (!batches.empty() && gens.empty()) throw Error("bench: --batch needs at least one --n-gen (-n) value");
  std::vector<BenchTest> tests;
  for (int p : prompts) tests.push_back({BenchTest::Kind::kPrompt, p, 0, 1, 0});
  for (int n : gens) tests.push_back({BenchTest::Kind::kGen, 0, n, 1, 0});
  for (int b : batches)
    for (int n : gens) tests.push_back({BenchTest::Kind::kBatchedGen, 0, n, b, context});
  if (tests.empty()) throw Error("bench: no tests; allowed: at least one of -p, -n");

  std::string model_name;
  const ModelSpec spec = preset_model_spec(vm, "bench", model_name);
  ModelWeights weights = load_experiment_model(spec).weights;
  for (const BenchTest& t : tests) {
    const int length = t.kind == BenchTest::Kind::kPrompt ? t.n_prompt : t.kind == BenchTest::Kind::kGen ? t.n_gen : t.depth + t.n_gen;
    if (length > weights.config.max_seq_len)
      throw Error("bench: test " + t.name() + " needs " + std::to_string(length) + " positions, the model allows " +
                  std::to_string(weights.config.max_seq_len) + "; allowed: shorter -p / -n / --context");
  }
  Registry reg(Registry::default_search_path());
  const auto quants = split(vm["quantization"].as<std::string>());
  const auto attentions = split(vm["attention"].as<std::string>());
  if (quants.empty() || attentions.empty()) throw Error("bench: no stacks (empty --attention or --quantization)");
  // Every entry's name and parameters are checked before any model is built.
  std::vector<std::pair<std::string, Params>> quant_params, attention_params;
  for (const auto& q : quants) {
    const PluginSpec spec = parse_plugin_spec(reg, PluginKind::kQuantization, q, "bench: --quantization");
    quant_params.emplace_back(spec.name, reg.resolve(PluginKind::kQuantization, spec.name, spec.params, "bench: --quantization " + q));
  }
  for (const auto& a : attentions) {
    const PluginSpec spec = parse_plugin_spec(reg, PluginKind::kAttention, a, "bench: --attention");
    attention_params.emplace_back(spec.name, reg.resolve(PluginKind::kAttention, spec.name, spec.params, "bench: --attention " + a));
  }
  // A model too big for this machine's memory is refused up front (llama-3-8b once asked for
  // 32 GB of fp32 weights and was killed): the loaded weights (a preset's are seeded, a GGUF's
  // linears blocks) and every quantization's Model, all held at once, as the run's estimate sizes
  // them (memory_estimate.h).
  std::uint64_t need = loaded_weight_bytes(weights.config, !spec.preset.empty());
  {
    CpuDevice host(1);
    for (const auto& [qname, qparams] : quant_params)
      need += estimate_model_bytes(*reg.create_quantization(qname, qparams, host), weights.config);
  }
  const std::uint64_t avail = machine_memory_bytes();
  if (static_cast<double>(need) * 1.1 > static_cast<double>(avail))
    throw Error("bench: " + model_name + " with " + std::to_string(quants.size()) + " quantization(s) needs about " +
                format_bytes(static_cast<std::uint64_t>(static_cast<double>(need) * 1.1)) + ", this machine has " +
                format_bytes(avail) + "; allowed: a smaller --n-layers or fewer --quantization entries");
  DeviceKind device_kind = DeviceKind::kCpu;
  const std::string device_name = vm["device"].as<std::string>();
  if (!parse_device_kind(device_name, device_kind) || device_kind == DeviceKind::kSim)
    throw Error("bench: --device = " + device_name + "; allowed: cpu, cuda");
  const bool fuse = vm.count("fuse") != 0 ? vm["fuse"].as<bool>() : fused_by_default(device_kind);
  const std::unique_ptr<Device> device = make_device(device_kind, threads);
  compute_device(*device, "bench").set_fuse(fuse);
  const bool graphs = vm["cuda-graphs"].as<bool>();
  if (graphs && device_kind != DeviceKind::kCuda)
    throw Error("bench: --cuda-graphs with --device " + device_name + "; allowed: --cuda-graphs with --device cuda");
  compute_device(*device, "bench").set_cuda_graphs(graphs);
  const bool device_choice = vm["device-choice"].as<bool>();
  const int used_threads = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  std::vector<Stack> stacks;
  for (std::size_t qi = 0; qi < quants.size(); ++qi) {
    const auto& [qname, qparams] = quant_params[qi];
    auto quant = reg.create_quantization(qname, qparams, *device, &weights);  // gguf runs the checkpoint's own blocks
    auto model = std::make_shared<Model>(weights, *quant, *device);
    for (std::size_t ai = 0; ai < attentions.size(); ++ai)
      stacks.push_back({attentions[ai], quants[qi],
                        reg.create_attention(attention_params[ai].first, attention_params[ai].second, *device), model});
  }
  BenchContext ctx;
  ctx.repetitions = repeats;
  if (vm.count("bandwidth")) {
    ctx.bandwidth_bytes_per_s = vm["bandwidth"].as<double>() * 1e9;
    ctx.bandwidth_source = "--bandwidth";
  } else if (device_kind == DeviceKind::kCpu) {
    std::string cache = vm["bandwidth-cache"].as<std::string>();
    if (cache == "none") cache.clear();
    bool cached = false;
    double now = 0;
    ctx.bandwidth_bytes_per_s = cached_read_bandwidth(used_threads, cache, cached, &now);
    // A recorded best above today's probe is the machine's limit, but on a shared host the
    // memory bandwidth moves by the minute: today's probe is printed beside it.
    char today[64];
    std::snprintf(today, sizeof today, "; this run's probe %.1f GB/s", now / 1e9);
    ctx.bandwidth_source = std::string("read-sum probe, ") + std::to_string(used_threads) + " threads, " +
                           (cache.empty() ? "not cached"
                                          : (cached ? "best recorded in " + cache + today : "probed now, recorded in " + cache));
  } else {
    ctx.bandwidth_source = "no probe for " + device_name + "; pass --bandwidth";
  }

  const std::string backend =
      (device_kind == DeviceKind::kCpu ? std::string("CPU") : device->describe()) + (fuse ? " fused" : "") +
      (graphs ? " graphs" : "") + (device_choice ? " device-choice" : "");
  std::vector<BenchRow> rows;  // [tests × stacks], test-major
  for (const BenchTest& t : tests)
    for (const Stack& s : stacks) {
      BenchRow r;
      r.model = model_name;
      r.attention = s.attention_name;
      r.quantization = s.quant_name;
      r.backend = backend;
      r.size_bytes = s.model->weight_bytes();
      r.params = weights.config.parameter_count();
      r.threads = used_threads;
      r.test = t;
      rows.push_back(std::move(r));
    }
  double bytes = 0;
  for (std::size_t i = 0; i < rows.size(); ++i)  // warm-up, untimed
    run_bench_test(*stacks[i % stacks.size()].model, *stacks[i % stacks.size()].attention, rows[i].test, 0, bytes,
                   device_choice);
  // On the CPU a probe pass runs between timed runs (P T P T ... P): each run's roofline-now is
  // its bytes/s over the higher of the passes on either side, the bandwidth the memory system
  // gave within milliseconds of it (the higher: the stricter of the two).
  std::unique_ptr<ReadBandwidthProbe> probe;
  if (device_kind == DeviceKind::kCpu) probe = std::make_unique<ReadBandwidthProbe>(used_threads);
  double before = probe ? probe->pass() : 0.0;
  for (int rep = 0; rep < repeats; ++rep)
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Stack& s = stacks[i % stacks.size()];
      const double sec =
          run_bench_test(*s.model, *s.attention, rows[i].test, static_cast<std::uint64_t>(rep + 1), bytes, device_choice);
      rows[i].tokens_per_s.push_back(rows[i].test.tokens() / sec);
      rows[i].bytes_per_s.push_back(bytes / sec);
      if (probe) {
        const double after = probe->pass();
        rows[i].probe_bytes_per_s.push_back(std::max(before, after));
        before = after;
      }
    }
  // The prompt tests' limits (the row-count sweep): the bytes a pass reads at the bandwidth, its
  // arithmetic at the peaks of its linears' kernels (probed once, after the timed runs).
  if (device_kind == DeviceKind::kCpu && !prompts.empty()) {
    const ArithmeticPeaks peaks = ArithmeticPeaks::probe(used_threads);
    ctx.peaks = peaks.describe();
    for (std::size_t i = 0; i < rows.size(); ++i) {
      BenchRow& r = rows[i];
      if (r.test.kind != BenchTest::Kind::kPrompt) continue;
      set_arithmetic_limit(peaks, *stacks[i % stacks.size()].model, r.test.n_prompt, r);
      const double bytes_per_pass = r.bytes_per_s[0] * r.seconds(0);  // the same bytes every repetition
      r.read_limit_s = ctx.bandwidth_bytes_per_s > 0 ? bytes_per_pass / ctx.bandwidth_bytes_per_s : 0.0;
    }
  }
  if (output == "md") write_bench_markdown(std::cout, rows, ctx);
  else if (output == "csv") write_bench_csv(std::cout, rows, ctx);
  else write_bench_json(std::cout, rows, ctx);
  return 0;
}

}  // namespace inferlab::cli
