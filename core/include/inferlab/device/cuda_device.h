// The CUDA device (issue 7): one GPU, one stream, one cuBLAS handle bound to that stream, a
// size-class caching pool for device memory (inferlab/device/caching_allocator.h: no cudaMalloc per
// step), pinned host staging for uploads and downloads, and CUDA-event op timing.
//
// Everything a Device does is issued on stream(): ops are asynchronous, copy_to_host and
// synchronize() wait. Plugins with CUDA paths call the launchers of kernels/cuda/*.h (compiled
// into libinferlab_core) with stream() and, for GEMMs, cublas(); see docs/architecture.md.
//
// Timing (same OpTimes categories and nested exclusive semantics as the CPU): op_begin and
// op_end record an event on the stream, closing the current segment of the innermost open op,
// so every interval between two consecutive events belongs to exactly one category. Event
// timestamps are taken when the GPU reaches them, so a segment measures GPU time of the work
// issued inside it (plus any idle gap while the host issues it); host-only ops (sampling after
// the logits download) run on an idle stream, where an event completes as it is recorded, so
// they measure host time. Segments are summed once their events have completed: on every
// synchronising call (copy_to_host, synchronize) and in op_times().
//
// No CUDA header is needed to include this file: the stream and handle are the opaque struct
// pointers cudaStream_t and cublasHandle_t are typedefs of.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "inferlab/device/device.h"

struct CUstream_st;    // cudaStream_t = CUstream_st*
struct cublasContext;  // cublasHandle_t = cublasContext*

namespace inferlab {

// Whether this process sees a CUDA device; when not, `reason` says why ("this build has no
// CUDA (INFERLAB_CUDA=OFF or no nvcc)", "cudaGetDeviceCount: ...", "0 devices"). Defined in
// every build.
bool cuda_device_visible(std::string& reason);

// Device memory as the CUDA device sees it (bytes).
struct CudaMemoryInfo {
  std::uint64_t total = 0;        // the GPU's memory
  std::uint64_t free = 0;         // free on the GPU now (cudaMemGetInfo), the pool's cache excluded
  std::uint64_t pool_in_use = 0;  // blocks of the caching pool handed out
  std::uint64_t pool_cached = 0;  // blocks on the pool's free lists
};

// memory_info() of `device`, which must be the CUDA device (Error otherwise). Defined in every
// build, so callers need no #if.
CudaMemoryInfo cuda_memory_info(Device& device);

#if INFERLAB_HAVE_CUDA

class CudaDevice final : public ComputeDevice {
 public:
  // The GPU `ordinal`. Throws Error "device kind cuda: no CUDA device visible (...)" when there
  // is none, or when `ordinal` is not one of them.
  explicit CudaDevice(int ordinal = 0);
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  DeviceKind kind() const override { return DeviceKind::kCuda; }
  std::string describe() const override;  // the GPU's name, "NVIDIA H200"
  int ordinal() const;
  int sm_count() const;
  int compute_capability() const;  // 90 for sm_90

  CUstream_st* stream() const;      // every op of this device runs here
  cublasContext* cublas() const;    // bound to stream(); default (fp32, no TF32) math mode
  // Grow-only device scratch of at least `bytes`, for the duration of one op (the next call
  // may return the same memory: stream order makes that safe).
  void* workspace(std::size_t bytes);
  CudaMemoryInfo memory_info() const;
  // The caching pool's counters (allocator reuse tests, the memory breakdown).
  std::uint64_t raw_allocations() const;
  std::uint64_t pool_reuses() const;

  void* allocate(std::size_t bytes) override;  // zero-filled on the stream, 256-byte aligned
  void deallocate(void* ptr) override;
  void copy_to_device(void* dst, const void* host_src, std::size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, std::size_t bytes) override;
  void copy_on_device(void* dst, const void* src, std::size_t bytes) override;
  void synchronize() override;

  void op_begin(TimeCategory category) override;
  void op_end(TimeCategory category) override;
  const OpTimes& op_times() const override;  // waits for the stream, then sums the segments
  void reset_op_times() override;            // waits too: older segments must not land after it
  double timer_overhead_s() const override;

  void embedding(const float* table, const int* tokens, int rows, int dim, float* out) override;
  void rmsnorm(const float* x, const float* w, float* out, int rows, int dim, float eps) override;
  void rope(float* q, float* k, const int* positions, int rows, int n_heads, int n_kv_heads, int head_dim,
            const float* inv_freq, RopeStyle style) override;
  void kv_write_f32(float* k_cache, float* v_cache, const float* k, const float* v, const int* slots, int rows,
                    int kv_dim) override;
  void kv_write_int8(std::int8_t* k_codes, std::int8_t* v_codes, float* k_scale, float* v_scale, const float* k,
                     const float* v, const int* slots, int rows, int n_kv_heads, int head_dim) override;
  void kv_write_half(KvDtype dtype, void* k_cache, void* v_cache, const float* k, const float* v, const int* slots,
                     int rows, int kv_dim) override;
  void add(float* x, const float* y, std::size_t n) override;
  void swiglu(float* gate, const float* up, std::size_t n) override;
  void add_bias(float* y, const float* b, int rows, int width) override;

  // [device] fuse = true: kernels/cuda/fused.h, bit-identical to the unfused ops above.
  void set_fuse(bool on) override { fuse_ = on; }
  void residual_rmsnorm(float* x, const float* y, const float* w, float* out, std::int8_t* act_q, float* act_scale,
                        int rows, int dim, float eps) override;
  void rope_kv_write_f32(float* q, float* k, const float* v, const int* positions, const int* slots, int rows,
                         int n_heads, int n_kv_heads, int head_dim, const float* inv_freq, RopeStyle style,
                         float* k_cache, float* v_cache) override;
  void rope_kv_write_half(KvDtype dtype, float* q, float* k, const float* v, const int* positions, const int* slots,
                          int rows, int n_heads, int n_kv_heads, int head_dim, const float* inv_freq, RopeStyle style,
                          void* k_cache, void* v_cache) override;
  void swiglu_quantize(float* gate, const float* up, std::int8_t* act_q, float* act_scale, int rows,
                       int width) override;
  // Token choice: kernels/cuda/classify.h (argmax_rows, sample_rows), on the stream, so a
  // captured decode step holds it and only token ids are downloaded.
  bool chooses_tokens() const override { return true; }
  void choose_tokens(const float* logits, int rows, int vocab, const TokenChoice& choice, const double* u,
                     int* out) override;
  // CUDA graphs (see ComputeDevice; capture and replay in cuda_graph.cu). Turning them on also
  // gives cuBLAS a workspace of its own, so no GEMM allocates inside a capture.
  void set_cuda_graphs(bool on) override;
  void begin_capture() override;
  std::unique_ptr<StepGraph> end_capture(std::string& reason) override;
  void abort_capture() noexcept override;
  std::uint64_t memory_epoch() const override;
  bool capturing() const;

 private:
  struct State;  // CUDA handles, the pool, staging, events (cuda_device.cu)
  std::unique_ptr<State> s_;
  void resolve_segments(bool wait) const;
};

// The CudaDevice `device` is, or Error naming `who` ("fp32 linear runs on cuda only...").
CudaDevice& cuda_device(Device& device, const char* who);

#endif  // INFERLAB_HAVE_CUDA

}  // namespace inferlab
