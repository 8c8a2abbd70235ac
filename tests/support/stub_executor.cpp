#include "stub_executor.h"

#include <algorithm>

namespace inferlab::testing {

ModelConfig stub_model_config(int vocab) {
  ModelConfig c{.name = "stub", .dim = 8, .hidden_dim = 16, .n_layers = 1, .n_heads = 2, .n_kv_heads = 1,
                .vocab_size = vocab, .max_seq_len = 1 << 20};
  return c;
}

StubExecutor::StubExecutor(ModelConfig config, std::function<double(const StepBatch&)> duration)
    : config_(std::move(config)), duration_(std::move(duration)), device_(std::make_unique<CpuDevice>(1)) {
  if (!duration_) duration_ = [](const StepBatch& b) { return 1e-3 + 1e-5 * b.rows(); };
}

void StubExecutor::prepare(const KvCacheConfig& kv) { kv_ = kv; }

int StubExecutor::next_token(int token, int position) const {
  // Never 0..2 (kept free for stop tokens in tests), otherwise a hash of (token, position).
  const unsigned h = static_cast<unsigned>(token) * 2654435761u + static_cast<unsigned>(position) * 40503u;
  return 3 + static_cast<int>((h >> 7) % static_cast<unsigned>(config_.vocab_size - 3));
}

double StubExecutor::execute(const StepBatch& batch, std::span<const BlockCopy> copies, std::vector<float>& logits) {
  const int step = static_cast<int>(steps_.size());
  StubStep rec;
  rec.rows = batch.rows();
  rec.seqs = batch.n_seqs();
  rec.block_copies = static_cast<int>(copies.size());
  std::set<int> slots;
  const long long pool_slots = static_cast<long long>(kv_.num_blocks) * kv_.block_size;
  for (int s = 0; s < batch.n_seqs(); ++s) {
    const int r0 = batch.query_start[static_cast<std::size_t>(s)], r1 = batch.query_start[static_cast<std::size_t>(s) + 1];
    rec.context_len.push_back(batch.context_len[static_cast<std::size_t>(s)]);
    rec.query_rows.push_back(r1 - r0);
    for (int r = r0; r < r1; ++r) {
      const int slot = batch.slots[static_cast<std::size_t>(r)];
      if (!slots.insert(slot).second)
        violations_.push_back("step " + std::to_string(step) + ": KV slot " + std::to_string(slot) + " written twice");
      if (slot < 0 || slot >= pool_slots)
        violations_.push_back("step " + std::to_string(step) + ": KV slot " + std::to_string(slot) + " outside the pool");
      const int want = batch.context_len[static_cast<std::size_t>(s)] - (r1 - r);
      if (batch.positions[static_cast<std::size_t>(r)] != want)
        violations_.push_back("step " + std::to_string(step) + ": row " + std::to_string(r) + " at position " +
                              std::to_string(batch.positions[static_cast<std::size_t>(r)]) + ", expected " +
                              std::to_string(want));
    }
  }
  steps_.push_back(std::move(rec));
  const std::size_t vocab = static_cast<std::size_t>(config_.vocab_size);
  logits.assign(batch.logit_rows.size() * vocab, -10.0f);
  for (std::size_t i = 0; i < batch.logit_rows.size(); ++i) {
    const int r = batch.logit_rows[i];
    const int t = next_token(batch.tokens[static_cast<std::size_t>(r)], batch.positions[static_cast<std::size_t>(r)]);
    logits[i * vocab + static_cast<std::size_t>(t)] = 10.0f;
  }
  return duration_(batch);
}

}  // namespace inferlab::testing
