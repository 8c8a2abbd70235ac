// Scheduling conformance: every registered scheduler, on every device kind it declares, with
// its default parameters and each parameter at the ends of its range, drives the real Engine
// over the StubExecutor with the greedy decoder ('sampling' at its defaults) through several
// workloads. Any correct schedule gives the same tokens (the stub's are a function of the
// prefix), so every request must produce exactly the greedy outputs, whatever the batching,
// chunking or preemption, with the KV pool respected and every token counted once.
#include <iostream>

#include <gtest/gtest.h>

#include "engine_runs.h"
#include "inferlab/error.h"
#include "plugin_cases.h"

namespace inferlab::testing {
namespace {

class SchedulingConformance : public ::testing::TestWithParam<PluginCase> {
 protected:
  void SetUp() override {
    std::string why;
    device_ = open_device(GetParam().device, why);
    if (!device_) GTEST_SKIP() << why;
    INFERLAB_SKIP_IF_REFUSED(GetParam(), stub_model_config(64));
  }

  std::shared_ptr<Scheduler> scheduler() {
    return conformance_registry().create_scheduler(GetParam().plugin, resolve_case(GetParam()), *device_);
  }
  std::shared_ptr<Decoder> greedy() {
    const Registry& reg = conformance_registry();
    return reg.create_decoder("sampling", reg.resolve(PluginKind::kDecoding, "sampling", {}, "conformance"), *device_);
  }

  void run_workload(const std::string& name) {
    std::shared_ptr<Decoder> decoder = greedy();
    for (const Workload& w : scheduling_workloads(decoder->max_draft_tokens())) {
      if (w.name != name) continue;
      StubRun run;
      try {
        run = run_on_stub(*scheduler(), *decoder, w, 1);
      } catch (const Error& e) {
        FAIL() << "the engine refused the scheduler's decisions: " << e.what();
      }
      expect_run_conforms(run, w);
      EXPECT_EQ(run.result.outputs, greedy_outputs(w.requests)) << "outputs differ from greedy decoding";
      // The same requests with a generous pool and no reservation give the same tokens.
      Workload generous = w;
      generous.kv.num_blocks = 0;
      generous.kv.reservation = KvReservation::kOnDemand;
      StubRun roomy = run_on_stub(*scheduler(), *decoder, generous, 1);
      expect_run_conforms(roomy, generous);
      EXPECT_EQ(run.result.outputs, roomy.result.outputs);
      std::cout << "[          ] " << name << ": " << run.result.timeline.steps.size() << " steps, "
                << run.result.timeline.preemptions << " preemptions, peak " << run.result.timeline.kv_blocks_peak
                << "/" << run.num_blocks << " blocks\n";
      return;
    }
    FAIL() << "no workload named " << name;
  }

  std::unique_ptr<Device> device_;
};

TEST_P(SchedulingConformance, AllAtOnce) { run_workload("all_at_once"); }
TEST_P(SchedulingConformance, StaggeredArrivalsWithAnIdleGap) { run_workload("staggered"); }
TEST_P(SchedulingConformance, LongPromptsNeedingChunks) { run_workload("long_prompts"); }
TEST_P(SchedulingConformance, SmallPoolForcingPreemption) { run_workload("small_pool"); }
TEST_P(SchedulingConformance, ReserveFull) { run_workload("reserve_full"); }
TEST_P(SchedulingConformance, ReserveContiguousPow2Regions) { run_workload("reserve_contiguous"); }

INSTANTIATE_TEST_SUITE_P(Plugins, SchedulingConformance, ::testing::ValuesIn(plugin_cases(PluginKind::kScheduling)),
                         case_name);
// `inferlab conformance LIB.so` instantiates only the suites of its plugins' kinds.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SchedulingConformance);

}  // namespace
}  // namespace inferlab::testing
