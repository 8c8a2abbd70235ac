// inferlab bench: forward-pass throughput of model stacks (attention × quantization), timed
// in alternation within one run and reported as medians and ratios to the first stack, so a
// shared, noisy machine still gives comparable numbers.
#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <sstream>

#include <unistd.h>

#include <boost/program_options.hpp>

#include "commands.h"
#include "inferlab/batch.h"
#include "inferlab/checkpoint.h"
#include "inferlab/error.h"
#include "inferlab/log.h"
#include "inferlab/model.h"
#include "inferlab/registry.h"
#include "inferlab/rng.h"
#include "inferlab/runner.h"

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

struct Stack {
  std::string label;
  std::shared_ptr<Attention> attention;
  std::shared_ptr<Quantization> quant;
  std::shared_ptr<Model> model;  // one per quantization, shared by its attention stacks
  std::vector<double> prefill_s, decode_s;
};

// Fills the KV of `seqs` sequences with `context` tokens each (untimed), then times one
// prefill of `context` tokens for a fresh sequence and one decode step over all sequences.
void measure(Stack& s, int seqs, int context, std::uint64_t seed) {
  const ModelConfig& cfg = s.model->config();
  KvCacheConfig kc;
  kc.block_size = 16;
  kc.num_blocks = (seqs + 1) * ((context + 1 + 15) / 16);
  BlockManager kv(kc);
  KvStorage storage(s.model->device(), cfg, kc.num_blocks, kc.block_size);
  std::vector<BlockCopy> copies;  // private sequences: never any
  Rng rng(seed);
  StepBatch b;
  std::vector<float> logits;
  std::vector<int> tokens;
  auto random_tokens = [&](int n) {
    tokens.resize(static_cast<std::size_t>(n));
    for (int& t : tokens) t = static_cast<int>(rng.uniform_int(3, cfg.vocab_size));
    return std::span<const int>(tokens);
  };
  auto prefill = [&](int id) {
    b.clear();
    if (!kv.reserve(id, context + 1, copies)) throw Error("bench: KV pool too small");
    b.add_sequence(random_tokens(context), 0, kv.block_table(id), kc.block_size, context - 1, context);
    s.model->forward(b, storage, *s.attention, logits);
    kv.set_length(id, context);
  };
  for (int i = 0; i < seqs; ++i) prefill(i);
  auto t0 = std::chrono::steady_clock::now();
  prefill(seqs);
  auto t1 = std::chrono::steady_clock::now();
  b.clear();
  for (int i = 0; i < seqs; ++i) b.add_sequence(random_tokens(1), context, kv.block_table(i), kc.block_size, 0, 1);
  auto t2 = std::chrono::steady_clock::now();
  s.model->forward(b, storage, *s.attention, logits);
  auto t3 = std::chrono::steady_clock::now();
  s.prefill_s.push_back(std::chrono::duration<double>(t1 - t0).count());
  s.decode_s.push_back(std::chrono::duration<double>(t3 - t2).count());
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : (v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]));
}

}  // namespace

