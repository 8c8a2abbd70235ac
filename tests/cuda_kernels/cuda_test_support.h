// Helpers of the CUDA kernel tests: device copies of host arrays and back, NaN-filled outputs.
#pragma once
#include <cstddef>
#include <limits>
#include <memory>
#include <vector>

#include "inferlab/device/device.h"

namespace inferlab::testing {

template <class T>
Buffer to_device(Device& device, const std::vector<T>& host) {
  Buffer b(device, std::max<std::size_t>(host.size() * sizeof(T), 1));
  if (!host.empty()) device.copy_to_device(b.data(), host.data(), host.size() * sizeof(T));
  return b;
}

template <class T>
std::vector<T> to_host(Device& device, const Buffer& b, std::size_t n) {
  std::vector<T> host(n);
  device.synchronize();
  if (n > 0) device.copy_to_host(host.data(), b.data(), n * sizeof(T));
  return host;
}

inline std::vector<float> nan_filled(std::size_t n) {
  return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
}

}  // namespace inferlab::testing
