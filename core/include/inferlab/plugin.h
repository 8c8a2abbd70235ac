// The plugin contract. Every strategy (built-ins too) is a shared library exporting, through
// INFERLAB_PLUGIN, two symbols: the ABI version (an int, checked before anything else is
// touched) and a descriptor with kind, name, version, summary, typed parameters, devices,
// a capability check and a factory.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/dll/alias.hpp>

#include "inferlab/attention.h"
#include "inferlab/decoder.h"
#include "inferlab/device.h"
#include "inferlab/model_config.h"
#include "inferlab/params.h"
#include "inferlab/quantization.h"
#include "inferlab/scheduler.h"
#include "inferlab/weights.h"

namespace inferlab {

// Bump when any interface in plugin.h or the headers it includes changes incompatibly.
// 2: the device seam. 3: per-sequence decoder calls, the run's weights/attention/registry in
// PluginContext, SeqView::slo_class and ScheduleDecision::reject, and Quantization's
// calibration_needs() and make_linear overload taking calibration (new virtuals change the vtable
// an old plugin was built with). 4: branching decoders (Decoder::branch_width/branch/
// branch_result), SeqView::branches, Decoder::layer_plan (layer skipping, early exit),
// Device::kv_write_int8 and a virtual Device::op_times (the CUDA device). 5: ModelWeights::
// source_blocks and ModelConfig::source_linear_types (a GGUF's own blocks and their types),
// Linear::dequantize_row (pure: the tied embedding reads the classifier's rows) and
// forward_act_blocks/reads_act_blocks (fused activation quantisation), Device::set_fuse and the
// fused ops, SchedulerInput/KvCacheConfig reservation + max_seq_len (replacing reserve_full).
// 6: lazy matrices: a GGUF's block-quantized ones held only as shared blocks (LayerWeights::
// blocks, ModelWeights::table_blocks), a preset's as seeds (LayerWeights::seeded,
// ModelWeights::table_seeded), read by ModelWeights::source_blocks(name) / matrix(name);
// Quantization::needs_values (a strategy that runs the blocks skips their dequantisation) and
// Quantization::planned_bytes (the memory estimate's size of a linear). 7: what the simulator
// charges a strategy: Quantization::arithmetic (LinearArithmetic) and Attention::traffic
// (AttentionTraffic), new virtuals; the scheduler's KV view counts shared blocks
// (SeqView::blocks_shared, SchedulerInput::total_blocks) and ParamSpec can declare a path.
inline constexpr int kPluginAbiVersion = 7;

enum class PluginKind { kAttention, kQuantization, kScheduling, kDecoding };
const char* plugin_kind_name(PluginKind kind);
// "attention", "quantization", "scheduling" (or "scheduler"), "decoding" (or "decoder").
bool parse_plugin_kind(const std::string& text, PluginKind& kind);

// What a capability check is asked about.
struct SupportQuery {
  const ModelConfig& model;
  DeviceKind device = DeviceKind::kCpu;
  KvFormat kv_format = {};  // the variant's [kv] format
  const Params& params;
};

// What a factory gets: the checked parameters (defaults filled), the device the object will
// run on (its memory, its ops, its thread pool on the CPU) and, for strategies that build a
// second model (a speculative draft) or run the checkpoint's own blocks (quantization/gguf), the
// run's weights and attention strategy — null where the caller has none (planning, tools).
class Registry;

struct PluginContext {
  const Params& params;
  Device& device;
  const ModelWeights* weights = nullptr;
  Attention* attention = nullptr;
  // The registry that is creating this object, for strategies built from other strategies (a
  // draft model quantised by a quantization plugin). Null when constructed outside a registry.
  const Registry* registry = nullptr;
};

struct PluginDescriptor {
  PluginKind kind = PluginKind::kAttention;
  std::string name;
  std::string version;
  std::string summary;
  std::vector<ParamSpec> params;
  std::vector<DeviceKind> devices = {DeviceKind::kCpu};  // where it can run
  // attention: the KV dtypes it can read, on either side (K, V) of any layer
  std::vector<KvDtype> kv_dtypes = {KvDtype::kF32};
  // Reasons it cannot run this problem (empty = supported). Optional; device and KV dtype are
  // checked by the registry from the lists above.
  std::function<std::vector<std::string>(const SupportQuery&)> supports;
  // Exactly the factory matching `kind` is set.
  std::function<std::unique_ptr<Attention>(const PluginContext&)> make_attention;
  std::function<std::unique_ptr<Quantization>(const PluginContext&)> make_quantization;
  std::function<std::unique_ptr<Scheduler>(const PluginContext&)> make_scheduler;
  std::function<std::unique_ptr<Decoder>(const PluginContext&)> make_decoder;
};

}  // namespace inferlab

// In exactly one .cpp of a plugin: INFERLAB_PLUGIN(fn) where fn() returns a PluginDescriptor.
#define INFERLAB_PLUGIN(describe)                                                       \
  namespace {                                                                           \
  int inferlab_plugin_abi_impl() { return ::inferlab::kPluginAbiVersion; }              \
  const ::inferlab::PluginDescriptor* inferlab_plugin_descriptor_impl() {               \
    static const ::inferlab::PluginDescriptor descriptor = describe();                  \
    return &descriptor;                                                                 \
  }                                                                                     \
  }                                                                                     \
  BOOST_DLL_ALIAS(inferlab_plugin_abi_impl, inferlab_plugin_abi)                        \
  BOOST_DLL_ALIAS(inferlab_plugin_descriptor_impl, inferlab_plugin_descriptor)
