// Engine-level per-request limits (queue timeout, total timeout, max_new_tokens), admission
// outcomes in requests.csv, and the metrics over them (queueing delay, SLO attainment per
// class, fairness). Runs go through the real Engine on the stub executor
// (tests/support/engine_harness.h: one modelled second per step, so times are in steps).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "engine_harness.h"
#include "inferlab/results/metrics.h"
#include "inferlab/results/report.h"
#include "plugins/common/scheduling/continuous_scheduler.h"

namespace inferlab {
namespace {

using testing::HarnessConfig;
using testing::HarnessResult;
using testing::RequestSpec;
using testing::run_scheduler;

double metric(const MetricRow& row, const std::string& name) {
  for (const auto& [k, v] : row)
    if (k == name) return v;
  ADD_FAILURE() << "no metric " << name;
  return NAN;
}

const RequestTimeline& timeline_of(const HarnessResult& r, int id) {
  for (const RequestTimeline& rt : r.timeline.requests)
    if (rt.id == id) return rt;
  throw std::runtime_error("no request " + std::to_string(id));
}

TEST(RequestLimits, TotalTimeoutAbortsARunningRequestAndFreesItsBlocksThatStep) {
  ContinuousScheduler sched(64, 4, true);
  // Request 0 would take 1 + 39 steps; it times out after 10. Request 1 runs beside it.
  std::vector<RequestSpec> reqs = {{0, 0, 40, 40}, {1, 0, 20, 5}, {2, 12, 20, 5}};
  HarnessConfig cfg;
  cfg.kv.num_blocks = 20;
  cfg.kv.block_size = 4;
  cfg.timeout_s = 10;
  int held_before = 0;
  bool checked = false;
  run_scheduler(sched, reqs, cfg, [&](int, const SchedulerInput& in, const ScheduleDecision&) {
    int held = 0;
    bool present = false;
    for (const SeqView& s : in.running) {
      held += s.blocks_held;
      if (s.id == 0) present = true, held_before = s.blocks_held;
    }
    for (const SeqView& s : in.waiting) {
      held += s.blocks_held;
      present |= s.id == 0;
    }
    // Every block is either free or held by a request the scheduler sees: none leak.
    EXPECT_EQ(in.free_blocks + held, cfg.kv.num_blocks) << "at t = " << in.now_s;
    if (in.now_s >= 10 && !checked) {
      checked = true;
      EXPECT_FALSE(present) << "request 0 still there at t = " << in.now_s;
    }
    if (in.now_s < 10) {
      EXPECT_TRUE(present);
    }
  });
  EXPECT_TRUE(checked);
  EXPECT_GE(held_before, 10);  // it did hold blocks: 40 prompt tokens in blocks of 4
  HarnessResult r = run_scheduler(sched, reqs, cfg);
  const RequestTimeline& t0 = timeline_of(r, 0);
  EXPECT_EQ(t0.status, RequestStatus::kAborted);
  EXPECT_LT(t0.finish_s, 0);
  EXPECT_GT(t0.output_tokens, 0);
  EXPECT_LT(t0.output_tokens, 40);
  EXPECT_EQ(r.finished, (std::vector<int>{1, 2}));
  MetricRow row = compute_metrics(r.timeline, SloSpec{});
  EXPECT_EQ(metric(row, "requests_aborted"), 1);
  EXPECT_EQ(metric(row, "requests"), 2);
  EXPECT_EQ(metric(row, "requests_unfinished"), 0);
}

TEST(RequestLimits, QueueTimeoutAbortsOnlyRequestsNotYetScheduled) {
  ContinuousScheduler sched(64, 1, true);  // one slot: the others queue
  std::vector<RequestSpec> reqs = {{0, 0, 10, 20}, {1, 0, 10, 3}, {2, 1, 10, 3}};
  HarnessConfig cfg;
  cfg.kv.num_blocks = 50;
  cfg.queue_timeout_s = 8;  // request 0 runs for 20 steps, longer than anyone may queue
  HarnessResult r = run_scheduler(sched, reqs, cfg);
  EXPECT_EQ(timeline_of(r, 0).status, RequestStatus::kOk);  // running past 8 s is fine
  EXPECT_GE(timeline_of(r, 0).finish_s, 0);
  for (int id : {1, 2}) {
    EXPECT_EQ(timeline_of(r, id).status, RequestStatus::kAborted);
    EXPECT_EQ(timeline_of(r, id).output_tokens, 0);
    EXPECT_LT(timeline_of(r, id).first_scheduled_s, 0);
  }
  EXPECT_EQ(r.finished, std::vector<int>{0});
}

TEST(RequestLimits, QueueTimeoutFiresWhileNothingCanBeScheduled) {
  // Request 1 can never fit the pool; with a queue timeout the engine waits for its deadline
  // and aborts it instead of reporting it as unschedulable.
  ContinuousScheduler sched(64, 4, true);
  HarnessConfig cfg;
  cfg.kv.num_blocks = 4;
  cfg.queue_timeout_s = 30;
  HarnessResult r = run_scheduler(sched, {{0, 0, 20, 4}, {1, 0, 200, 4}}, cfg);
  EXPECT_EQ(timeline_of(r, 1).status, RequestStatus::kAborted);
  EXPECT_EQ(r.finished, std::vector<int>{0});
}

TEST(RequestLimits, MaxNewTokensTruncatesAtTheCap) {
  ContinuousScheduler sched(64, 4, true);
  HarnessConfig cfg;
  cfg.kv.num_blocks = 50;
  cfg.max_new_tokens = 5;
  HarnessResult r = run_scheduler(sched, {{0, 0, 10, 12}, {1, 0, 10, 3}}, cfg);
  EXPECT_EQ(r.generated[0], 5);
  EXPECT_EQ(timeline_of(r, 0).status, RequestStatus::kTruncated);
  EXPECT_GE(timeline_of(r, 0).finish_s, 0);
  EXPECT_EQ(r.generated[1], 3);
  EXPECT_EQ(timeline_of(r, 1).status, RequestStatus::kOk);
  EXPECT_EQ(r.tokens_processed[0], 10 + 5 - 1);
  EXPECT_EQ(metric(compute_metrics(r.timeline, SloSpec{}), "requests_truncated"), 1);
}

TEST(RequestLimits, RequestsCsvCarriesTheStatus) {
  ContinuousScheduler sched(64, 1, true);
  HarnessConfig cfg;
  cfg.kv.num_blocks = 50;
  cfg.queue_timeout_s = 3;
  cfg.max_new_tokens = 6;
  HarnessResult r = run_scheduler(sched, {{0, 0, 10, 8}, {1, 0, 10, 3}}, cfg);
  const std::string root = ::testing::TempDir() + "/inferlab_request_limits";
  std::filesystem::remove_all(root);
  ResultWriter out(root, "limits");
  ResultRow row;
  row.variant = "v";
  row.metrics = compute_metrics(r.timeline, SloSpec{});
  out.add(row, r.timeline.requests);
  std::ifstream f(std::filesystem::path(out.dir()) / "requests.csv");
  std::stringstream ss;
  ss << f.rdbuf();
  std::string header, first, second;
  std::getline(ss, header);
  std::getline(ss, first);
  std::getline(ss, second);
  // The column named status, wherever it stands.
  auto field = [](const std::string& line, std::size_t index) {
    std::stringstream cells(line);
    std::string cell;
    for (std::size_t i = 0; i <= index && std::getline(cells, cell, ','); ++i) {
    }
    return cell;
  };
  std::size_t status = 0;
  {
    std::stringstream names(header);
    std::string name;
    while (std::getline(names, name, ',') && name != "status") ++status;
  }
  EXPECT_EQ(field(header, status), "status");
  EXPECT_EQ(field(first, status), "truncated");
  EXPECT_EQ(field(second, status), "aborted");
  std::filesystem::remove_all(root);
}

// Hand-made timeline: every number checked.
TEST(RequestMetrics, QueueingSloPerClassAndFairness) {
  RunTimeline run;
  auto req = [](int id, int cls, double arrival, double scheduled, double first, double finish, int out) {
    RequestTimeline r;
    r.id = id;
    r.priority = r.slo_class = cls;
    r.arrival_s = arrival;
    r.first_scheduled_s = scheduled;
    r.first_token_s = first;
    r.finish_s = finish;
    r.output_tokens = out;
    r.prompt_tokens = 10;
    return r;
  };
  run.requests = {req(0, 0, 0.0, 0.0, 0.1, 1.1, 11),    // ttft 100 ms, tpot 100 ms, slowdown 1
                  req(1, 0, 0.0, 0.5, 0.6, 1.6, 11),    // ttft 600 ms, slowdown 1.6/1.1
                  req(2, 1, 1.0, 2.0, 2.5, 3.0, 2)};    // ttft 1500 ms, tpot 500 ms, slowdown 2
  RequestTimeline aborted = req(3, 1, 1.0, -1, -1, -1, 0);
  aborted.status = RequestStatus::kAborted;
  run.requests.push_back(aborted);
  SloSpec slo;
  slo.ttft_ms = 2000;
  slo.class_ttft_ms = {500};  // class 0 must start within 500 ms; class 1 keeps 2000
  MetricRow row = compute_metrics(run, slo);
  EXPECT_DOUBLE_EQ(metric(row, "queue_ms_mean"), (0.0 + 500.0 + 1000.0) / 3);
  EXPECT_DOUBLE_EQ(metric(row, "queue_ms_p50"), 500.0);
  EXPECT_EQ(metric(row, "requests_aborted"), 1);
  EXPECT_EQ(metric(row, "requests_rejected"), 0);
  EXPECT_EQ(metric(row, "requests_unfinished"), 0);
  EXPECT_DOUBLE_EQ(metric(row, "slo_attain_frac"), 2.0 / 4);  // requests 0 and 2
  EXPECT_DOUBLE_EQ(metric(row, "class0_slo_attain_frac"), 0.5);
  EXPECT_DOUBLE_EQ(metric(row, "class1_slo_attain_frac"), 0.5);
  EXPECT_DOUBLE_EQ(metric(row, "class0_ttft_ms_p50"), 350.0);
  EXPECT_NEAR(metric(row, "class1_tpot_ms_p99"), 500.0, 1e-9);
  EXPECT_EQ(metric(row, "class1_requests"), 2);
  const double x[] = {1.0, 1.6 / 1.1, 2.0};
  double s = 0, sq = 0;
  for (double v : x) s += v, sq += v * v;
  EXPECT_NEAR(metric(row, "fairness_jain"), s * s / (3 * sq), 1e-12);
  EXPECT_NEAR(metric(row, "goodput_req_s"), 2.0 / 3.0, 1e-12);  // 2 good over the 3 s makespan
  // One class only: no per-class columns, the fixed names in order.
  for (RequestTimeline& r : run.requests) r.slo_class = 0;
  EXPECT_EQ(compute_metrics(run, slo).size(), metric_names().size());
}

}  // namespace
}  // namespace inferlab
