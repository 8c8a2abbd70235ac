// Plugin descriptor for the split-K (Flash-Decoding) attention strategy (split_k_attention.h).
#include <memory>

#include "inferlab/plugin.h"
#if INFERLAB_HAVE_CUDA
#include <string>
#include <vector>

#include "kernels/cuda/attention.h"
#include "partial_attention.h"
#endif
#include "split_k_attention.h"

namespace {

inferlab::PluginDescriptor describe_split_k() {
  using inferlab::plugins::SplitKAttention;
  inferlab::PluginDescriptor d;
  d.kind = inferlab::PluginKind::kAttention;
  d.name = "split_k";
  d.version = "1.0.0";
  d.summary =
      "Split-K decode attention (Flash-Decoding): long K/V ranges of few-row sequences split "
      "into chunks run in parallel, merged by log-sum-exp; prefill chunks tiled";
  d.params = {
      {"splits", inferlab::ParamType::kInt, std::int64_t{SplitKAttention::kAutoSplits}, 0.0,
       static_cast<double>(SplitKAttention::kMaxSplits), {},
       "K/V chunks per decode/verify sequence (capped at its context length); 0 = auto: enough "
       "for 4 items per thread, each chunk at least min_split_tokens"},
      {"min_split_tokens", inferlab::ParamType::kInt,
       std::int64_t{SplitKAttention::kDefaultMinSplitTokens}, 1.0, 1048576.0, {},
       "smallest chunk the automatic split count makes (ignored when splits > 0)"},
      {"max_query_rows", inferlab::ParamType::kInt,
       std::int64_t{SplitKAttention::kDefaultMaxQueryRows}, 1.0, 4096.0, {},
       "a sequence with at most this many query rows is split; more rows (prefill) run tiled "
       "without splitting"},
  };
  d.devices = {inferlab::DeviceKind::kCpu};
#if INFERLAB_HAVE_CUDA
  d.devices.push_back(inferlab::DeviceKind::kCuda);  // the kernels of kernels/cuda
#endif
#if INFERLAB_HAVE_CUDA
  // On CUDA a thread block holds 16 rows x group queries and a 64-position K/V tile in shared memory.
  d.supports = [](const inferlab::SupportQuery& q) {
    std::vector<std::string> reasons;
    if (q.device != inferlab::DeviceKind::kCuda || q.model.n_kv_heads <= 0) return reasons;
    const std::size_t bytes = inferlab::cuda::tiled_attention_shared_bytes(
        SplitKAttention::kPrefillRowBlock, q.model.n_heads / q.model.n_kv_heads,
        inferlab::plugins::split_k::kPositionTile, q.model.head_dim());
    if (bytes > inferlab::cuda::kSm90SharedBytesPerBlock)
      reasons.push_back("on cuda, " + std::to_string(q.model.n_heads / q.model.n_kv_heads) +
                        " query heads per kv head at head_dim " + std::to_string(q.model.head_dim()) + " need " +
                        std::to_string(bytes) + " bytes of shared memory per block; sm_90 allows " +
                        std::to_string(inferlab::cuda::kSm90SharedBytesPerBlock));
    return reasons;
  };
#endif
  d.kv_dtypes = {inferlab::KvDtype::kF32, inferlab::KvDtype::kInt8, inferlab::KvDtype::kInt4};
  d.make_attention = [](const inferlab::PluginContext& ctx) -> std::unique_ptr<inferlab::Attention> {
    return std::make_unique<SplitKAttention>(static_cast<int>(ctx.params.get_int("splits")),
                                             static_cast<int>(ctx.params.get_int("min_split_tokens")),
                                             static_cast<int>(ctx.params.get_int("max_query_rows")));
  };
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe_split_k)
