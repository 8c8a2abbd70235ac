// A device copy of a host array, for strategies that build their weights on the host and keep
// them in the memory of the device they run on (the quantized linears on CUDA).
#pragma once
#include <vector>

#include "inferlab/device/device.h"

namespace inferlab {

// A Buffer on `device` holding host's bytes; an empty Buffer when host is empty.
template <class T, class Alloc>
Buffer upload_to(Device& device, const std::vector<T, Alloc>& host) {
  if (host.empty()) return Buffer();
  Buffer b(device, host.size() * sizeof(T));
  device.copy_to_device(b.data(), host.data(), host.size() * sizeof(T));
  return b;
}

}  // namespace inferlab
