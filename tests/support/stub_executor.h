// A StepExecutor without a model, for driving the real Engine in scheduler and decoder tests:
// each row's logits put all their mass on a token that depends only on the row's token and
// position (so greedy outputs do not depend on batching, chunking, preemption or speculation),
// every step is recorded, and its duration is modelled (a cost function of the batch) so the
// engine's timeline is deterministic without a fake clock.
#pragma once
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "inferlab/device/device.h"
#include "inferlab/engine/engine.h"
#include "inferlab/model/model_config.h"

namespace inferlab::testing {

struct StubStep {
  int rows = 0;
  int seqs = 0;
  std::vector<int> context_len;  // per sequence
  std::vector<int> query_rows;   // per sequence
  int block_copies = 0;
};

class StubExecutor final : public StepExecutor {
 public:
  // duration(batch) in seconds; the default charges 1 ms per step plus 10 us per row.
  explicit StubExecutor(ModelConfig config, std::function<double(const StepBatch&)> duration = {});

  const ModelConfig& config() const override { return config_; }
  std::uint64_t weight_bytes() const override { return 0; }
  Device& device() override { return *device_; }
  void prepare(const KvCacheConfig& kv) override;
  double execute(const StepBatch& batch, std::span<const BlockCopy> copies, std::vector<float>& logits) override;

  // The token the stub predicts after `token` at `position`.
  int next_token(int token, int position) const;

  const std::vector<StubStep>& steps() const { return steps_; }
  const KvCacheConfig& kv_config() const { return kv_; }
  // Contract breaches seen in the batches (a KV slot written twice in one step, a slot outside
  // the pool, positions that are not the sequence's next ones), with the step number.
  const std::vector<std::string>& violations() const { return violations_; }

 private:
  ModelConfig config_;
  std::function<double(const StepBatch&)> duration_;
  std::unique_ptr<CpuDevice> device_;
  KvCacheConfig kv_;
  std::vector<StubStep> steps_;
  std::vector<std::string> violations_;
};

// A tiny model shape for the stub (vocab 64).
ModelConfig stub_model_config(int vocab = 64);

}  // namespace inferlab::testing
