#include "engine_runs.h"

#include <algorithm>
#include <numeric>

#include <gtest/gtest.h>

#include "inferlab/support/rng.h"

namespace inferlab::testing {

namespace {

constexpr int kVocab = 64;

// Request i with a random prompt of prompt_len[i] tokens in [3, vocab) (0..2 are never produced
// by the stub, kept free for stop tokens).
std::vector<Request> make_requests(const std::vector<int>& prompt_len, const std::vector<int>& max_output,
                                   const std::vector<double>& arrival, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<Request> reqs(prompt_len.size());
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].id = static_cast<int>(i);
    reqs[i].arrival_s = arrival.empty() ? 0.0 : arrival[i];
    reqs[i].max_output = max_output[i];
    for (int t = 0; t < prompt_len[i]; ++t) reqs[i].prompt.push_back(static_cast<int>(rng.uniform_int(3, kVocab)));
  }
  return reqs;
}

// Blocks the largest request needs for its whole life (prompt, every output, drafts), plus one.
int largest_life_blocks(const std::vector<Request>& reqs, int block_size, int max_draft,
                        KvReservation reservation = KvReservation::kOnDemand) {
  int most = 0;
  for (const Request& r : reqs) {
    const int prompt = static_cast<int>(r.prompt.size());
    const int life = std::max(prompt + r.max_output + max_draft,
                              reservation_tokens(reservation, prompt, r.max_output, max_draft, 0));
    most = std::max(most, (life + block_size - 1) / block_size + 1);
  }
  return most;
}

}  // namespace

std::vector<Workload> scheduling_workloads(int max_draft) {
  std::vector<Workload> w;
  {
    Workload all{"all_at_once", make_requests({5, 17, 33, 1, 64, 12, 40, 23}, {8, 1, 5, 12, 3, 9, 2, 6}, {}, 11), {}};
    all.kv.block_size = 7;
    w.push_back(std::move(all));
  }
  {
    std::vector<double> arrival;
    for (int i = 0; i < 10; ++i) arrival.push_back(i < 8 ? 0.003 * i : 0.5 + 0.001 * i);  // then an idle gap
    Workload staggered{"staggered", make_requests({9, 30, 2, 15, 48, 7, 21, 3, 26, 11}, {6, 3, 10, 1, 4, 8, 5, 7, 2, 9},
                                                  arrival, 12),
                       {}};
    staggered.kv.block_size = 1;
    w.push_back(std::move(staggered));
  }
  {
    Workload chunked{"long_prompts", make_requests({700, 1300, 600, 900}, {4, 3, 5, 2}, {0, 0, 0.001, 0.002}, 13), {}};
    chunked.kv.block_size = 16;
    w.push_back(std::move(chunked));
  }
  {
    Workload small{"small_pool",
                   make_requests({18, 30, 22, 27, 19, 25, 30, 21}, {12, 16, 10, 14, 16, 11, 13, 15}, {}, 14), {}};
    small.kv.block_size = 4;
    small.kv.num_blocks = largest_life_blocks(small.requests, 4, max_draft);
    w.push_back(std::move(small));
  }
  {
    Workload full{"reserve_full", make_requests({20, 50, 33, 41, 27, 45}, {10, 30, 25, 12, 28, 19}, {}, 15), {}};
    full.kv.block_size = 16;
    full.kv.reservation = KvReservation::kFull;
    full.kv.num_blocks = 2 * largest_life_blocks(full.requests, 16, max_draft);
    w.push_back(std::move(full));
  }
  {
    // Orca(Pow2): one contiguous region per request, prompt + output rounded up to a power of
    // two; requests of mixed lengths leave holes that the next region may not fit.
    Workload pow2{"reserve_contiguous",
                  make_requests({20, 50, 33, 41, 27, 45, 12, 38}, {10, 30, 25, 12, 28, 19, 33, 9}, {}, 16), {}};
    pow2.kv.block_size = 8;
    pow2.kv.reservation = KvReservation::kPow2;
    pow2.kv.num_blocks = 2 * largest_life_blocks(pow2.requests, 8, max_draft, KvReservation::kPow2);
    w.push_back(std::move(pow2));
  }
  return w;
}

Workload decoding_workload() {
  std::vector<int> prompt_len = {24, 40, 9, 60, 17, 33};
  std::vector<int> max_output = {12, 20, 7, 16, 25, 10};
  std::vector<double> arrival = {0, 0, 0, 0.004, 0.008, 0.3};
  Workload w{"decoding", make_requests(prompt_len, max_output, arrival, 21), {}};
  // Repeated n-grams: each prompt is a short random motif written over and over.
  for (std::size_t i = 0; i < w.requests.size(); ++i) {
    std::vector<int>& p = w.requests[i].prompt;
    const std::size_t period = 3 + i % 4;
    for (std::size_t t = period; t < p.size(); ++t) p[t] = p[t - period];
  }
  w.kv.block_size = 8;
  return w;
}

ScheduleDecision ObservedScheduler::schedule(const SchedulerInput& input) {
  ScheduleDecision d = inner_.schedule(input);
  for (int id : d.preempt)
    for (const SeqView& s : input.running)
      if (s.id == id) {
        recomputed_ += s.num_computed;
        ++preemptions_;
      }
  return d;
}

