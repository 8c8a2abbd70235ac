// What a decode step pays besides its kernels, and what fusing the elementwise ops saves, on
// SmolLM2-135M's shape (random weights, 2 threads, flash attention):
//   ./inferlab_bench --benchmark_filter=decode_overheads   (about a minute; builds the model)
//   ./inferlab_bench --benchmark_filter=pool_dispatch
// pool_dispatch/spin_us: one parallel_for that needs both threads of a 2-thread pool, the per-op
// synchronisation cost (wake the worker, join it), with and without the spin phase.
// decode_overheads/quant: decode steps of one sequence (64-token prompt) alternating
// [device] fuse = false and true within the run, and one 128-token prefill each way. Counters:
//   *_tok_s            decode (and prefill) tokens per second, unfused and fused; fuse_gain = ratio
//   dispatches_step    pool dispatches per decode step, unfused and fused
//   sync_frac          dispatches per step × the measured per-dispatch cost / the step's time
//                      (sync_frac_nospin: the same with a pool that sleeps at once)
//   framework_frac     (step wall time − time inside timed ops) / step time: the model's own
//                      bookkeeping between ops (the engine adds its scheduler and sampling)
//   linear/attention/norm_rope_act_frac  each category's share of the step (per-component time)
// Targets (issue 9): sync_frac < 0.02, framework_frac < 0.03 of a decode step of a 135M model.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "inferlab/model/model.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/model/weights.h"
#include "model_fixtures.h"

namespace {

using namespace inferlab;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Median cost of one parallel_for that needs every thread: pool.size() chunks, each waiting
// until all have started (a rendezvous), so the call pays the full hand-off — waking the
// workers and joining them — and nothing else (no chunk can be run by the caller alone).
double dispatch_cost_s(ThreadPool& pool) {
  const int threads = pool.size();
  std::vector<double> t;
  for (int rep = 0; rep < 21; ++rep) {
    const auto t0 = Clock::now();
    for (int i = 0; i < 200; ++i) {
      std::atomic<int> arrived{0};
      pool.parallel_for(static_cast<std::size_t>(threads), [&](std::size_t, std::size_t) {
        arrived.fetch_add(1);
        while (arrived.load() < threads) std::this_thread::yield();
      }, 1);
    }
    t.push_back(seconds_since(t0) / 200);
  }
  return median(t);
}

void pool_dispatch(benchmark::State& state) {
  ThreadPool pool(2, static_cast<int>(state.range(0)));
  double s = 0;
  for (auto _ : state) s = dispatch_cost_s(pool);
  state.counters["us_per_dispatch"] = s * 1e6;
}
BENCHMARK(pool_dispatch)->Arg(0)->Arg(ThreadPool::kDefaultSpinUs)->Iterations(3)->Unit(benchmark::kMillisecond);

struct StepStats {
  std::vector<double> wall, linear, attention, norm, dispatches;
};

// Decode steps (or one prefill) of `runner`, timed by category.
void timed_feed(testing::SequenceRunner& runner, CpuDevice& device, const std::vector<int>& tokens, StepStats& s) {
  device.reset_op_times();
  const std::uint64_t d0 = device.pool().dispatches();
  const auto t0 = Clock::now();
  runner.feed(tokens);
  s.wall.push_back(seconds_since(t0));
  const OpTimes& t = device.op_times();
  s.linear.push_back(t[TimeCategory::kLinear]);
  s.attention.push_back(t[TimeCategory::kAttention]);
  s.norm.push_back(t[TimeCategory::kNormRopeAct]);
  s.dispatches.push_back(static_cast<double>(device.pool().dispatches() - d0));
}

void decode_overheads(benchmark::State& state) {
  static const char* kQuant[] = {"none", "int8"};
  const std::string quant_name = kQuant[state.range(0)];
  CpuDevice device(2);
  Registry reg({INFERLAB_BENCH_PLUGIN_DIR});
  std::map<std::string, ParamValue> given;
  if (quant_name == "int8") given["activations"] = std::string("int8");
  auto quant = reg.create_quantization(quant_name, reg.resolve(PluginKind::kQuantization, quant_name, given, "bench"), device);
  auto attention = reg.create_attention("flash", reg.resolve(PluginKind::kAttention, "flash", {}, "bench"), device);
  const ModelWeights w = random_weights(preset_config("smollm2-135m"), 3);
  Model model(w, *quant, device);
  std::vector<int> prompt(64), prefill(128);
  for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int>(7 * i + 11);
  for (std::size_t i = 0; i < prefill.size(); ++i) prefill[i] = static_cast<int>(13 * i + 5);
  StepStats decode[2], pre[2];
  for (auto _ : state) {
    constexpr int kBlock = 16, kBlocks = 16;  // 256 slots: the prompt and the decode steps
    testing::SequenceRunner seq[2] = {{model, *attention, kBlock, kBlocks}, {model, *attention, kBlock, kBlocks}};
    for (int f = 0; f < 2; ++f) {
      device.set_fuse(f == 1);
      seq[f].feed(prompt);  // warm-up, untimed
    }
    for (int step = 0; step < 24; ++step)
      for (int f = 0; f < 2; ++f) {  // alternate: the machine's noise hits both alike
        device.set_fuse(f == 1);
        timed_feed(seq[f], device, {static_cast<int>(step * 31 + 3)}, decode[f]);
      }
    for (int rep = 0; rep < 3; ++rep)
      for (int f = 0; f < 2; ++f) {
        device.set_fuse(f == 1);
        testing::SequenceRunner fresh(model, *attention, kBlock, kBlocks);
        timed_feed(fresh, device, prefill, pre[f]);
      }
  }
  device.set_fuse(false);
  const double sync = dispatch_cost_s(device.pool());
  ThreadPool no_spin(device.pool().size(), 0);
  const double sync_nospin = dispatch_cost_s(no_spin);
  for (int f = 0; f < 2; ++f) {
    const std::string tag = f ? "fused_" : "unfused_";
    const double step = median(decode[f].wall);
    state.counters[tag + "decode_tok_s"] = 1.0 / step;
    state.counters[tag + "prefill_tok_s"] = static_cast<double>(prefill.size()) / median(pre[f].wall);
    state.counters[tag + "dispatches_step"] = median(decode[f].dispatches);
    state.counters[tag + "sync_frac"] = median(decode[f].dispatches) * sync / step;
    state.counters[tag + "sync_frac_nospin"] = median(decode[f].dispatches) * sync_nospin / step;
    std::vector<double> framework;
    for (std::size_t i = 0; i < decode[f].wall.size(); ++i)
      framework.push_back((decode[f].wall[i] - decode[f].linear[i] - decode[f].attention[i] - decode[f].norm[i]) /
                          decode[f].wall[i]);
    state.counters[tag + "framework_frac"] = median(framework);
    state.counters[tag + "linear_frac"] = median(decode[f].linear) / step;
    state.counters[tag + "attention_frac"] = median(decode[f].attention) / step;
    state.counters[tag + "norm_rope_act_frac"] = median(decode[f].norm) / step;
  }
  state.counters["fuse_gain_decode"] = median(decode[0].wall) / median(decode[1].wall);
  state.counters["fuse_gain_prefill"] = median(pre[0].wall) / median(pre[1].wall);
  state.counters["us_per_dispatch"] = sync * 1e6;
  state.counters["us_per_dispatch_nospin"] = sync_nospin * 1e6;
}
BENCHMARK(decode_overheads)
    ->DenseRange(0, 1)
    ->ArgName("quant")
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace
