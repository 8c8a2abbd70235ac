// The plugin contract. Every strategy (built-ins too) is a shared library exporting, through
// INFERLAB_PLUGIN, two symbols: the ABI version (an int, checked before anything else is
// touched) and a descriptor with kind, name, version, summary, typed parameters, a capability
// check and, per device kind it runs on, the implementation there (its factory).
#pragma once
#include <concepts>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <boost/dll/alias.hpp>

#include "inferlab/plugin/attention.h"
#include "inferlab/plugin/decoder.h"
#include "inferlab/device/device.h"
#include "inferlab/model/model_config.h"
#include "inferlab/plugin/params.h"
#include "inferlab/plugin/quantization.h"
#include "inferlab/plugin/scheduler.h"
#include "inferlab/model/weights.h"

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
// 8: the registry chooses the device: PluginDescriptor::devices maps each device kind to its
// implementation (DeviceImpl: factory, per-device supports and KV dtypes) in place of the
// device list and the one make_* factory; Device is split into Device (memory, timing) and
// ComputeDevice (the model's ops), which a simulated device is not. 9: CUDA graphs:
// Attention::graph_capturable (a new virtual before forward) and ComputeDevice's graph virtuals.
// 10: token choice on the device: Decoder::device_choice (a new virtual after layer_plan) and
// ComputeDevice's chooses_tokens / choose_tokens; f16 / bf16 KV storage: KvDtype::kBf16,
// ComputeDevice::kv_write_half and rope_kv_write_half (new virtuals), GraphKey::kv_format.
inline constexpr int kPluginAbiVersion = 10;

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

using SupportCheck = std::function<std::vector<std::string>(const SupportQuery&)>;

// A strategy's implementation on one device kind (ggml's backends, vLLM's per-platform attention
// backends): its factory and what it can run there. Exactly the factory matching the
// descriptor's kind is set; the constructor from a callable sets the one its return type names,
// so `{DeviceKind::kCpu, make_naive}` is a map entry.
struct DeviceImpl {
  std::function<std::unique_ptr<Attention>(const PluginContext&)> make_attention;
  std::function<std::unique_ptr<Quantization>(const PluginContext&)> make_quantization;
  std::function<std::unique_ptr<Scheduler>(const PluginContext&)> make_scheduler;
  std::function<std::unique_ptr<Decoder>(const PluginContext&)> make_decoder;
  // Reasons this implementation cannot run the problem (empty = supported), asked after the
  // descriptor's own supports (a CUDA kernel's shared-memory limit). Optional.
  SupportCheck supports;
  // attention: the KV dtypes this implementation reads; empty = the descriptor's kv_dtypes.
  std::vector<KvDtype> kv_dtypes;

  DeviceImpl() = default;
  template <class Make>
    requires std::invocable<const Make&, const PluginContext&>
  DeviceImpl(Make make, SupportCheck check = {}, std::vector<KvDtype> kv = {})  // NOLINT: implicit by design
      : supports(std::move(check)), kv_dtypes(std::move(kv)) {
    using Made = std::invoke_result_t<const Make&, const PluginContext&>;
    if constexpr (std::is_convertible_v<Made, std::unique_ptr<Attention>>) make_attention = std::move(make);
    else if constexpr (std::is_convertible_v<Made, std::unique_ptr<Quantization>>) make_quantization = std::move(make);
    else if constexpr (std::is_convertible_v<Made, std::unique_ptr<Scheduler>>) make_scheduler = std::move(make);
    else {
      static_assert(std::is_convertible_v<Made, std::unique_ptr<Decoder>>,
                    "a factory returns std::unique_ptr of an Attention, Quantization, Scheduler or Decoder");
      make_decoder = std::move(make);
    }
  }
};

struct PluginDescriptor {
  PluginKind kind = PluginKind::kAttention;
  std::string name;
  std::string version;
  std::string summary;
  std::vector<ParamSpec> params;
  // Where it runs: each device kind and the implementation there. The registry creates a
  // strategy with the implementation of the device it runs on and refuses a kind not listed
  // here, naming the plugin and the kinds it has. The simulated device runs no op: a plugin
  // without a kSim entry is created there by its kCpu implementation, which the simulator asks
  // only what it declares (Attention::traffic, Quantization::arithmetic and planned_bytes).
  // A CUDA implementation lives in the plugin's *_cuda.cpp, compiled only in a CUDA build, and
  // is entered under `#if INFERLAB_HAVE_CUDA`. Device-independent strategies: any_device().
  std::map<DeviceKind, DeviceImpl> devices;
  // attention: the KV dtypes it can read, on either side (K, V) of any layer (an implementation
  // may narrow them on its device: DeviceImpl::kv_dtypes)
  std::vector<KvDtype> kv_dtypes = {KvDtype::kF32};
  // Reasons it cannot run this problem on any device (empty = supported). Optional; the device
  // and KV dtype are checked by the registry from the maps above.
  SupportCheck supports;

  // The implementation the registry uses on `device` (the kCpu one on kSim when there is no
  // kSim entry); null when the plugin does not run there.
  const DeviceImpl* implementation(DeviceKind device) const;
  // "cpu, cuda": the kinds of `devices`.
  std::string device_names() const;
};

// The device map of a device-independent strategy (schedulers, decoders that only read logits on
// the host, beside whatever device runs the model): the same implementation on every kind.
std::map<DeviceKind, DeviceImpl> any_device(DeviceImpl impl);

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
