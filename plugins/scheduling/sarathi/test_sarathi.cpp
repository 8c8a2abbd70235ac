// Stall-free batching: the tile rounding in single steps, then whole runs through the real
// engine on the stub executor (tests/support/engine_harness.h; one modelled second per step)
// against vLLM's prefill-first order (continuous with prefill_first) at the same token budget.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <vector>

#include "engine_harness.h"
#include "inferlab/error.h"
#include "inferlab/results/metrics.h"
#include "inferlab/plugin/registry.h"
#include "plugins/common/scheduling/continuous_scheduler.h"

namespace inferlab::testing {
namespace {

std::shared_ptr<Scheduler> sarathi(int max_tokens, int chunk_tile) {
  Registry reg(Registry::default_search_path());
  Params p = reg.resolve(PluginKind::kScheduling, "sarathi",
                         {{"max_tokens", std::int64_t{max_tokens}}, {"chunk_tile", std::int64_t{chunk_tile}}}, "test");
  CpuDevice device(1);
  return reg.create_scheduler("sarathi", p, device);
}

double tpot_p99(const HarnessResult& r) {
  std::vector<double> v;
  for (const RequestTimeline& rt : r.timeline.requests)
    if (rt.output_tokens >= 2) v.push_back((rt.finish_s - rt.first_token_s) / (rt.output_tokens - 1));
  return percentile(v, 99);
}

double ttft_p50(const HarnessResult& r) {
  std::vector<double> v;
  for (const RequestTimeline& rt : r.timeline.requests) v.push_back(rt.first_token_s - rt.arrival_s);
  return percentile(v, 50);
}

// A request arriving every 4 steps with prompts of 150-549 tokens and 30-59 outputs: prompts
// keep arriving while earlier requests decode.
std::vector<RequestSpec> steady_mixed(int count) {
  std::vector<RequestSpec> reqs;
  for (int i = 0; i < count; ++i) reqs.push_back({i, i * 4.0, 150 + (i * 137) % 400, 30 + (i * 11) % 30});
  return reqs;
}

TEST(Sarathi, DecodesFirstThenTileRoundedChunks) {
  auto sched = sarathi(256, 64);
  SeqView prompt = waiting_seq(2, 1000, 4);
  std::vector<SeqView> running = {decode_seq(1, 10, 2, 20, 1)}, waiting = {prompt};
  SchedulerInput in = step_input(running, waiting, 100);
  ScheduleDecision d = sched->schedule(in);
  ASSERT_EQ(d.scheduled.size(), 2u);
  EXPECT_EQ(d.scheduled[0].id, 1);
  EXPECT_EQ(d.scheduled[0].num_tokens, 1);
  EXPECT_EQ(d.scheduled[1].id, 2);
  EXPECT_EQ(d.scheduled[1].num_tokens, 192);  // 255 left, rounded down to 3 tiles of 64
  // The chunk that finishes a prompt is not rounded.
  prompt.prompt_len = prompt.num_tokens = 100;
  waiting = {prompt};
  in.waiting = waiting;
  d = sched->schedule(in);
  EXPECT_EQ(d.scheduled[1].num_tokens, 100);
  // A tile larger than the budget is clamped to it, so an empty step still makes progress.
  auto big = sarathi(256, 4096);
  in.running = {};
  prompt.prompt_len = prompt.num_tokens = 1000;
  waiting = {prompt};
  in.waiting = waiting;
  EXPECT_EQ(big->schedule(in).scheduled.at(0).num_tokens, 256);
}

TEST(Sarathi, EveryTokenOnceAndChunksAreTiles) {
  auto sched = sarathi(128, 32);
  auto reqs = steady_mixed(20);
  HarnessConfig cfg;
  cfg.kv.num_blocks = 60;
  std::map<int, int> pending_before;
  HarnessResult r = run_scheduler(*sched, reqs, cfg, [&](int, const SchedulerInput& in, const ScheduleDecision& d) {
    std::map<int, int> pending;
    for (const SeqView& s : in.running) pending[s.id] = s.pending();
    for (const SeqView& s : in.waiting) pending[s.id] = s.pending();
    for (const ScheduledSeq& sc : d.scheduled) {
      if (sc.num_tokens < pending[sc.id]) {
        EXPECT_EQ(sc.num_tokens % 32, 0) << "request " << sc.id;
      }
    }
  });
  ASSERT_EQ(r.finished.size(), reqs.size());
  EXPECT_LE(r.max_step_tokens, 128);
  EXPECT_LE(r.peak_blocks, cfg.kv.num_blocks);
  for (const auto& q : reqs)
    EXPECT_EQ(r.tokens_processed[q.id], q.prompt + q.max_output - 1 + r.recomputed[q.id]) << "request " << q.id;
}

TEST(Sarathi, PrefillFirstStallsDecodes) {
  ContinuousScheduler prefill_first(256, 8, false, true);
  std::vector<SeqView> running(1), waiting(1);
  running[0].id = 1;
  running[0].prompt_len = 10;
  running[0].max_output = 20;
  running[0].generated = 2;
  running[0].num_tokens = 12;
  running[0].num_computed = 11;
  running[0].blocks_held = 1;
  waiting[0].id = 2;
  waiting[0].prompt_len = waiting[0].num_tokens = 100;
  waiting[0].max_output = 4;
  SchedulerInput in = step_input(running, waiting, 100);
  ScheduleDecision d = prefill_first.schedule(in);
  ASSERT_EQ(d.scheduled.size(), 1u);  // the prefill alone; the decode waits
  EXPECT_EQ(d.scheduled[0].id, 2);
  in.waiting = {};
  d = prefill_first.schedule(in);  // nothing to prefill: the decode runs
  ASSERT_EQ(d.scheduled.size(), 1u);
  EXPECT_EQ(d.scheduled[0].id, 1);
}

TEST(Sarathi, LowersTpotP99AgainstPrefillFirstAtEqualBudget) {
  auto reqs = steady_mixed(40);
  HarnessConfig cfg;
  cfg.kv.num_blocks = 400;
  std::printf("budget 256: scheduler, chunk_tile, TPOT p99 (steps), TTFT p50 (steps), steps\n");
  for (bool chunked : {false, true}) {
    ContinuousScheduler vllm(256, 16, chunked, true);
    HarnessResult base = run_scheduler(vllm, reqs, cfg);
    ASSERT_EQ(base.finished.size(), reqs.size());
    std::printf("continuous prefill_first chunked=%d: %.3f %.2f %d\n", chunked, tpot_p99(base), ttft_p50(base),
                base.steps);
    for (int tile : {1, 64, 256}) {
      auto sched = sarathi(256, tile);
      HarnessResult r = run_scheduler(*sched, reqs, cfg);
      ASSERT_EQ(r.finished.size(), reqs.size());
      if (!chunked)
        std::printf("sarathi tile=%d: %.3f %.2f %d\n", tile, tpot_p99(r), ttft_p50(r), r.steps);
      EXPECT_LT(tpot_p99(r), 0.9 * tpot_p99(base)) << "tile " << tile << " chunked baseline " << chunked;
    }
  }
}

}  // namespace
}  // namespace inferlab::testing
