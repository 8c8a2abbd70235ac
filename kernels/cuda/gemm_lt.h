// Row-major GEMMs of the linears on cuBLASLt (gemm_lt.cu): half weights (bf16/f16) with fp32
// output and accumulation on tensor cores, with the bias and residual-add epilogues, and int8 x
// int8 -> int32 on IMMA tensor cores (CUBLAS_COMPUTE_32I; the scales are an epilogue kernel,
// tensor_core_linear.h's scale_int32_output). Layouts as gemm.h: y^T [out, n] = W [out, in]
// read transposed (op T, lda = in) · x^T [in, n] (op N, ldb = in), ldc = out — the "TN" form the
// int8 kernels require.
//
// One GemmLt per CUDA device user: its cuBLASLt handle and its workspace are created once, in the
// constructor; each call looks its plan up in an LtPlanCache (gemm_lt_plan.h), so a call does no
// allocation and no host synchronisation (capturable into a CUDA graph). Not thread-safe (the plan
// cache): one stream's worth of calls at a time, as the CudaDevice issues them. Pointers are
// device memory; calls are asynchronous on `stream`; failures throw inferlab::Error.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_lt_plan.h"

namespace inferlab::cuda {

class GemmLt {
 public:
  // The cuBLASLt workspace (Hopper's recommended size), allocated once.
  static constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;
  static constexpr std::size_t kMaxPlans = 256;

  GemmLt();  // on the current CUDA device
  ~GemmLt();
  GemmLt(const GemmLt&) = delete;
  GemmLt& operator=(const GemmLt&) = delete;

  // y[n, out] (+)= x[n, in] · W^T (+ bias[out]) with x, W half of `type`; accumulate adds into y.
  // bias: fp32 [out] or null.
  void half(const std::uint16_t* x, const std::uint16_t* w, float* y, int n, int out, int in, HalfType type,
            const float* bias, bool accumulate, CUstream_st* stream);
  // acc[n, out] = xq[n, in] · q^T, exact int32. in % 4 == 0 and out % 4 == 0 (IMMA's leading
  // dimensions), else Error. False (nothing launched) when cuBLASLt has no algorithm for the
  // problem on this GPU: the caller runs its own kernel.
  [[nodiscard]] bool int8(const std::int8_t* xq, const std::int8_t* q, std::int32_t* acc, int n, int out, int in,
            CUstream_st* stream);

  std::size_t plans() const;             // plans cached now
  std::uint64_t plan_misses() const;     // plans built (heuristic queries) so far

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace inferlab::cuda
