// cuBLASLt GEMMs of the linears (see gemm_lt.h for the layout and the lifetime contract).
//
// A plan is the matmul descriptor, the four matrix layouts and the algorithm the heuristic chose
// for them under the workspace limit; it is built the first time a shape is seen and reused after
// (gemm_lt_plan.h). The bias pointer is set on the plan's descriptor on every call (it is a host
// attribute; no device work). Roofline: decode rows read the whole W once (out * in * 2 bytes for
// halves, out * in for int8) — cuBLASLt picks its GEMV-like kernels there; prefill is bound by the
// bf16/f16 (or 2x faster s8) tensor cores.
#include <cublasLt.h>

#include <string>

#include "kernels/cuda/check.h"
#include "kernels/cuda/gemm_lt.h"

namespace inferlab::cuda {
namespace {

[[noreturn]] void throw_lt(cublasStatus_t st, const char* what, const char* file, int line) {
  throw_cublas_error(st, what, file, line);
}

#define INFERLAB_LT_CHECK(expr)                                                              \
  do {                                                                                       \
    const cublasStatus_t inferlab_lt_st_ = (expr);                                           \
    if (inferlab_lt_st_ != CUBLAS_STATUS_SUCCESS) throw_lt(inferlab_lt_st_, #expr, __FILE__, __LINE__); \
  } while (0)

struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

// The plan for `key`; null when cuBLASLt has no algorithm for an int8 problem (the caller falls
// back to its own kernel); a half problem without one throws.
std::unique_ptr<Plan> make_plan(cublasLtHandle_t handle, const LtKey& key) {
  auto p = std::make_unique<Plan>();
  const bool int8 = key.op == LtOp::kInt8;
  const cudaDataType_t ab = int8 ? CUDA_R_8I : key.op == LtOp::kF16 ? CUDA_R_16F : CUDA_R_16BF;
  const cudaDataType_t cd = int8 ? CUDA_R_32I : CUDA_R_32F;
  INFERLAB_LT_CHECK(cublasLtMatmulDescCreate(&p->op, int8 ? CUBLAS_COMPUTE_32I : CUBLAS_COMPUTE_32F,
                                             int8 ? CUDA_R_32I : CUDA_R_32F));
  const cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
  INFERLAB_LT_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
  INFERLAB_LT_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof(nn)));
  if (key.bias) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    // The bias type defaults to D's (fp32 here).
    INFERLAB_LT_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
  }
  // A = W stored [out, in] row-major = column-major [in, out]; B = x likewise [in, n]; C = y^T.
  INFERLAB_LT_CHECK(cublasLtMatrixLayoutCreate(&p->a, ab, static_cast<std::uint64_t>(key.in),
                                               static_cast<std::uint64_t>(key.out), key.in));
  INFERLAB_LT_CHECK(cublasLtMatrixLayoutCreate(&p->b, ab, static_cast<std::uint64_t>(key.in),
                                               static_cast<std::uint64_t>(key.n), key.in));
  INFERLAB_LT_CHECK(cublasLtMatrixLayoutCreate(&p->c, cd, static_cast<std::uint64_t>(key.out),
                                               static_cast<std::uint64_t>(key.n), key.out));
  cublasLtMatmulPreference_t pref = nullptr;
  INFERLAB_LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const std::uint64_t ws = GemmLt::kWorkspaceBytes;
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                           sizeof(ws));
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulAlgoGetHeuristic(handle, p->op, p->a, p->b, p->c, p->c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (int8 && (st == CUBLAS_STATUS_NOT_SUPPORTED || (st == CUBLAS_STATUS_SUCCESS && found < 1))) return nullptr;
  INFERLAB_LT_CHECK(st);
  if (found < 1)
    throw Error("cuBLASLt: no algorithm for " + std::string(int8 ? "int8" : "half") + " GEMM n " +
                std::to_string(key.n) + ", out " + std::to_string(key.out) + ", in " + std::to_string(key.in));
  p->algo = result.algo;
  return p;
}

}  // namespace

struct GemmLt::State {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  LtPlanCache<Plan> cache{kMaxPlans};

  Plan* plan(const LtKey& key) {
    return cache.get(key, [this](const LtKey& k) { return make_plan(handle, k); });
  }
  void run(Plan& p, const void* alpha, const void* a, const void* b, const void* beta, void* c,
           CUstream_st* stream) {
    INFERLAB_LT_CHECK(cublasLtMatmul(handle, p.op, alpha, a, p.a, b, p.b, beta, c, p.c, c, p.c, &p.algo, workspace,
                                     kWorkspaceBytes, stream));
  }
};

GemmLt::GemmLt() : s_(std::make_unique<State>()) {
  INFERLAB_LT_CHECK(cublasLtCreate(&s_->handle));
  const cudaError_t err = cudaMalloc(&s_->workspace, kWorkspaceBytes);
  if (err != cudaSuccess) {
    cublasLtDestroy(s_->handle);
    throw_cuda_error(err, "cudaMalloc(cuBLASLt workspace)", __FILE__, __LINE__);
  }
}

GemmLt::~GemmLt() {
  s_->cache.clear();  // descriptors before the handle
  cudaFree(s_->workspace);
  cublasLtDestroy(s_->handle);
}

void GemmLt::half(const std::uint16_t* x, const std::uint16_t* w, float* y, int n, int out, int in, HalfType type,
                  const float* bias, bool accumulate, CUstream_st* stream) {
  if (n <= 0 || out <= 0) return;
  const LtKey key{type == HalfType::kF16 ? LtOp::kF16 : LtOp::kBF16, n, out, in, bias != nullptr, accumulate};
  Plan& p = *s_->plan(key);  // never null for halves (make_plan throws)
  if (bias != nullptr)
    INFERLAB_LT_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  s_->run(p, &alpha, w, x, &beta, y, stream);
}

bool GemmLt::int8(const std::int8_t* xq, const std::int8_t* q, std::int32_t* acc, int n, int out, int in,
                  CUstream_st* stream) {
  if (n <= 0 || out <= 0) return true;
  check(in % 4 == 0 && out % 4 == 0, "cuBLASLt int8 GEMM: in and out must be multiples of 4, got in " +
                                         std::to_string(in) + ", out " + std::to_string(out));
  Plan* p = s_->plan(LtKey{LtOp::kInt8, n, out, in, false, false});
  if (p == nullptr) return false;
  const std::int32_t alpha = 1, beta = 0;
  s_->run(*p, &alpha, q, xq, &beta, acc, stream);
  return true;
}

std::size_t GemmLt::plans() const { return s_->cache.size(); }
std::uint64_t GemmLt::plan_misses() const { return s_->cache.misses(); }

}  // namespace inferlab::cuda