int cmd_bench(const std::vector<std::string>& args) {
  po::options_description o("bench options");
  o.add_options()("help,h", "show this help")("model", po::value<std::string>(), "checkpoint (or use --preset)")(
      "preset", po::value<std::string>()->default_value("stories15m"), "random-weight preset when no --model")(
      "n-layers", po::value<int>()->default_value(0), "keep only the first N layers (0 = all)")(
      "attention", po::value<std::string>()->default_value("naive,flash"), "comma-separated attention plugins")(
      "quantization", po::value<std::string>()->default_value("none,int8"), "comma-separated quantization plugins")(
      "context", po::value<int>()->default_value(256), "prompt length / context of the decode step")(
      "batch", po::value<int>()->default_value(8), "sequences in the decode step")(
      "repeats", po::value<int>()->default_value(5), "timed rounds (stacks alternate within a round)")(
      "threads", po::value<int>()->default_value(0), "threads (0 = all cores)")(
      "device", po::value<std::string>()->default_value("cpu"), "cpu or cuda (every forward ends in a logits download, which waits for the GPU)");
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(o).run(), vm);
  if (vm.count("help")) {
    std::cout << "usage: inferlab bench [--model M | --preset P] [--attention a,b] [--quantization x,y] [--context N] "
                 "[--batch B] [--repeats R] [--device cpu|cuda]\n"
              << o;
    return 0;
  }
  po::notify(vm);
  const int context = vm["context"].as<int>(), batch = vm["batch"].as<int>(), repeats = vm["repeats"].as<int>();
  if (context < 1 || batch < 1 || repeats < 1) throw Error("bench: --context, --batch and --repeats must be positive");

  const int n_layers = vm["n-layers"].as<int>(), threads = vm["threads"].as<int>();
  if (n_layers < 0 || n_layers > 1024)
    throw Error("bench: --n-layers = " + std::to_string(n_layers) + " is out of range; allowed: 0 (all) .. 1024");
  if (threads < 0 || threads > 4096)
    throw Error("bench: --threads = " + std::to_string(threads) + " is out of range; allowed: 0 (all cores) .. 4096");

  // As an experiment loads it: a preset too big for this machine's memory is refused up front
  // (llama-3-8b asked for 32 GB of fp32 weights and was killed), --n-layers is checked.
  ModelSpec spec;
  spec.n_layers = n_layers;
  spec.seed = 1;
  std::string model_name;
  if (vm.count("model")) {
    spec.path = vm["model"].as<std::string>();
    model_name = spec.path;
  } else {
    spec.preset = vm["preset"].as<std::string>();
    model_name = preset_config(spec.preset).name + " (random weights)";
  }
  ModelWeights weights = load_experiment_model(spec).weights;
  std::vector<std::string> search = Registry::default_search_path();
  Registry reg(search);
  const auto quants = split(vm["quantization"].as<std::string>());
  // Each quantization's Model may hold its own copy of the weights (up to fp32 size).
  const double need = static_cast<double>(weights.config.parameter_count()) * 4.0 * static_cast<double>(1 + quants.size());
  const double avail = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (need * 1.1 > avail)
    throw Error("bench: " + model_name + " with " + std::to_string(quants.size()) + " quantization(s) needs about " +
                std::to_string(static_cast<long long>(need * 1.1 / (1 << 20))) + " MiB, this machine has " +
                std::to_string(static_cast<long long>(avail / (1 << 20))) +
                " MiB; allowed: a smaller --n-layers or fewer --quantization entries");
  DeviceKind device_kind = DeviceKind::kCpu;
  const std::string device_name = vm["device"].as<std::string>();
  if (!parse_device_kind(device_name, device_kind) || device_kind == DeviceKind::kSim)
    throw Error("bench: --device = " + device_name + "; allowed: cpu, cuda");
  const std::unique_ptr<Device> device_ptr = make_device(device_kind, threads);
  Device& device = *device_ptr;
  std::vector<Stack> stacks;
  for (const auto& q : quants) {
    auto quant = reg.create_quantization(q, reg.resolve(PluginKind::kQuantization, q, {}, "--quantization"), device,
                                         &weights);  // quantization/gguf runs the checkpoint's own blocks
    auto model = std::make_shared<Model>(weights, *quant, device);
    for (const auto& a : split(vm["attention"].as<std::string>())) {
      Stack s;
      s.label = a + " + " + q;
      s.attention = reg.create_attention(a, reg.resolve(PluginKind::kAttention, a, {}, "--attention"), device);
      s.quant = quant;
      s.model = model;
      stacks.push_back(std::move(s));
    }
  }
  if (stacks.empty()) throw Error("bench: no stacks (empty --attention or --quantization)");
  for (auto& s : stacks) measure(s, batch, context, 0);  // warm-up, untimed
  for (auto& s : stacks) s.prefill_s.clear(), s.decode_s.clear();
  for (int r = 0; r < repeats; ++r)
    for (auto& s : stacks) measure(s, batch, context, static_cast<std::uint64_t>(r + 1));

  std::cout << "model: " << model_name << ", " << weights.config.n_layers << " layers; context " << context
            << ", decode batch " << batch << ", " << device.describe() << ", median of " << repeats << " rounds\n\n"
            << "| stack | weights MiB | prefill tok/s | × | decode tok/s | × |\n|---|---|---|---|---|---|\n";
  const double p0 = median(stacks[0].prefill_s), d0 = median(stacks[0].decode_s);
  for (const auto& s : stacks) {
    const double p = median(s.prefill_s), d = median(s.decode_s);
    std::cout << std::fixed << "| " << s.label << " | " << std::setprecision(1)
              << static_cast<double>(s.model->weight_bytes()) / (1 << 20) << " | " << std::setprecision(0)
              << context / p << " | " << std::setprecision(2) << p0 / p << " | " << std::setprecision(0) << batch / d
              << " | " << std::setprecision(2) << d0 / d << " |\n";
  }
  return 0;
}

}  // namespace inferlab::cli
