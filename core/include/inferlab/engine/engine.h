// The step loop: admit arrivals, ask the scheduler what to run, let the decoder draft, flatten
// into one batch, execute it, accept tokens, finish requests, record the timeline. The loop is
// backend-free; only the execute stage differs, behind StepExecutor: the real model on a
// device today, a cost model (simulation) or a stub (scheduler tests) elsewhere.
// The clock measures each step's duration and fast-forwards idle gaps between arrivals.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "inferlab/plugin/attention.h"
#include "inferlab/plugin/decoder.h"
#include "inferlab/device/device.h"
#include "inferlab/kv/kv_cache.h"
#include "inferlab/results/metrics.h"
#include "inferlab/model/model.h"
#include "inferlab/plugin/scheduler.h"
#include "inferlab/workload/workload.h"

namespace inferlab {

// Runs one step's batch. The engine owns the block bookkeeping; the executor owns the K/V
// storage (if any) and applies the engine's block copies to it.
class StepExecutor {
 public:
  virtual ~StepExecutor() = default;
  virtual const ModelConfig& config() const = 0;
  virtual std::uint64_t weight_bytes() const = 0;
  // The device whose op timer every category is charged to (host strategies included).
  virtual Device& device() = 0;
  // Bytes of K/V storage one block takes (sizes the automatic pool).
  virtual std::uint64_t kv_bytes_per_block(int block_size) const;
  // Called once per run, before any step, with the pool the run uses.
  virtual void prepare(const KvCacheConfig& kv) = 0;
  // Applies `copies` (copy on write) to the K/V storage, then runs the batch and fills logits
  // [batch.logit_rows.size(), vocab] on the host. Returns the step's modelled duration in
  // seconds, or a negative value when the step really ran (the engine's clock measures it).
  virtual double execute(const StepBatch& batch, std::span<const BlockCopy> copies, std::vector<float>& logits) = 0;
  // Token choice on the device (Decoder::device_choice): whether execute_choosing runs here
  // (default: no, every step reads host logits).
  virtual bool chooses_tokens() const { return false; }
  // execute(), but instead of the logits, tokens [batch.logit_rows.size()]: logit row i's token
  // chosen by `choice` (with the uniform draws[i] for kSample). The default throws Error.
  virtual double execute_choosing(const StepBatch& batch, std::span<const BlockCopy> copies, const TokenChoice& choice,
                                  std::span<const double> draws, std::vector<int>& tokens);
  // The model's forward counters (host time, graph captures and replays); zeros for an
  // executor that runs no model (the simulator).
  virtual Model::ForwardStats forward_stats() const { return {}; }
};

// The real model with an attention strategy on the model's device.
class ModelExecutor final : public StepExecutor {
 public:
  ModelExecutor(Model& model, Attention& attention, KvFormat kv_format = {});
  const ModelConfig& config() const override { return model_.config(); }
  std::uint64_t weight_bytes() const override { return model_.weight_bytes(); }
  Device& device() override { return model_.device(); }
  std::uint64_t kv_bytes_per_block(int block_size) const override;
  void prepare(const KvCacheConfig& kv) override;
  double execute(const StepBatch& batch, std::span<const BlockCopy> copies, std::vector<float>& logits) override;
  // The model's device chooses (CPU: the reference; CUDA: the kernels) unless a layer plan exits early.
  bool chooses_tokens() const override { return model_.chooses_tokens(); }
  double execute_choosing(const StepBatch& batch, std::span<const BlockCopy> copies, const TokenChoice& choice,
                          std::span<const double> draws, std::vector<int>& tokens) override;
  Model::ForwardStats forward_stats() const override { return model_.forward_stats(); }
  KvStorage& storage() { return *storage_; }

 private:
  void apply_copies(std::span<const BlockCopy> copies);
  Model& model_;
  Attention& attention_;
  KvFormat kv_format_;
  std::unique_ptr<KvStorage> storage_;
};

// Cap of a KV pool the engine sizes itself (kv.num_blocks = 0).
inline constexpr long long kAutoKvPoolBytes = 1LL << 30;

struct EngineOptions {
  KvCacheConfig kv;            // num_blocks 0 = enough for every request at once, at most 1 GiB
  std::uint64_t seed = 0;      // per-request RNG = mix_seed(seed, request id)
  std::vector<int> stop_tokens;  // a request finishes early when it emits one (empty = never)
  // Monotonic seconds; measures step durations. Tests inject a fake one.
  std::function<double()> clock;
  // Called with (request id, token) as each token is accepted (streaming).
  std::function<void(int, int)> on_token;
  // Asked before every step; true ends the run by throwing Interrupted (SIGINT/SIGTERM).
  std::function<bool()> stop;
  // Per-request limits, any scheduler (0 = none). A request not yet scheduled queue_timeout_s
  // after its arrival, or not finished timeout_s after it, is aborted between two steps: it
  // leaves the queue or the batch, its KV blocks are freed before the next step is scheduled,
  // and its timeline says RequestStatus::kAborted. max_new_tokens caps every request's output;
  // a request cut by it finishes at the cap with RequestStatus::kTruncated.
  double queue_timeout_s = 0;
  double timeout_s = 0;
  int max_new_tokens = 0;
};

struct RunResult {
  RunTimeline timeline;
  std::vector<std::vector<int>> outputs;  // generated tokens, indexed like the requests
  // Branching decoders: every sequence each request returns, best first (outputs holds the
  // first); empty otherwise. Their tokens are emitted (on_token, token_times) at the end.
  std::vector<std::vector<BranchOutput>> sequences;
};

class Engine {
 public:
  Engine(StepExecutor& executor, Scheduler& scheduler, Decoder& decoder, EngineOptions options);
  // The real model: a ModelExecutor over `model` (on the model's device) and `attention`.
  Engine(Model& model, Attention& attention, Scheduler& scheduler, Decoder& decoder, EngineOptions options);
  ~Engine();
  // Runs every request to completion. Throws Error when a plugin breaks its contract or a
  // request can never fit in the KV pool.
  RunResult run(const std::vector<Request>& requests);

 private:
  std::unique_ptr<StepExecutor> owned_executor_;
  StepExecutor& executor_;
  Scheduler& scheduler_;
  Decoder& decoder_;
  EngineOptions options_;
};

}  // namespace inferlab
