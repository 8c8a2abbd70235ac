// Plugin descriptor for the naive attention strategy (class in naive_attention.h).
#include <memory>

#include "inferlab/plugin.h"
#include "naive_attention.h"

namespace {

inferlab::PluginDescriptor describe_naive() {
  inferlab::PluginDescriptor d;
  d.kind = inferlab::PluginKind::kAttention;
  d.name = "naive";
  d.version = "1.0.0";
  d.summary = "Paged attention that materialises each score row, softmax, then V sum";
  d.devices = {inferlab::DeviceKind::kCpu};
#if INFERLAB_HAVE_CUDA
  d.devices.push_back(inferlab::DeviceKind::kCuda);  // the kernels of kernels/cuda
#endif
  d.kv_dtypes = {inferlab::KvDtype::kF32, inferlab::KvDtype::kInt8, inferlab::KvDtype::kInt4};
  d.make_attention = [](const inferlab::PluginContext&) -> std::unique_ptr<inferlab::Attention> {
    return std::make_unique<inferlab::plugins::NaiveAttention>();
  };
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe_naive)
