// The descriptor of the half-precision weight strategies, quantization/f16 and quantization/bf16:
// the same strategy (HalfQuantization on the CPU, HalfCudaQuantization in a CUDA build) and the
// same `amx` parameter, with the format, the texts and the default AMX mode of each.
#pragma once
#include <string>

#include "inferlab/plugin/plugin.h"
#include "plugins/common/quantization/half_linear.h"

namespace inferlab {

struct HalfPluginInfo {
  std::string name;     // "f16", "bf16"
  std::string summary;  // the descriptor's one-line summary
  cpu::HalfFormat format;
  HalfAmx default_amx;  // the CPU default of `amx`, and the only value allowed on CUDA (no AMX there)
  std::string amx_doc;  // what each `amx` value does for this format (after the text both share)
};

// A quantization descriptor: `amx` ("split", "bf16", "off"; default info.default_amx) picks the
// CPU prefill kernel; kCpu builds HalfQuantization, kCuda (CUDA builds) HalfCudaQuantization and
// refuses an `amx` other than the default (it changes only the CPU kernels).
PluginDescriptor half_plugin_descriptor(const HalfPluginInfo& info);

}  // namespace inferlab
