// The timed tests of inferlab bench (see bench.h): each run gets a fresh paged KV cache sized
// for it, fills any context untimed, then times only the forwards the test names.
#include <chrono>

#include "bench.h"
#include "inferlab/engine/batch.h"
#include "inferlab/kv/block_manager.h"
#include "inferlab/error.h"
#include "inferlab/kv/kv_storage.h"
#include "inferlab/support/rng.h"

namespace inferlab::cli {

std::string BenchTest::name() const {
  switch (kind) {
    case Kind::kPrompt: return "pp" + std::to_string(n_prompt);
    case Kind::kGen: return "tg" + std::to_string(n_gen);
    case Kind::kBatchedGen:
      return "tg" + std::to_string(n_gen) + " x" + std::to_string(batch) + " @ d" + std::to_string(depth);
  }
  return "?";
}

int BenchTest::tokens() const {
  switch (kind) {
    case Kind::kPrompt: return n_prompt;
    case Kind::kGen: return n_gen;
    case Kind::kBatchedGen: return batch * n_gen;
  }
  return 0;
}

double run_bench_test(Model& model, Attention& attention, const BenchTest& test, std::uint64_t seed,
                      double& bytes_read, bool device_choice) {
  const ModelConfig& cfg = model.config();
  const int seqs = test.kind == BenchTest::Kind::kBatchedGen ? test.batch : 1;
  const int length = test.kind == BenchTest::Kind::kPrompt ? test.n_prompt
                     : test.kind == BenchTest::Kind::kGen  ? test.n_gen
                                                           : test.depth + test.n_gen;
  KvCacheConfig kc;
  kc.block_size = 16;
  kc.num_blocks = seqs * ((length + kc.block_size - 1) / kc.block_size);
  BlockManager kv(kc);
  KvStorage storage(model.device(), cfg, kc.num_blocks, kc.block_size);
  std::vector<BlockCopy> copies;  // private sequences: never any
  for (int s = 0; s < seqs; ++s)
    if (!kv.reserve(s, length, copies)) throw Error("bench: KV pool too small for " + test.name());
  Rng rng(seed);
  std::vector<int> tokens;  // [rows of one sequence]
  auto random_tokens = [&](int n, bool bos_first) {
    tokens.resize(static_cast<std::size_t>(n));
    for (int& t : tokens) t = static_cast<int>(rng.uniform_int(3, cfg.vocab_size));
    if (bos_first && n > 0) tokens[0] = cfg.bos_id;
    return std::span<const int>(tokens);
  };
  StepBatch b;
  std::vector<float> logits;  // [logit rows, vocab]
  const double weight_bytes = static_cast<double>(model.weight_bytes() - model.embedding_bytes());
  const double kv_token_bytes = static_cast<double>(KvStorage::bytes_per_token(cfg, KvFormat{}));
  using Clock = std::chrono::steady_clock;

  if (test.kind == BenchTest::Kind::kPrompt) {
    b.add_sequence(random_tokens(test.n_prompt, true), 0, kv.block_table(0), kc.block_size, test.n_prompt - 1,
                   test.n_prompt);
    const auto t0 = Clock::now();
    model.forward(b, storage, attention, logits);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    bytes_read = weight_bytes + kv_token_bytes * test.n_prompt;
    return s;
  }
  // Context each sequence holds before the timed steps.
  const int depth = test.kind == BenchTest::Kind::kBatchedGen ? test.depth : 0;
  for (int s = 0; s < seqs && depth > 0; ++s) {
    b.clear();
    b.add_sequence(random_tokens(depth, true), 0, kv.block_table(s), kc.block_size, depth - 1, depth);
    model.forward(b, storage, attention, logits);
  }
  double seconds = 0;
  bytes_read = 0;
  const TokenChoice greedy{TokenChoice::Kind::kArgmax, 0.0};
  const std::vector<double> draws(static_cast<std::size_t>(seqs), 0.0);  // (argmax reads none)
  std::vector<int> chosen;                                               // [seqs]
  for (int step = 0; step < test.n_gen; ++step) {
    b.clear();
    for (int s = 0; s < seqs; ++s)
      b.add_sequence(random_tokens(1, depth == 0 && step == 0), depth + step, kv.block_table(s), kc.block_size, 0, 1);
    const auto t0 = Clock::now();
    if (device_choice)
      model.forward_choosing(b, storage, attention, greedy, draws, chosen);
    else
      model.forward(b, storage, attention, logits);
    seconds += std::chrono::duration<double>(Clock::now() - t0).count();
    bytes_read += weight_bytes + kv_token_bytes * seqs * (depth + step + 1);
  }
  return seconds;
}

}  // namespace inferlab::cli
