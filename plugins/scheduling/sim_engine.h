// A tiny deterministic stand-in for the engine, shared by the scheduling plugins' tests.
// It applies ScheduleDecisions to SeqViews the way the real engine does (block accounting by
// SchedulerInput::blocks_to_grow, one generated token when a prefill completes, 1 + accepted
// drafts per decode step, recompute-style preemption) without any model, and checks the
// decision against the contract every step. Time advances one second per step.
#pragma once
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "inferlab/scheduler.h"

namespace inferlab::sim {

struct Request {
  int id = 0;
  double arrival_s = 0;
  int prompt = 0;
  int max_output = 0;
};

struct Config {
  int num_blocks = 64;
  int block_size = 16;
  bool reserve_full = false;
  int max_draft_tokens = 0;
  int max_steps = 100000;
  // Drafts accepted in a decode step of `drafts` drafts (clamped to [0, drafts]).
  std::function<int(int id, int step, int drafts)> accepted = [](int, int, int) { return 0; };
};

struct Result {
  std::vector<std::string> violations;  // contract breaches, with the step
  std::map<int, long long> tokens_processed;  // per request: tokens scheduled (drafts excluded)
  std::map<int, int> recomputed;              // per request: tokens dropped by preemption
  std::map<int, int> generated;               // per request at finish
  std::vector<int> finished;                  // in finishing order
  std::vector<int> rejected;                  // reported as never schedulable
  int steps = 0;
  int preemptions = 0;
  int peak_blocks = 0;
  int max_step_tokens = 0;
  int max_running = 0;
  bool stalled = false;  // gave up: nothing could advance
};

// Called before a decision is applied, e.g. to check scheduler-specific rules.
using Observer = std::function<void(int step, const SchedulerInput&, const ScheduleDecision&)>;

inline Result run(Scheduler& scheduler, std::vector<Request> requests, const Config& cfg,
                  const Observer& observe = {}) {
  Result r;
  std::sort(requests.begin(), requests.end(),
            [](const Request& a, const Request& b) { return a.arrival_s < b.arrival_s; });
  std::vector<SeqView> running, waiting;  // waiting: preempted first, then by arrival
  std::size_t next_arrival = 0;
  int free_blocks = cfg.num_blocks;
  int idle_steps = 0;
  auto fail = [&](int step, const std::string& what) {
    r.violations.push_back("step " + std::to_string(step) + ": " + what);
  };

  for (int step = 0; step < cfg.max_steps; ++step) {
    double now = step;
    while (next_arrival < requests.size() && requests[next_arrival].arrival_s <= now) {
      const Request& q = requests[next_arrival++];
      SeqView s;
      s.id = q.id;
      s.arrival_s = q.arrival_s;
      s.prompt_len = q.prompt;
      s.max_output = q.max_output;
      s.num_tokens = q.prompt;
      waiting.push_back(s);
    }
    if (running.empty() && waiting.empty()) {
      if (next_arrival == requests.size()) break;
      continue;  // idle gap
    }

    SchedulerInput in;
    in.now_s = now;
    in.running = running;
    in.waiting = waiting;
    in.free_blocks = free_blocks;
    in.block_size = cfg.block_size;
    in.reserve_full = cfg.reserve_full;
    in.max_draft_tokens = cfg.max_draft_tokens;
    ScheduleDecision d = scheduler.schedule(in);
    if (observe) observe(step, in, d);
    r.steps = step + 1;

    // Preemptions: free blocks, forget computed K/V, back to the front of waiting.
    std::vector<SeqView> preempted;
    for (int id : d.preempt) {
      auto it = std::find_if(running.begin(), running.end(), [&](const SeqView& s) { return s.id == id; });
      if (it == running.end()) { fail(step, "preempted id " + std::to_string(id) + " not running"); continue; }
      SeqView s = *it;
      running.erase(it);
      free_blocks += s.blocks_held;
      r.recomputed[id] += s.num_computed;
      s.num_computed = 0;
      s.blocks_held = 0;
      preempted.push_back(s);
      ++r.preemptions;
    }
    waiting.insert(waiting.begin(), preempted.begin(), preempted.end());

    // Admissions and block growth.
    std::set<int> seen;
    int step_tokens = 0;
    std::vector<std::pair<SeqView*, int>> work;
    for (const ScheduledSeq& sc : d.scheduled) {
      if (!seen.insert(sc.id).second) { fail(step, "id scheduled twice"); continue; }
      auto find = [&](std::vector<SeqView>& v) {
        return std::find_if(v.begin(), v.end(), [&](const SeqView& s) { return s.id == sc.id; });
      };
      auto it = find(running);
      if (it == running.end()) {
        auto w = find(waiting);
        if (w == waiting.end()) { fail(step, "scheduled unknown id " + std::to_string(sc.id)); continue; }
        running.push_back(*w);
        waiting.erase(w);
      }
    }
    for (const ScheduledSeq& sc : d.scheduled) {
      auto it = std::find_if(running.begin(), running.end(), [&](const SeqView& s) { return s.id == sc.id; });
      if (it == running.end()) continue;
      SeqView& s = *it;
      int limit = s.in_decode() ? 1 + cfg.max_draft_tokens : s.pending();
      if (sc.num_tokens < 1 || sc.num_tokens > limit) {
        fail(step, "id " + std::to_string(s.id) + " scheduled " + std::to_string(sc.num_tokens) +
                       " tokens, allowed 1.." + std::to_string(limit));
        continue;
      }
      int need = in.blocks_to_grow(s, sc.num_tokens);
      free_blocks -= need;
      s.blocks_held += need;
      step_tokens += sc.num_tokens;
    }
    if (free_blocks < 0) fail(step, "KV pool overcommitted by " + std::to_string(-free_blocks));
    r.peak_blocks = std::max(r.peak_blocks, cfg.num_blocks - free_blocks);
    r.max_step_tokens = std::max(r.max_step_tokens, step_tokens);
    r.max_running = std::max(r.max_running, static_cast<int>(running.size()));

    // Run the "model".
    for (const ScheduledSeq& sc : d.scheduled) {
      auto it = std::find_if(running.begin(), running.end(), [&](const SeqView& s) { return s.id == sc.id; });
      if (it == running.end()) continue;
      SeqView& s = *it;
      if (s.in_decode()) {
        int drafts = sc.num_tokens - 1;
        int a = std::clamp(cfg.accepted(s.id, step, drafts), 0, drafts);
        a = std::min(a, s.max_output - s.generated - 1);
        r.tokens_processed[s.id] += 1 + a;  // rejected drafts' K/V are rolled back
        s.num_computed += 1 + a;
        s.generated += 1 + a;
        s.num_tokens += 1 + a;
      } else {
        r.tokens_processed[s.id] += sc.num_tokens;
        s.num_computed += sc.num_tokens;
        if (s.num_computed == s.num_tokens) {  // prompt done: the first (or next) token
          s.generated += 1;
          s.num_tokens += 1;
        }
      }
    }
    for (auto it = running.begin(); it != running.end();) {
      if (it->generated >= it->max_output) {
        free_blocks += it->blocks_held;
        r.generated[it->id] = it->generated;
        r.finished.push_back(it->id);
        it = running.erase(it);
      } else {
        ++it;
      }
    }

    if (d.scheduled.empty()) {
      if (in.running.empty() && !waiting.empty()) {
        // The engine reports the head request as never schedulable and drops it.
        r.rejected.push_back(waiting.front().id);
        waiting.erase(waiting.begin());
      } else if (++idle_steps > 3) {
        r.stalled = true;
        break;
      }
    } else {
      idle_steps = 0;
    }
  }
  return r;
}

}  // namespace inferlab::sim
