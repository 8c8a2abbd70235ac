// Plugin descriptor for the naive attention strategy (class in naive_attention.h).
#include <memory>

#include "inferlab/plugin/plugin.h"
#include "naive_attention.h"
#include "naive_attention_cuda.h"

namespace {

inferlab::PluginDescriptor describe_naive() {
  inferlab::PluginDescriptor d;
  d.kind = inferlab::PluginKind::kAttention;
  d.name = "naive";
  d.version = "1.0.0";
  d.summary = "Paged attention that materialises each score row, softmax, then V sum";
  d.kv_dtypes = {inferlab::KvDtype::kF32, inferlab::KvDtype::kF16, inferlab::KvDtype::kBf16, inferlab::KvDtype::kInt8,
                 inferlab::KvDtype::kInt4};
  d.devices = {{inferlab::DeviceKind::kCpu, [](const inferlab::PluginContext&) {
                  return std::make_unique<inferlab::plugins::NaiveAttention>();
                }}};
#if INFERLAB_HAVE_CUDA
  d.devices.emplace(inferlab::DeviceKind::kCuda, inferlab::plugins::naive_cuda());  // naive_attention_cuda.cpp
#endif
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe_naive)
