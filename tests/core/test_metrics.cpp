// Metrics: a hand-made timeline with every number worked out below, numpy-style percentiles,
// Student-t confidence intervals and SLO goodput.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "inferlab/error.h"
#include "inferlab/results/metrics.h"

namespace inferlab {
namespace {

std::map<std::string, double> as_map(const MetricRow& row) {
  std::map<std::string, double> m;
  for (const auto& [k, v] : row) m[k] = v;
  return m;
}

// Three finished requests and one still waiting, block_size 4:
//   R0 arrives 0.00, tokens at 0.10 0.15 0.25 0.35, finishes 0.35; prompt 10, output 4
//   R1 arrives 0.10, tokens at 0.20 0.30 0.50 0.50 (the last two from one speculative step),
//      finishes 0.50; prompt 20, output 4, 8 prompt tokens cached, preempted once
//   R2 arrives 0.15, one token at 0.60, finishes 0.60; prompt 6, output 1, 2 cached
//   R3 arrives 0.30, nothing yet; prompt 12
RunTimeline hand_timeline() {
  RunTimeline run;
  run.block_size = 4;
  RequestTimeline r0{0, 0.00, 0.10, 0.35, 10, 4, {0.10, 0.15, 0.25, 0.35}, 0, 0};
  RequestTimeline r1{1, 0.10, 0.20, 0.50, 20, 4, {0.20, 0.30, 0.50, 0.50}, 1, 8};
  RequestTimeline r2{2, 0.15, 0.60, 0.60, 6, 1, {0.60}, 0, 2};
  RequestTimeline r3{3, 0.30, -1, -1, 12, 0, {}, 0, 0};
  run.requests = {r0, r1, r2, r3};
  //            start dur  seqs rows pre dec reserved used kv_tokens
  run.steps = {{0.00, 0.1, 2, 30, 30, 0, 8, 8, 30},
               {0.10, 0.1, 3, 8, 6, 2, 10, 10, 38},
               {0.20, 0.1, 2, 2, 0, 2, 0, 0, 0},  // nothing reserved: not part of kv_waste_frac
               {0.30, 0.1, 1, 3, 0, 3, 5, 5, 15}};
  run.kv_blocks_total = 64;
  run.kv_blocks_peak = 12;
  run.spec_proposed = 4;
  run.spec_accepted = 1;
  run.preemptions = 1;
  run.weights_bytes = 123456;
  return run;
}

TEST(Metrics, HandTimelineEveryNumber) {
  const MetricRow row = compute_metrics(hand_timeline(), SloSpec{});
  ASSERT_EQ(row.size(), metric_names().size());
  for (std::size_t i = 0; i < row.size(); ++i) EXPECT_EQ(row[i].first, metric_names()[i]);
  auto m = as_map(row);
  const double eps = 1e-9;
  // TTFT ms: R0 100, R1 100, R2 450 → sorted [100, 100, 450].
  // p50: h = 2*0.5 = 1 → 100; p90: h = 1.8 → 100 + 0.8*350 = 380; p99: h = 1.98 → 443.
  EXPECT_NEAR(m["ttft_ms_mean"], 650.0 / 3, eps);
  EXPECT_NEAR(m["ttft_ms_p50"], 100, eps);
  EXPECT_NEAR(m["ttft_ms_p90"], 380, eps);
  EXPECT_NEAR(m["ttft_ms_p99"], 443, eps);
  // TPOT ms: R0 (0.35-0.10)/3 = 83.333, R1 (0.50-0.20)/3 = 100; R2 has one token, no TPOT.
  // p50: h = 0.5 → 91.667; p90: 83.333 + 0.9*16.667 = 98.333; p99: 83.333 + 0.99*16.667 = 99.833.
  EXPECT_NEAR(m["tpot_ms_mean"], 275.0 / 3, eps);
  EXPECT_NEAR(m["tpot_ms_p50"], 275.0 / 3, eps);
  EXPECT_NEAR(m["tpot_ms_p90"], 250.0 / 3 + 0.9 * 50.0 / 3, eps);
  EXPECT_NEAR(m["tpot_ms_p99"], 250.0 / 3 + 0.99 * 50.0 / 3, eps);
  // ITL ms pooled: R0 50 100 100, R1 100 200 0 → sorted [0, 50, 100, 100, 100, 200], sum 550.
  // p50: h = 2.5 → 100; p90: h = 4.5 → 150; p99: h = 4.95 → 195.
  EXPECT_NEAR(m["itl_ms_mean"], 550.0 / 6, eps);
  EXPECT_NEAR(m["itl_ms_p50"], 100, eps);
  EXPECT_NEAR(m["itl_ms_p90"], 150, eps);
  EXPECT_NEAR(m["itl_ms_p99"], 195, eps);
  // e2e ms: R0 350, R1 400, R2 450. p90: h = 1.8 → 440; p99: 449.
  EXPECT_NEAR(m["e2e_ms_mean"], 400, eps);
  EXPECT_NEAR(m["e2e_ms_p50"], 400, eps);
  EXPECT_NEAR(m["e2e_ms_p90"], 440, eps);
  EXPECT_NEAR(m["e2e_ms_p99"], 449, eps);
  // Normalised latency e2e / output tokens, ms: R0 350/4 = 87.5, R1 400/4 = 100, R2 450/1 = 450.
  EXPECT_NEAR(m["norm_latency_ms_mean"], 637.5 / 3, eps);
  EXPECT_NEAR(m["norm_latency_ms_p50"], 100, eps);
  EXPECT_NEAR(m["norm_latency_ms_p90"], 100 + 0.8 * 350, eps);
  // Makespan 0.00 → 0.60 s. Output tokens 4+4+1 = 9; prompt+output 14+24+7 = 45; 3 requests.
  EXPECT_NEAR(m["throughput_out_tok_s"], 15, eps);
  EXPECT_NEAR(m["throughput_total_tok_s"], 75, eps);
  EXPECT_NEAR(m["throughput_req_s"], 5, eps);
  EXPECT_NEAR(m["goodput_req_s"], 5, eps);  // no SLO bounds: every finished request counts
  EXPECT_EQ(m["requests"], 3);
  EXPECT_EQ(m["requests_unfinished"], 1);
  // Steps: seqs 2+3+2+1 = 8 → 2 per step; rows 30+8+2+3 = 43 → 10.75.
  EXPECT_EQ(m["steps"], 4);
  EXPECT_NEAR(m["batch_mean"], 2, eps);
  EXPECT_NEAR(m["tokens_per_step_mean"], 10.75, eps);
  EXPECT_EQ(m["kv_blocks_peak"], 12);
  EXPECT_EQ(m["kv_blocks_total"], 64);
  EXPECT_EQ(m["spec_proposed"], 4);
  EXPECT_EQ(m["spec_accepted"], 1);
  // Waste: 1-30/32 = 0.0625, 1-38/40 = 0.05, (skipped), 1-15/20 = 0.25 → 0.3625/3.
  EXPECT_NEAR(m["kv_waste_frac"], 0.3625 / 3, eps);
  EXPECT_EQ(m["preemptions"], 1);
  // Cached 0+8+2+0 = 10 of 10+20+6+12 = 48 prompt tokens.
  EXPECT_NEAR(m["prefix_hit_frac"], 10.0 / 48, eps);
  EXPECT_NEAR(m["spec_accept_frac"], 0.25, eps);
  // Decode-step tokens: R0 3, R1 3 = 6; decode steps by distinct times: R0 3, R1 2 (0.30,
  // 0.50) = 5 → 1.2.
  EXPECT_NEAR(m["spec_tokens_per_step"], 1.2, eps);
  EXPECT_EQ(m["weights_bytes"], 123456);
}

TEST(Metrics, RecordedDecodeStepsAndPeakFallback) {
  RunTimeline run = hand_timeline();
  run.decode_seq_steps = 4;  // the engine's own count wins: 6 tokens / 4 = 1.5
  run.kv_blocks_peak = 0;    // not recorded: the steps' largest reservation, 10
  run.spec_proposed = 0;
  auto m = as_map(compute_metrics(run, SloSpec{}));
  EXPECT_NEAR(m["spec_tokens_per_step"], 1.5, 1e-12);
  EXPECT_EQ(m["kv_blocks_peak"], 10);
  EXPECT_EQ(m["spec_accept_frac"], 0);
}

TEST(Metrics, SloGoodput) {
  const RunTimeline run = hand_timeline();
  auto goodput = [&](double ttft, double tpot, double e2e) {
    return as_map(compute_metrics(run, SloSpec{ttft, tpot, e2e}))["goodput_req_s"];
  };
  // TTFT <= 200: R0, R1 (100) pass, R2 (450) fails → 2 / 0.6 s.
  EXPECT_NEAR(goodput(200, 0, 0), 2 / 0.6, 1e-9);
  // TPOT <= 90: R0 (83.3) passes, R1 (100) fails, R2 has no TPOT and passes.
  EXPECT_NEAR(goodput(0, 90, 0), 2 / 0.6, 1e-9);
  // e2e <= 420: R0 350, R1 400 pass; R2 450 fails.
  EXPECT_NEAR(goodput(0, 0, 420), 2 / 0.6, 1e-9);
  // TTFT <= 200 and TPOT <= 90: only R0.
  EXPECT_NEAR(goodput(200, 90, 0), 1 / 0.6, 1e-9);
  EXPECT_NEAR(goodput(1e9, 1e9, 1e9), 3 / 0.6, 1e-9);
  EXPECT_EQ(goodput(10, 0, 0), 0);
}

TEST(Metrics, EmptyRunGivesNaNLatenciesAndZeroRates) {
  auto m = as_map(compute_metrics(RunTimeline{}, SloSpec{}));
  EXPECT_TRUE(std::isnan(m["ttft_ms_p50"]));
  EXPECT_TRUE(std::isnan(m["itl_ms_mean"]));
  EXPECT_EQ(m["throughput_out_tok_s"], 0);
  EXPECT_EQ(m["requests"], 0);
  EXPECT_EQ(m["batch_mean"], 0);
  EXPECT_EQ(m["spec_tokens_per_step"], 0);
}

TEST(Metrics, PercentileMatchesNumpyLinear) {
  // numpy.percentile([1, 2, 3, 4], [0, 25, 50, 90, 100]) = [1, 1.75, 2.5, 3.7, 4]
  const std::vector<double> v{4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(v, 25), 1.75);
  EXPECT_DOUBLE_EQ(percentile(v, 50), 2.5);
  EXPECT_NEAR(percentile(v, 90), 3.7, 1e-12);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 4);
  // numpy.percentile([15, 20, 35, 40, 50], [30, 40, 99]) = [23, 29, 49.6]
  const std::vector<double> w{50, 15, 40, 20, 35};
  EXPECT_NEAR(percentile(w, 30), 23, 1e-12);
  EXPECT_NEAR(percentile(w, 40), 29, 1e-12);
  EXPECT_NEAR(percentile(w, 99), 49.6, 1e-12);
  EXPECT_EQ(percentile({7}, 99), 7);
  EXPECT_TRUE(std::isnan(percentile({}, 50)));
  EXPECT_THROW(percentile(v, 101), Error);
  EXPECT_THROW(percentile(v, -1), Error);
}

TEST(Metrics, SeveralPercentilesAtOnceEqualEachAlone) {
  // Any order of q, repeats included: each selection narrows on the previous one (by rank).
  std::vector<double> v;
  for (int i = 0; i < 1001; ++i) v.push_back(static_cast<double>((i * 7919) % 1009) + 0.25 * (i % 3));
  const double qs[] = {99, 0, 50, 90, 50, 100, 12.5};
  const std::vector<double> got = percentiles(v, qs);
  ASSERT_EQ(got.size(), 7u);
  for (std::size_t i = 0; i < 7; ++i) EXPECT_DOUBLE_EQ(got[i], percentile(v, qs[i])) << "q = " << qs[i];
  EXPECT_TRUE(std::isnan(percentiles({}, qs)[3]));
  const double bad[] = {50, 101};
  EXPECT_THROW(percentiles(v, bad), Error);
}

TEST(Metrics, MeanCi95UsesStudentT) {
  // n = 2: sd = sqrt(2), half = t(1) * sqrt(2) / sqrt(2) = 12.706.
  auto [m2, h2] = mean_ci95({1, 3});
  EXPECT_DOUBLE_EQ(m2, 2);
  EXPECT_NEAR(h2, 12.706, 1e-9);
  // n = 5: sd = sqrt(2.5), half = 2.776 * sqrt(2.5) / sqrt(5) = 2.776 / sqrt(2).
  auto [m5, h5] = mean_ci95({1, 2, 3, 4, 5});
  EXPECT_DOUBLE_EQ(m5, 3);
  EXPECT_NEAR(h5, 2.776 / std::sqrt(2.0), 1e-9);
  auto [m1, h1] = mean_ci95({4.5});
  EXPECT_EQ(m1, 4.5);
  EXPECT_EQ(h1, 0);
  // Beyond the table: t(50) = 2.0086, t(999) = 1.9623 (exact values).
  for (auto [n, t] : {std::pair{51, 2.0086}, std::pair{1000, 1.9623}, std::pair{32, 2.0395}}) {
    std::vector<double> v;
    for (int i = 0; i < n; ++i) v.push_back(i % 2 ? 1.0 : -1.0);
    double mean = 0, ss = 0;
    for (double x : v) mean += x / n;
    for (double x : v) ss += (x - mean) * (x - mean);
    const double se = std::sqrt(ss / (n - 1)) / std::sqrt(static_cast<double>(n));
    EXPECT_NEAR(mean_ci95(v).second / se, t, 0.002) << "n = " << n;
  }
}

}  // namespace
}  // namespace inferlab
