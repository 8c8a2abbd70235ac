// Decode steps under CUDA graphs ([device] cuda_graphs = true; see inferlab/device/step_graph.h).
//
// A decode step is padded to its bucket (padded_decode_step). Its inputs are staged outside any
// graph: begin_pass grows the scratch, uploads positions, slots, query starts, context lengths
// and the block table into the model's device buffers, and embeds the tokens into x (the
// embedding rows are dequantised on the host). The rest — every layer, the final norm and the
// classifier into the device logits — is the graph's body: run eagerly once at the padded shape
// (so every scratch and workspace has grown), captured the next time, replayed after. Only the
// first n_seqs rows of logits are downloaded, the step's one wait for the GPU. A choosing step
// (forward_choosing) stages its draws [bucket] beside the other inputs, its body ends with
// choose_tokens into the static token buffer [bucket], and only n_seqs token ids are downloaded;
// the choice (kind, temperature) is part of the GraphKey.
#include <numeric>

#include "inferlab/error.h"
#include "inferlab/model/model.h"
#include "inferlab/support/log.h"
#include "model/model_pass.h"

namespace inferlab {

void Model::graph_body(Pass& p, const StepBatch& padded, KvStorage& kv, Attention& attention,
                       const Choosing* choosing) {
  std::vector<float> no_logits;  // no layer plan: no early exit writes logits
  run_layers(p, padded, kv, attention, no_logits);
  if (choosing != nullptr)  // reads the staged draws, writes the static token buffer
    choose_rows_on_device(p.x, graph_rows_, choosing->choice, d_draws_ptr_);
  else
    classify_rows_on_device(p.x, graph_rows_);
}

bool Model::graph_step(const StepBatch& batch, KvStorage& kv, Attention& attention, std::vector<float>& logits,
                       const Choosing* choosing) {
  if (plan_ != nullptr || !attention.graph_capturable() || !is_decode_step(batch)) return false;
  const int bucket = graph_batch_bucket(batch.n_seqs());
  if (bucket == 0) return false;
  const StepBatch padded = padded_decode_step(batch, bucket, graph_block_width(batch.max_blocks));
  graph_rows_.resize(static_cast<std::size_t>(bucket));
  std::iota(graph_rows_.begin(), graph_rows_.end(), 0);
  Pass p = begin_pass(padded);  // staged before the epoch is read: staging may grow a buffer
  const std::size_t sbucket = static_cast<std::size_t>(bucket);
  if (choosing != nullptr) {  // the choice's static input and output, staged likewise
    d_draws_ptr_ = stage_draws(choosing->draws, sbucket);
    token_scratch(sbucket);
  }
  const GraphKey key{this,     &kv, &attention, p.fuse, bucket, padded.max_blocks, kv.format(),
                     choosing != nullptr ? choosing->choice : TokenChoice{}};
  switch (graphs_.plan(key, device_.memory_epoch())) {
    case GraphCache::Action::kReplay:
      graphs_.replay(key).replay();
      break;
    case GraphCache::Action::kWarm:
      graph_body(p, padded, kv, attention, choosing);
      graphs_.warmed(key, device_.memory_epoch());
      break;
    case GraphCache::Action::kEager:
      graph_body(p, padded, kv, attention, choosing);
      break;
    case GraphCache::Action::kCapture: {
      std::unique_ptr<StepGraph> graph;
      std::string reason;
      try {
        device_.begin_capture();
        graph_body(p, padded, kv, attention, choosing);
        graph = device_.end_capture(reason);
      } catch (const Error& e) {
        device_.abort_capture();
        reason = e.what();
      }
      const bool ok = graph != nullptr;
      graphs_.captured(key, std::move(graph), device_.memory_epoch());
      if (ok) {
        graphs_.replay(key).replay();
      } else {
        if (reason != graph_failure_) log::warn("cuda graphs: a decode step of " + std::to_string(bucket) +
                                                " sequences runs eagerly: " + reason);
        graph_failure_ = reason;
        Pass again = begin_pass(padded);  // nothing captured ran: the step from its inputs
        if (choosing != nullptr) d_draws_ptr_ = stage_draws(choosing->draws, sbucket);
        graph_body(again, padded, kv, attention, choosing);
      }
      break;
    }
  }
  host_mark_s_ = steady_s();
  const std::size_t n = static_cast<std::size_t>(batch.n_seqs());
  if (choosing != nullptr) {  // only the token ids cross to the host
    device_.copy_to_host(choosing->tokens->data(), d_tokens_.data(), n * sizeof(int));
    return true;
  }
  device_.copy_to_host(logits.data(), logits_.data(), n * static_cast<std::size_t>(config_.vocab_size) * sizeof(float));
  return true;
}

}  // namespace inferlab
