// Error checks for CUDA and cuBLAS calls, for .cu files only: a failing call throws
// inferlab::Error naming the call, file:line and the runtime's message (never an abort).
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "inferlab/error.h"

namespace inferlab::cuda {

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* what, const char* file, int line) {
  throw Error(std::string("CUDA error at ") + file + ":" + std::to_string(line) + ": " + what + ": " +
              cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

[[noreturn]] inline void throw_cublas_error(cublasStatus_t st, const char* what, const char* file, int line) {
  throw Error(std::string("cuBLAS error at ") + file + ":" + std::to_string(line) + ": " + what + ": " +
              cublasGetStatusName(st) + " (" + cublasGetStatusString(st) + ")");
}

}  // namespace inferlab::cuda

#define INFERLAB_CUDA_CHECK(expr)                                                          \
  do {                                                                                     \
    const cudaError_t inferlab_err_ = (expr);                                              \
    if (inferlab_err_ != cudaSuccess)                                                      \
      ::inferlab::cuda::throw_cuda_error(inferlab_err_, #expr, __FILE__, __LINE__);        \
  } while (0)

// After a kernel launch: configuration errors surface here, execution errors at the next sync.
#define INFERLAB_CUDA_CHECK_LAUNCH(name) INFERLAB_CUDA_CHECK(cudaGetLastError())

#define INFERLAB_CUBLAS_CHECK(expr)                                                        \
  do {                                                                                     \
    const cublasStatus_t inferlab_st_ = (expr);                                            \
    if (inferlab_st_ != CUBLAS_STATUS_SUCCESS)                                             \
      ::inferlab::cuda::throw_cublas_error(inferlab_st_, #expr, __FILE__, __LINE__);       \
  } while (0)
