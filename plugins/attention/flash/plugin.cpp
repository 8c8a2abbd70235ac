// Plugin descriptor for the flash attention strategy (class in flash_attention.h).
#include <memory>

#include "flash_attention.h"
#include "inferlab/plugin.h"

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
  };
  d.devices = {inferlab::DeviceKind::kCpu};
#if INFERLAB_HAVE_CUDA
  d.devices.push_back(inferlab::DeviceKind::kCuda);  // the kernels of kernels/cuda
#endif
  d.kv_dtypes = {inferlab::KvDtype::kF32, inferlab::KvDtype::kInt8};
  d.make_attention = [](const inferlab::PluginContext& ctx) -> std::unique_ptr<inferlab::Attention> {
    return std::make_unique<FlashAttention>(static_cast<int>(ctx.params.get_int("tile")),
                                            static_cast<int>(ctx.params.get_int("query_rows")));
  };
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe_flash)
