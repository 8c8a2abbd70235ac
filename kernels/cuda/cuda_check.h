// Turns a CUDA runtime status into inferlab::Error with the call site, for the kernel
// launchers of kernels/cuda (launch errors are checked with cudaGetLastError right after the
// launch; asynchronous faults surface at the next synchronising call).
#pragma once
#include <cuda_runtime_api.h>

#include <string>

#include "inferlab/error.h"

#define INFERLAB_CUDA_CHECK(call)                                                                        \
  ::inferlab::cuda::check_status((call), #call, __FILE__, __LINE__)

namespace inferlab::cuda {

inline void check_status(cudaError_t status, const char* what, const char* file, int line) {
  if (status != cudaSuccess)
    throw Error(std::string(file) + ":" + std::to_string(line) + ": " + what + " failed: " +
                cudaGetErrorString(status));
}

}  // namespace inferlab::cuda
