// KV reservation policies ([kv] reservation: on_demand, full, oracle, pow2, max): the tokens
// each reserves, the contiguous block pool the Orca policies place regions in, their effect on
// admission and batch size through the real Engine (stub executor, one modelled second per
// step), the memory breakdown columns, and the TOML checks.
#include <gtest/gtest.h>

#include <unistd.h>

#include <map>
#include <sstream>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine_harness.h"
#include "inferlab/kv/block_manager.h"
#include "inferlab/error.h"
#include "inferlab/experiment/experiment.h"
#include "inferlab/results/metrics.h"
#include "plugins/common/scheduling/continuous_scheduler.h"
#include "test_support.h"

namespace inferlab {
namespace {

namespace fs = std::filesystem;
using testing::HarnessConfig;
using testing::HarnessResult;
using testing::RequestSpec;
using testing::run_scheduler;

// The metrics of a timeline by name (.at throws on a missing one).
std::map<std::string, double> metrics_of(const RunTimeline& t) {
  const MetricRow row = compute_metrics(t, {});
  return {row.begin(), row.end()};
}

TEST(KvReservation, TokensReservedPerPolicy) {
  // prompt 100, 25 output tokens, no drafts, a 2048-token model.
  EXPECT_EQ(reservation_tokens(KvReservation::kOnDemand, 100, 25, 0, 2048), 0);
  EXPECT_EQ(reservation_tokens(KvReservation::kFull, 100, 25, 0, 2048), 125);
  EXPECT_EQ(reservation_tokens(KvReservation::kOracle, 100, 25, 0, 2048), 125);
  EXPECT_EQ(reservation_tokens(KvReservation::kPow2, 100, 25, 0, 2048), 132);  // 25 -> 32 (vLLM §6.1's example)
  EXPECT_EQ(reservation_tokens(KvReservation::kPow2, 100, 32, 0, 2048), 132);  // a power of two stays
  EXPECT_EQ(reservation_tokens(KvReservation::kMax, 100, 25, 0, 2048), 2048);
  // Pow2 never reserves past the model's length, nor less than the request itself.
  EXPECT_EQ(reservation_tokens(KvReservation::kPow2, 1500, 520, 0, 2048), 2048);
  EXPECT_EQ(reservation_tokens(KvReservation::kPow2, 1500, 600, 0, 2048), 2100);
  EXPECT_EQ(reservation_tokens(KvReservation::kOracle, 100, 25, 3, 2048), 128);  // + draft positions
  for (KvReservation r : {KvReservation::kOnDemand, KvReservation::kFull, KvReservation::kOracle, KvReservation::kPow2,
                          KvReservation::kMax}) {
    KvReservation back = KvReservation::kOnDemand;
    ASSERT_TRUE(parse_kv_reservation(kv_reservation_name(r), back));
    EXPECT_EQ(back, r);
  }
  KvReservation unused;
  EXPECT_FALSE(parse_kv_reservation("paged", unused));
}

TEST(KvReservation, ContiguousPoolPlacesFirstFitRunsAndMeasuresItsHoles) {
  BlockPool pool(8, true);
  EXPECT_EQ(pool.allocate_run(2), 0);  // [0,1]
  EXPECT_EQ(pool.allocate_run(3), 2);  // [2,4]
  EXPECT_EQ(pool.allocate_run(2), 5);  // [5,6]
  EXPECT_EQ(pool.largest_free_run(), 1);
  EXPECT_EQ(pool.allocate_run(2), -1);
  pool.release(0);
  pool.release(1);  // holes: [0,1] and [7]
  EXPECT_EQ(pool.free_count(), 3);
  EXPECT_EQ(pool.largest_free_run(), 2);
  EXPECT_EQ(pool.free_in_runs_shorter_than(3), 3);  // neither hole takes 3 blocks
  EXPECT_EQ(pool.free_in_runs_shorter_than(2), 1);  // only [7] is too small for 2
  EXPECT_EQ(pool.allocate_run(3), -1);              // 3 free blocks, no run of 3
  EXPECT_THROW(pool.allocate(), Error);             // a contiguous pool hands out runs only

  KvCacheConfig kv;
  kv.block_size = 4;
  kv.num_blocks = 8;
  kv.reservation = KvReservation::kOracle;
  BlockManager bm(kv);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(bm.reserve(1, 9, copies));   // 3 blocks
  ASSERT_TRUE(bm.reserve(2, 12, copies));  // 3 blocks
  EXPECT_EQ(std::vector<int>(bm.block_table(2).begin(), bm.block_table(2).end()), (std::vector<int>{3, 4, 5}));
  bm.free(1);
  EXPECT_EQ(bm.free_blocks(), 3);  // the largest hole, not the 5 free blocks
  EXPECT_EQ(bm.stats().blocks_free, 5);
  EXPECT_EQ(bm.fragmented_blocks(4), 5);
  EXPECT_FALSE(bm.reserve(3, 16, copies));  // 4 blocks: 5 free, but no run of 4
  kv.prefix_caching = true;
  EXPECT_THROW(BlockManager{kv}, Error);
}

// Four requests of prompt 10 and 6 output tokens (15 positions written, 16 tokens) in 16
// blocks of 4 tokens, a model of 32 positions.
HarnessResult run_policy(KvReservation r) {
  ContinuousScheduler sched(256, 8, true);
  std::vector<RequestSpec> reqs = {{0, 0, 10, 6}, {1, 0, 10, 6}, {2, 0, 10, 6}, {3, 0, 10, 6}};
  HarnessConfig cfg;
  cfg.kv.block_size = 4;
  cfg.kv.num_blocks = 16;
  cfg.kv.max_seq_len = 32;
  cfg.kv.reservation = r;
  return run_scheduler(sched, reqs, cfg);
}

TEST(KvReservation, EachPolicyReservesItsOwnBlocksAndSoBatchesDifferently) {
  struct Expect {
    KvReservation r;
    int running;   // requests admitted together
    int reserved;  // blocks held after the first step
    long long tokens, internal, external;
  };
  // Blocks per request: on demand 3 after the prompt (10 tokens), full / oracle 4 (16 tokens),
  // pow2 5 (10 + 8 = 18 tokens), max 8 (32). Internal: capacity past position 15. External:
  // pow2's one free block, too small for the waiting request's 5.
  for (const Expect& e :
       {Expect{KvReservation::kOnDemand, 4, 12, 40, 0, 0}, Expect{KvReservation::kFull, 4, 16, 40, 4, 0},
        Expect{KvReservation::kOracle, 4, 16, 40, 4, 0}, Expect{KvReservation::kPow2, 3, 15, 30, 15, 4},
        Expect{KvReservation::kMax, 2, 16, 20, 34, 0}}) {
    SCOPED_TRACE(kv_reservation_name(e.r));
    const HarnessResult h = run_policy(e.r);
    EXPECT_EQ(h.max_running, e.running);
    ASSERT_FALSE(h.timeline.steps.empty());
    const StepTimeline& first = h.timeline.steps.front();
    EXPECT_EQ(first.kv_blocks_reserved, e.reserved);
    EXPECT_EQ(first.kv_tokens, e.tokens);
    EXPECT_EQ(first.kv_slots_internal, e.internal);
    EXPECT_EQ(first.kv_slots_external, e.external);
    EXPECT_EQ(h.generated.at(3), 6);
    EXPECT_EQ(h.timeline.kv_blocks_free_end, 16);  // nothing leaked
    const auto m = metrics_of(h.timeline);
    const double sum = m.at("kv_token_share") + m.at("kv_reserved_share") + m.at("kv_internal_frag_share") +
                       m.at("kv_external_frag_share");
    EXPECT_NEAR(sum, 1.0, 1e-12);
  }
}

TEST(KvReservation, ContiguousRegionsLeaveHolesTheNextRequestCannotUse) {
  // Oracle regions of 2, 2, 2 blocks fill 6 blocks; 0 and 2 finish after two steps, leaving two
  // 2-block holes, too small for request 3's 3-block region until request 1 ends too.
  std::vector<RequestSpec> reqs = {{0, 0, 4, 2}, {1, 0, 4, 4}, {2, 0, 4, 2}, {3, 0, 8, 4}};
  auto run = [&](KvReservation r) {
    ContinuousScheduler sched(256, 8, true);
    HarnessConfig cfg;
    cfg.kv.block_size = 4;
    cfg.kv.num_blocks = 6;
    cfg.kv.reservation = r;
    return run_scheduler(sched, reqs, cfg);
  };
  const HarnessResult oracle = run(KvReservation::kOracle);
  ASSERT_GE(oracle.timeline.steps.size(), 4u);
  EXPECT_EQ(oracle.timeline.steps[1].kv_slots_external, 0);   // the pool is full: no holes
  EXPECT_EQ(oracle.timeline.steps[2].kv_slots_external, 16);  // 4 free blocks in two holes
  EXPECT_EQ(oracle.timeline.requests[3].first_scheduled_s, 4.0);
  EXPECT_GT(metrics_of(oracle.timeline).at("kv_external_frag_share"), 0.0);
  // Paged, any 3 free blocks serve: request 3 starts as soon as 0 and 2 are gone.
  const HarnessResult paged = run(KvReservation::kOnDemand);
  EXPECT_LT(paged.timeline.requests[3].first_scheduled_s, 4.0);
  for (const StepTimeline& s : paged.timeline.steps) EXPECT_EQ(s.kv_slots_external, 0);
}

TEST(KvReservation, MaxRefusesARequestLongerThanTheModel) {
  ContinuousScheduler sched(256, 8, true);
  HarnessConfig cfg;
  cfg.kv.block_size = 4;
  cfg.kv.num_blocks = 32;
  cfg.kv.max_seq_len = 16;
  cfg.kv.reservation = KvReservation::kMax;
  try {
    run_scheduler(sched, {{0, 0, 10, 7}}, cfg);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_seq_len 16"), std::string::npos) << e.what();
  }
}

TEST(KvReservation, MemoryBreakdownSharesAreDurationWeightedAndSumToOne) {
  RunTimeline t;
  t.block_size = 4;
  StepTimeline a;  // 1 s: 10 blocks = 40 slots, 20 tokens, 8 never written, 8 unusable free
  a.duration_s = 1;
  a.kv_blocks_reserved = 10;
  a.kv_tokens = 20;
  a.kv_slots_internal = 8;
  a.kv_slots_external = 8;
  StepTimeline b;  // 3 s: 5 blocks = 20 slots, 16 tokens, 4 never written
  b.duration_s = 3;
  b.kv_blocks_reserved = 5;
  b.kv_tokens = 16;
  b.kv_slots_internal = 4;
  t.steps = {a, b};
  const auto m = metrics_of(t);
  // Weighted: occupied 40 + 8 + 3 × 20 = 108; tokens 20 + 48 = 68; internal 8 + 12 = 20;
  // external 8; reserved for later 40 + 60 - 68 - 20 = 12.
  EXPECT_NEAR(m.at("kv_token_share"), 68.0 / 108, 1e-12);
  EXPECT_NEAR(m.at("kv_internal_frag_share"), 20.0 / 108, 1e-12);
  EXPECT_NEAR(m.at("kv_external_frag_share"), 8.0 / 108, 1e-12);
  EXPECT_NEAR(m.at("kv_reserved_share"), 12.0 / 108, 1e-12);
  EXPECT_EQ(metrics_of(RunTimeline{}).at("kv_token_share"), 0.0);  // nothing reserved
}

fs::path write_spec(const std::string& text) {
  static int n = 0;
  const fs::path p = fs::temp_directory_path() /
                     ("inferlab_kv_reservation_" + std::to_string(getpid()) + "_" + std::to_string(n++) + ".toml");
  std::ofstream(p) << text;
  return p;
}

TEST(KvReservation, TomlNamesThePolicyAndRefusesSharingWithContiguousRegions) {
  const std::string head = "[model]\npreset = \"stories260k\"\n[baseline]\n";
  const fs::path ok = write_spec(head + "kv = { reservation = \"pow2\" }\n");
  EXPECT_EQ(load_experiment(ok.string(), {}).variants.front().stack.kv.reservation, KvReservation::kPow2);
  const fs::path bad = write_spec(head + "kv = { reservation = \"max\", prefix_caching = true }\n");
  try {
    load_experiment(bad.string(), {});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(":4:"), std::string::npos) << msg;
    EXPECT_NE(msg.find("prefix caching"), std::string::npos) << msg;
  }
  const fs::path unknown = write_spec(head + "kv = { reservation = \"paged\" }\n");
  try {
    load_experiment(unknown.string(), {});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("allowed: on_demand, full, oracle, pow2, max"), std::string::npos) << e.what();
  }
  for (const fs::path& p : {ok, bad, unknown}) fs::remove(p);
}

