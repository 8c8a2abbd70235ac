// Helpers of the CUDA tests: a CudaDevice made only when one is visible (every test starts with
// INFERLAB_REQUIRE_CUDA), and host <-> device vectors.
#pragma once
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "inferlab/device/device.h"
#include "test_support.h"

namespace inferlab::testing {

// Device memory holding `host` (a copy).
template <class T>
Buffer upload(Device& device, const std::vector<T>& host) {
  Buffer b(device, std::max<std::size_t>(host.size(), 1) * sizeof(T));
  device.copy_to_device(b.data(), host.data(), host.size() * sizeof(T));
  return b;
}

// `count` values of device memory, on the host.
template <class T>
std::vector<T> download(Device& device, const Buffer& b, std::size_t count) {
  std::vector<T> host(count);
  device.copy_to_host(host.data(), b.data(), count * sizeof(T));
  return host;
}

// A device buffer of `count` floats filled with NaN, so an element a kernel fails to write
// shows up as NaN.
inline Buffer nan_buffer(Device& device, std::size_t count) {
  return upload(device, std::vector<float>(count, std::nanf("")));
}

}  // namespace inferlab::testing
