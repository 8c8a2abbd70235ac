// Plugin descriptor for the flash attention strategy (class in flash_attention.h).
#include <memory>
#include <optional>

#include "flash_attention.h"
#include "inferlab/plugin.h"
#if INFERLAB_HAVE_CUDA
#include <string>
#include <vector>

#include "kernels/cuda/attention.h"
#endif

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
       "CPU: a one-row item (decode) whose GQA group fits a machine vector scores K in place with the group in "
       "the vector's lanes; false: per-vector dot products or a transposed K tile (the ablation of that path)"},
  };
  d.devices = {inferlab::DeviceKind::kCpu};
#if INFERLAB_HAVE_CUDA
  d.devices.push_back(inferlab::DeviceKind::kCuda);  // the kernels of kernels/cuda
#endif
#if INFERLAB_HAVE_CUDA
  // On CUDA a thread block holds query_rows x group queries and a K/V tile in shared memory.
  d.supports = [](const inferlab::SupportQuery& q) {
    std::vector<std::string> reasons;
    if (q.device == inferlab::DeviceKind::kCuda && !q.params.get_bool("lanes"))
      reasons.push_back("lanes = false changes only the CPU kernels (allowed on cuda: lanes = true)");
    if (q.device != inferlab::DeviceKind::kCuda || q.model.n_kv_heads <= 0) return reasons;
    const auto rows = static_cast<int>(q.params.get_int("query_rows"));
    const auto tile = static_cast<int>(q.params.get_int("tile"));
    const std::size_t bytes = inferlab::cuda::tiled_attention_shared_bytes(
        rows, q.model.n_heads / q.model.n_kv_heads, tile, q.model.head_dim());
    if (bytes > inferlab::cuda::kSm90SharedBytesPerBlock)
      reasons.push_back("on cuda, query_rows " + std::to_string(rows) + " x " +
                        std::to_string(q.model.n_heads / q.model.n_kv_heads) + " heads and tile " +
                        std::to_string(tile) + " at head_dim " + std::to_string(q.model.head_dim()) + " need " +
                        std::to_string(bytes) + " bytes of shared memory per block; sm_90 allows " +
                        std::to_string(inferlab::cuda::kSm90SharedBytesPerBlock) + " (lower tile or query_rows)");
    return reasons;
  };
#endif
  d.kv_dtypes = {inferlab::KvDtype::kF32, inferlab::KvDtype::kInt8, inferlab::KvDtype::kInt4};
  d.make_attention = [](const inferlab::PluginContext& ctx) -> std::unique_ptr<inferlab::Attention> {
    return std::make_unique<FlashAttention>(static_cast<int>(ctx.params.get_int("tile")),
                                            static_cast<int>(ctx.params.get_int("query_rows")),
                                            ctx.params.get_bool("lanes"));
  };
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe_flash)