// Claims over the breakdown columns through `inferlab reproduce`: `metric` and `difference`
// quantities pass where the policies make them true, and one claim that paged-only numbers
// hold for Orca(Max) fails with exit code 1.
TEST(KvReservation, ReproduceClaimsOnTheSharesPassAndFailAsDesigned) {
  const fs::path f = write_spec(
      "[experiment]\nname = \"kv_reservation_claims\"\nrepeats = 1\nisolate = false\n"
      "[model]\npreset = \"opt-13b\"\n[device]\nkind = \"sim\"\nprofile = \"a100-40gb\"\n"
      "[workload]\nnum_requests = 24\nprompt_len = 100\noutput_len = 100\n"
      "[baseline]\nkv = { block_size = 16, num_blocks = 300 }\n"
      "[[variant]]\nname = \"orca_max\"\nkv = { reservation = \"max\" }\n"
      "[[claim]]\nsource = \"t\"\ntext = \"paged holds tokens\"\nquantity = \"metric\"\nvariant = \"baseline\"\n"
      "metric = \"kv_token_share\"\ncompare = \"greater\"\nexpected = 0.9\nclass = \"exact\"\n"
      "[[claim]]\nsource = \"t\"\ntext = \"paged wastes less\"\nquantity = \"difference\"\nmetric = \"kv_token_share\"\n"
      "numerator = \"baseline\"\ndenominator = \"orca_max\"\ncompare = \"greater\"\nexpected = 0.5\nclass = \"exact\"\n"
      "[[claim]]\nsource = \"t\"\ntext = \"DESIGNED-TO-FAIL\"\nquantity = \"metric\"\nvariant = \"orca_max\"\n"
      "metric = \"kv_token_share\"\ncompare = \"greater\"\nexpected = 0.9\nclass = \"exact\"\n");
  const testing::CliResult r = testing::run_inferlab("reproduce --log warn " + f.string(), testing::source_dir(), 120);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  std::istringstream lines(r.out);
  int passed = 0, failed = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("| pass |") != std::string::npos) ++passed;
    if (line.find("| FAIL |") != std::string::npos) {
      ++failed;
      EXPECT_NE(line.find("DESIGNED-TO-FAIL"), std::string::npos) << line;
    }
  }
  EXPECT_EQ(passed, 2) << r.out;
  EXPECT_EQ(failed, 1) << r.out;
  fs::remove(f);
}

}  // namespace
}  // namespace inferlab