StubRun run_on_stub(Scheduler& scheduler, Decoder& decoder, const Workload& workload, std::uint64_t seed) {
  StubExecutor stub(stub_model_config(kVocab));
  ObservedScheduler observed(scheduler);
  EngineOptions options;
  options.kv = workload.kv;
  options.seed = seed;
  StubRun run;
  run.result = Engine(stub, observed, decoder, options).run(workload.requests);
  run.violations = stub.violations();
  run.steps = stub.steps();
  run.recomputed = observed.recomputed();
  run.observed_preemptions = observed.preemptions();
  run.num_blocks = stub.kv_config().num_blocks;
  run.max_draft = decoder.max_draft_tokens();
  return run;
}

std::vector<std::vector<int>> greedy_outputs(const std::vector<Request>& requests) {
  StubExecutor stub(stub_model_config(kVocab));
  std::vector<std::vector<int>> out;
  for (const Request& r : requests) {
    std::vector<int> tokens;
    int prev = r.prompt.back(), pos = static_cast<int>(r.prompt.size()) - 1;
    for (int i = 0; i < r.max_output; ++i) tokens.push_back(prev = stub.next_token(prev, pos++));
    out.push_back(std::move(tokens));
  }
  return out;
}

void expect_run_conforms(const StubRun& run, const Workload& workload) {
  const RunTimeline& tl = run.result.timeline;
  const auto& reqs = workload.requests;
  EXPECT_TRUE(run.violations.empty()) << run.violations.size() << " batch-contract breaches, first: "
                                      << (run.violations.empty() ? "" : run.violations.front());

  long long prompts = 0, outputs = 0, preemptions = 0;
  ASSERT_EQ(run.result.outputs.size(), reqs.size());
  ASSERT_EQ(tl.requests.size(), reqs.size());
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    const RequestTimeline& rt = tl.requests[i];
    SCOPED_TRACE("request " + std::to_string(reqs[i].id));
    EXPECT_EQ(static_cast<int>(run.result.outputs[i].size()), reqs[i].max_output);
    // A branching decoder (beam search, n > 1) returns whole sequences; each counts.
    int returned = reqs[i].max_output;
    if (!run.result.sequences.empty()) {
      ASSERT_FALSE(run.result.sequences[i].empty());
      EXPECT_EQ(run.result.sequences[i].front().tokens, run.result.outputs[i]);
      returned = 0;
      for (const BranchOutput& o : run.result.sequences[i]) {
        EXPECT_EQ(static_cast<int>(o.tokens.size()), reqs[i].max_output);
        returned += static_cast<int>(o.tokens.size());
      }
    }
    EXPECT_EQ(rt.output_tokens, returned);
    EXPECT_EQ(static_cast<int>(rt.token_times.size()), returned);
    EXPECT_GE(rt.first_token_s, rt.arrival_s);
    EXPECT_GE(rt.finish_s, rt.first_token_s);
    EXPECT_TRUE(std::is_sorted(rt.token_times.begin(), rt.token_times.end()));
    prompts += static_cast<long long>(reqs[i].prompt.size());
    outputs += static_cast<long long>(run.result.outputs[i].size());
    preemptions += rt.preemptions;
  }

  EXPECT_LE(tl.kv_blocks_peak, run.num_blocks);
  EXPECT_EQ(tl.kv_blocks_free_end, run.num_blocks) << "KV blocks leaked";
  EXPECT_EQ(tl.kv_blocks_total, run.num_blocks);
  EXPECT_EQ(tl.preemptions, preemptions);
  EXPECT_EQ(tl.preemptions, run.observed_preemptions);
  EXPECT_LE(tl.spec_accepted, tl.spec_proposed);
  EXPECT_GE(tl.spec_accepted, 0);
  if (run.max_draft == 0) {
    EXPECT_EQ(tl.spec_proposed, 0) << "drafts from a decoder with max_draft_tokens() == 0";
  }

  ASSERT_EQ(tl.steps.size(), run.steps.size());
  long long rows = 0, prefill = 0, decode = 0;
  for (std::size_t k = 0; k < tl.steps.size(); ++k) {
    const StepTimeline& st = tl.steps[k];
    SCOPED_TRACE("step " + std::to_string(k));
    EXPECT_EQ(st.rows, run.steps[k].rows);
    EXPECT_EQ(st.prefill_tokens + st.decode_tokens, st.rows) << "a row counted twice or not at all";
    EXPECT_LE(st.kv_blocks_reserved, run.num_blocks);
    rows += st.rows;
    prefill += st.prefill_tokens;
    decode += st.decode_tokens;
  }
  const long long n = static_cast<long long>(reqs.size());
  // Each request feeds every known token but its last output once, plus what preemption threw
  // away, plus the drafts that were verified and rejected, plus the rows of branches beyond
  // the first (beam search, n > 1).
  EXPECT_EQ(rows, prompts + outputs - n + run.recomputed + (tl.spec_proposed - tl.spec_accepted) + tl.branch_rows)
      << "prompts " << prompts << ", outputs " << outputs << ", recomputed " << run.recomputed << ", drafts "
      << tl.spec_proposed << " proposed / " << tl.spec_accepted << " accepted";
  EXPECT_GE(prefill, prompts);
  if (tl.preemptions == 0 && tl.spec_proposed == 0) {
    EXPECT_EQ(prefill, prompts);
    EXPECT_EQ(decode, outputs - n + tl.branch_rows);
  }
}

}  // namespace inferlab::testing
