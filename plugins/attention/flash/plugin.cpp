// Plugin descriptor for the flash attention strategy (class in flash_attention.h).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "flash_attention.h"
#include "flash_attention_cuda.h"
#include "inferlab/plugin/plugin.h"

namespace {

inferlab::PluginDescriptor describe_flash() {
  using inferlab::plugins::FlashAttention;
  inferlab::PluginDescriptor d;
  d.kind = inferlab::PluginKind::kAttention;
  d.name = "flash";
  d.version = "1.0.0";
  d.summary = "Tiled paged attention with online softmax (FlashAttention-2 style)";
  d.params = {
      {"tile", inferlab::ParamType::kInt, std::int64_t{FlashAttention::kDefaultTile}, 1.0, 4096.0,
       {}, "K/V tokens streamed per tile; each tile is read once for all query rows it serves"},
      {"query_rows", inferlab::ParamType::kInt, std::int64_t{FlashAttention::kDefaultQueryRows},
       1.0, 1024.0, {},
       "query rows of one sequence processed together (times the GQA group) per K/V pass"},
      {"lanes", inferlab::ParamType::kBool, true, std::nullopt, std::nullopt, {},
       "CPU: a one-row item (decode) whose GQA group fits a machine vector (with AVX-512: groups of 3 or more) "
       "scores K in place with the group in the vector's lanes; false: per-vector dot products or a transposed K tile (the ablation of that path)"},
      {"decode_split", inferlab::ParamType::kBool, true, std::nullopt, std::nullopt, {},
       "CUDA: a sequence whose rows fit one item (decode, speculative verify) is split over its context into "
       "chunks chosen from the context length and the SM count, merged by a second kernel (FlashDecoding); "
       "false: one thread block per kv head (the ablation of that path)"},
  };
  d.kv_dtypes = {inferlab::KvDtype::kF32, inferlab::KvDtype::kF16, inferlab::KvDtype::kBf16, inferlab::KvDtype::kInt8,
                 inferlab::KvDtype::kInt4};
  // decode_split changes only the CUDA path: the CPU kernels refuse false rather than ignore it.
  auto cpu_supports = [](const inferlab::SupportQuery& q) {
    std::vector<std::string> reasons;
    if (!q.params.get_bool("decode_split"))
      reasons.push_back("decode_split = false changes only the CUDA kernels (allowed on cpu: decode_split = true)");
    return reasons;
  };
  d.devices = {{inferlab::DeviceKind::kCpu, inferlab::DeviceImpl(
                                                [](const inferlab::PluginContext& ctx) {
                                                  return std::make_unique<FlashAttention>(
                                                      static_cast<int>(ctx.params.get_int("tile")),
                                                      static_cast<int>(ctx.params.get_int("query_rows")),
                                                      ctx.params.get_bool("lanes"));
                                                },
                                                cpu_supports)}};
#if INFERLAB_HAVE_CUDA
  d.devices.emplace(inferlab::DeviceKind::kCuda, inferlab::plugins::flash_cuda());  // flash_attention_cuda.cpp
#endif
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe_flash)
