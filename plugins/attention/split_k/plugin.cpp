// Plugin descriptor for the split-K (Flash-Decoding) attention strategy (split_k_attention.h).
#include <memory>

#include "inferlab/plugin/plugin.h"
#include "split_k_attention.h"
#include "split_k_attention_cuda.h"

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
  d.kv_dtypes = {inferlab::KvDtype::kF32, inferlab::KvDtype::kF16, inferlab::KvDtype::kBf16, inferlab::KvDtype::kInt8,
                 inferlab::KvDtype::kInt4};
  d.devices = {{inferlab::DeviceKind::kCpu, [](const inferlab::PluginContext& ctx) {
                  return std::make_unique<SplitKAttention>(static_cast<int>(ctx.params.get_int("splits")),
                                                           static_cast<int>(ctx.params.get_int("min_split_tokens")),
                                                           static_cast<int>(ctx.params.get_int("max_query_rows")));
                }}};
#if INFERLAB_HAVE_CUDA
  d.devices.emplace(inferlab::DeviceKind::kCuda, inferlab::plugins::split_k_cuda());  // split_k_attention_cuda.cpp
#endif
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe_split_k)
