// The CUDA device (see inferlab/device/cuda_device.h): stream, cuBLAS handle, caching pool, pinned
// staging, event timing. The elementwise ops are the launchers of kernels/cuda/ops.h.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "inferlab/device/caching_allocator.h"
#include "inferlab/device/cuda_device.h"
#include "inferlab/error.h"
#include "cuda_graph.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/classify.h"
#include "kernels/cuda/fused.h"
#include "kernels/cuda/ops.h"

namespace inferlab {

namespace {

constexpr std::size_t kUploadStaging = 8u << 20;    // pinned ring for host -> device copies
constexpr std::size_t kUploadChunk = kUploadStaging / 2;
constexpr std::size_t kDownloadMax = 64u << 20;     // pinned bounce buffer cap for device -> host
constexpr std::size_t kMaxPendingSegments = 1u << 14;  // resolve (and wait) beyond this many

std::string cuda_error_text(cudaError_t err) {
  return std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
}

}  // namespace

bool cuda_device_visible(std::string& reason) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky-free error so later calls start clean
    reason = "cudaGetDeviceCount: " + cuda_error_text(err);
    return false;
  }
  if (n == 0) {
    reason = "cudaGetDeviceCount found 0 devices";
    return false;
  }
  reason.clear();
  return true;
}

struct CudaDevice::State {
  int ordinal = 0;
  cudaDeviceProp prop{};
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  std::unique_ptr<CachingAllocator> pool;
  // Uploads: host bytes are copied into the pinned ring, then DMA'd asynchronously; before the
  // ring wraps the host waits for `upload_done` (recorded after the latest copy, so every
  // earlier copy out of the ring has finished too).
  char* upload = nullptr;
  std::size_t upload_offset = 0;
  cudaEvent_t upload_done = nullptr;
  // Downloads bounce through a pinned buffer grown on demand (up to kDownloadMax, then chunks).
  char* download = nullptr;
  std::size_t download_bytes = 0;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  // Timing: open ops innermost last, each with the event its current segment started at;
  // closed segments wait in `pending` until their events have completed.
  struct Open {
    TimeCategory category;
    cudaEvent_t since;
  };
  struct Segment {
    TimeCategory category;
    cudaEvent_t start, end;
  };
  std::vector<Open> open;
  std::vector<Segment> pending;
  std::vector<cudaEvent_t> recorded;  // every event in `pending` or `open`
  std::vector<cudaEvent_t> spare;     // created, not in use
  double timer_overhead_s = 0;
  // CUDA graphs: the pinned snapshots of the capture in progress (null when none), the pool's
  // allocations and frees when it began, and cuBLAS's own workspace (set when graphs are on).
  std::unique_ptr<cuda_graph::HostSnapshots> capture;
  std::uint64_t capture_pool_events = 0;
  void* cublas_workspace = nullptr;

  std::uint64_t pool_events() const {
    const CachingAllocator::Stats& st = pool->stats();
    return st.raw_allocs + st.reuses + st.frees;
  }
  // Throws Error when a capture is in progress: `what` would make the host wait for the GPU.
  void no_wait_in_capture(const char* what) const {
    if (capture)
      throw Error(std::string("cuda graphs: ") + what +
                  " inside a captured decode step would make the host wait for the GPU; the step runs eagerly");
  }

  cudaEvent_t record() {
    cudaEvent_t e = nullptr;
    if (spare.empty()) {
      INFERLAB_CUDA_CHECK(cudaEventCreate(&e));
    } else {
      e = spare.back();
      spare.pop_back();
    }
    INFERLAB_CUDA_CHECK(cudaEventRecord(e, stream));
    recorded.push_back(e);
    return e;
  }
};

CudaDevice::CudaDevice(int ordinal) : s_(std::make_unique<State>()) {
  std::string reason;
  if (!cuda_device_visible(reason)) throw Error("device kind cuda: no CUDA device visible (" + reason + ")");
  int n = 0;
  INFERLAB_CUDA_CHECK(cudaGetDeviceCount(&n));
  if (ordinal < 0 || ordinal >= n)
    throw Error("device kind cuda: GPU " + std::to_string(ordinal) + " requested, " + std::to_string(n) +
                " visible (allowed 0.." + std::to_string(n - 1) + ")");
  s_->ordinal = ordinal;
  INFERLAB_CUDA_CHECK(cudaSetDevice(ordinal));
  INFERLAB_CUDA_CHECK(cudaGetDeviceProperties(&s_->prop, ordinal));
  INFERLAB_CUDA_CHECK(cudaStreamCreateWithFlags(&s_->stream, cudaStreamNonBlocking));
  INFERLAB_CUBLAS_CHECK(cublasCreate(&s_->cublas));
  INFERLAB_CUBLAS_CHECK(cublasSetStream(s_->cublas, s_->stream));
  s_->pool = std::make_unique<CachingAllocator>(
      [](std::size_t bytes) -> void* {
        void* p = nullptr;
        if (cudaMalloc(&p, bytes) != cudaSuccess) {
          (void)cudaGetLastError();  // out of memory is an answer here, not a sticky error
          return nullptr;
        }
        return p;
      },
      [](void* p) { (void)cudaFree(p); });
  INFERLAB_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&s_->upload), kUploadStaging));
  INFERLAB_CUDA_CHECK(cudaEventCreateWithFlags(&s_->upload_done, cudaEventDisableTiming));
  // The host cost of one timed op: best of a few batches of empty begin/end pairs.
  constexpr int kPairs = 200;
  double best = 1e9;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kPairs; ++i) {
      op_begin(TimeCategory::kFramework);
      op_end(TimeCategory::kFramework);
    }
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / kPairs);
  }
  s_->timer_overhead_s = best;
  reset_op_times();
}

CudaDevice::~CudaDevice() {
  // Nothing here may throw: errors are ignored, the process is tearing this GPU state down.
  abort_capture();
  (void)cudaStreamSynchronize(s_->stream);
  s_->pool.reset();  // frees every block (also those a leaked Buffer still points to)
  for (cudaEvent_t e : s_->recorded) (void)cudaEventDestroy(e);
  for (cudaEvent_t e : s_->spare) (void)cudaEventDestroy(e);
  if (s_->upload_done != nullptr) (void)cudaEventDestroy(s_->upload_done);
  if (s_->upload != nullptr) (void)cudaFreeHost(s_->upload);
  if (s_->download != nullptr) (void)cudaFreeHost(s_->download);
  if (s_->cublas != nullptr) (void)cublasDestroy(s_->cublas);
  if (s_->stream != nullptr) (void)cudaStreamDestroy(s_->stream);
}

std::string CudaDevice::describe() const { return s_->prop.name; }
int CudaDevice::ordinal() const { return s_->ordinal; }
int CudaDevice::sm_count() const { return s_->prop.multiProcessorCount; }
int CudaDevice::compute_capability() const { return s_->prop.major * 10 + s_->prop.minor; }
CUstream_st* CudaDevice::stream() const { return s_->stream; }
cublasContext* CudaDevice::cublas() const { return s_->cublas; }
std::uint64_t CudaDevice::raw_allocations() const { return s_->pool->stats().raw_allocs; }
std::uint64_t CudaDevice::pool_reuses() const { return s_->pool->stats().reuses; }

CudaMemoryInfo CudaDevice::memory_info() const {
  std::size_t free = 0, total = 0;
  INFERLAB_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  CudaMemoryInfo info;
  info.total = total;
  info.free = free;
  info.pool_in_use = s_->pool->stats().bytes_in_use;
  info.pool_cached = s_->pool->stats().bytes_cached;
  return info;
}

void* CudaDevice::workspace(std::size_t bytes) {
  if (bytes > s_->workspace_bytes) {
    if (s_->workspace != nullptr) s_->pool->deallocate(s_->workspace);
    s_->workspace = nullptr;
    s_->workspace_bytes = 0;
    s_->workspace = allocate(bytes);
    s_->workspace_bytes = bytes;
  }
  return s_->workspace;
}

void* CudaDevice::allocate(std::size_t bytes) {
  void* p = s_->pool->allocate(bytes);
  if (p == nullptr) {
    const CudaMemoryInfo m = memory_info();
    throw Error("cuda device: cannot allocate " + std::to_string(bytes) + " bytes (" + std::to_string(m.free >> 20) +
                " MiB free of " + std::to_string(m.total >> 20) + " MiB; the pool holds " +
                std::to_string(m.pool_in_use >> 20) + " MiB)");
  }
  INFERLAB_CUDA_CHECK(cudaMemsetAsync(p, 0, std::max<std::size_t>(bytes, 1), s_->stream));
  return p;
}

void CudaDevice::deallocate(void* ptr) {
  // Called from destructors: a pointer the pool did not hand out is ignored, never thrown on.
  if (ptr != nullptr) (void)s_->pool->deallocate(ptr);
}

void CudaDevice::copy_to_device(void* dst, const void* host_src, std::size_t bytes) {
  if (s_->capture) {  // the graph re-reads its source at every replay: a snapshot it owns
    if (bytes > 0)
      INFERLAB_CUDA_CHECK(cudaMemcpyAsync(dst, s_->capture->copy(host_src, bytes), bytes, cudaMemcpyHostToDevice,
                                          s_->stream));
    return;
  }
  const char* src = static_cast<const char*>(host_src);
  char* d = static_cast<char*>(dst);
  for (std::size_t done = 0; done < bytes;) {
    const std::size_t chunk = std::min(bytes - done, kUploadChunk);
    if (s_->upload_offset + chunk > kUploadStaging) {
      INFERLAB_CUDA_CHECK(cudaEventSynchronize(s_->upload_done));
      s_->upload_offset = 0;
    }
    char* stage = s_->upload + s_->upload_offset;
    std::memcpy(stage, src + done, chunk);
    INFERLAB_CUDA_CHECK(cudaMemcpyAsync(d + done, stage, chunk, cudaMemcpyHostToDevice, s_->stream));
    INFERLAB_CUDA_CHECK(cudaEventRecord(s_->upload_done, s_->stream));
    s_->upload_offset += (chunk + 255) / 256 * 256;
    done += chunk;
  }
}

void CudaDevice::copy_to_host(void* host_dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  s_->no_wait_in_capture("a download (copy_to_host)");
  const std::size_t want = std::min(bytes, kDownloadMax);
  if (s_->download_bytes < want) {
    if (s_->download != nullptr) INFERLAB_CUDA_CHECK(cudaFreeHost(s_->download));
    s_->download = nullptr;
    s_->download_bytes = 0;
    INFERLAB_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&s_->download), want));
    s_->download_bytes = want;
  }
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(host_dst);
  for (std::size_t done = 0; done < bytes;) {
    const std::size_t chunk = std::min(bytes - done, s_->download_bytes);
    INFERLAB_CUDA_CHECK(cudaMemcpyAsync(s_->download, s + done, chunk, cudaMemcpyDeviceToHost, s_->stream));
    INFERLAB_CUDA_CHECK(cudaStreamSynchronize(s_->stream));
    std::memcpy(d + done, s_->download, chunk);
    done += chunk;
  }
  resolve_segments(false);  // the stream is idle: every pending segment can be summed
}

void CudaDevice::copy_on_device(void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0) INFERLAB_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s_->stream));
}

void CudaDevice::synchronize() {
  s_->no_wait_in_capture("synchronize");
  INFERLAB_CUDA_CHECK(cudaStreamSynchronize(s_->stream));
  resolve_segments(false);
}

// ---- timing ---------------------------------------------------------------------------------

void CudaDevice::op_begin(TimeCategory category) {
  if (s_->capture) return;  // a captured op has no events to time; a replay is timed as a whole
  cudaEvent_t e = s_->record();
  if (!s_->open.empty()) s_->pending.push_back({s_->open.back().category, s_->open.back().since, e});
  s_->open.push_back({category, e});
}

void CudaDevice::op_end(TimeCategory category) {
  if (s_->capture) return;
  if (s_->open.empty() || s_->open.back().category != category) return;  // unmatched: ignored (destructors)
  cudaEvent_t e = nullptr;
  try {
    e = s_->record();
  } catch (const Error&) {
    s_->open.pop_back();  // called from OpScope's destructor: drop the segment rather than throw
    return;
  }
  s_->pending.push_back({category, s_->open.back().since, e});
  times_.ops++;
  s_->open.pop_back();
  if (!s_->open.empty()) s_->open.back().since = e;
  if (s_->pending.size() > kMaxPendingSegments) resolve_segments(true);
}

void CudaDevice::resolve_segments(bool wait) const {
  if (s_->pending.empty()) return;
  if (wait) INFERLAB_CUDA_CHECK(cudaStreamSynchronize(s_->stream));
  for (const State::Segment& seg : s_->pending) {
    float ms = 0;
    INFERLAB_CUDA_CHECK(cudaEventElapsedTime(&ms, seg.start, seg.end));
    times_[seg.category] += static_cast<double>(ms) * 1e-3;
  }
  s_->pending.clear();
  // Events still marking where an open op's segment began stay; the rest are free again.
  std::vector<cudaEvent_t> keep;
  for (cudaEvent_t e : s_->recorded) {
    const bool open = std::any_of(s_->open.begin(), s_->open.end(), [&](const State::Open& o) { return o.since == e; });
    (open ? keep : s_->spare).push_back(e);
  }
  s_->recorded = std::move(keep);
}

const OpTimes& CudaDevice::op_times() const {
  if (s_->capture) return times_;  // the segments wait until the capture ends
  resolve_segments(true);
  return times_;
}

void CudaDevice::reset_op_times() {
  resolve_segments(true);  // segments from before the reset must not land after it
  times_ = OpTimes{};
}

double CudaDevice::timer_overhead_s() const { return s_->timer_overhead_s; }

// ---- elementwise ops ------------------------------------------------------------------------

void CudaDevice::embedding(const float* table, const int* tokens, int rows, int dim, float* out) {
  cuda::embedding(table, tokens, rows, dim, out, s_->stream);
}
void CudaDevice::rmsnorm(const float* x, const float* w, float* out, int rows, int dim, float eps) {
  cuda::rmsnorm(x, w, out, rows, dim, eps, s_->stream);
}
void CudaDevice::rope(float* q, float* k, const int* positions, int rows, int n_heads, int n_kv_heads, int head_dim,
                      const float* inv_freq, RopeStyle style) {
  cuda::rope(q, k, positions, rows, n_heads, n_kv_heads, head_dim, inv_freq, style, s_->stream);
}
void CudaDevice::kv_write_f32(float* k_cache, float* v_cache, const float* k, const float* v, const int* slots,
                              int rows, int kv_dim) {
  cuda::kv_write_f32(k_cache, v_cache, k, v, slots, rows, kv_dim, s_->stream);
}
void CudaDevice::kv_write_int8(std::int8_t* k_codes, std::int8_t* v_codes, float* k_scale, float* v_scale,
                               const float* k, const float* v, const int* slots, int rows, int n_kv_heads,
                               int head_dim) {
  cuda::kv_write_int8(k_codes, v_codes, k_scale, v_scale, k, v, slots, rows, n_kv_heads, head_dim, s_->stream);
}
void CudaDevice::kv_write_half(KvDtype dtype, void* k_cache, void* v_cache, const float* k, const float* v,
                               const int* slots, int rows, int kv_dim) {
  cuda::kv_write_half(dtype, k_cache, v_cache, k, v, slots, rows, kv_dim, s_->stream);
}
void CudaDevice::add(float* x, const float* y, std::size_t n) { cuda::add(x, y, n, s_->stream); }
void CudaDevice::swiglu(float* gate, const float* up, std::size_t n) { cuda::swiglu(gate, up, n, s_->stream); }
void CudaDevice::add_bias(float* y, const float* b, int rows, int width) {
  cuda::add_bias(y, b, rows, width, s_->stream);
}

// ---- fused ops ------------------------------------------------------------------------------

void CudaDevice::residual_rmsnorm(float* x, const float* y, const float* w, float* out, std::int8_t* act_q,
                                  float* act_scale, int rows, int dim, float eps) {
  cuda::residual_rmsnorm(x, y, w, out, act_q, act_scale, rows, dim, eps, s_->stream);
}
void CudaDevice::rope_kv_write_f32(float* q, float* k, const float* v, const int* positions, const int* slots,
                                   int rows, int n_heads, int n_kv_heads, int head_dim, const float* inv_freq,
                                   RopeStyle style, float* k_cache, float* v_cache) {
  cuda::rope_kv_write_f32(q, k, v, positions, slots, rows, n_heads, n_kv_heads, head_dim, inv_freq, style, k_cache,
                          v_cache, s_->stream);
}
void CudaDevice::rope_kv_write_half(KvDtype dtype, float* q, float* k, const float* v, const int* positions,
                                    const int* slots, int rows, int n_heads, int n_kv_heads, int head_dim,
                                    const float* inv_freq, RopeStyle style, void* k_cache, void* v_cache) {
  cuda::rope_kv_write_half(dtype, q, k, v, positions, slots, rows, n_heads, n_kv_heads, head_dim, inv_freq, style,
                           k_cache, v_cache, s_->stream);
}
void CudaDevice::swiglu_quantize(float* gate, const float* up, std::int8_t* act_q, float* act_scale, int rows,
                                 int width) {
  cuda::swiglu_quantize(gate, up, act_q, act_scale, rows, width, s_->stream);
}

void CudaDevice::choose_tokens(const float* logits, int rows, int vocab, const TokenChoice& choice, const double* u,
                               int* out) {
  switch (choice.kind) {
    case TokenChoice::Kind::kArgmax:
      cuda::argmax_rows(logits, rows, vocab, out, s_->stream);
      return;
    case TokenChoice::Kind::kSample:
      cuda::sample_rows(logits, rows, vocab, choice.temperature, u, out, s_->stream);
      return;
    case TokenChoice::Kind::kNone: break;
  }
  throw Error("choose_tokens: no choice to make (kind none)");
}

// ---- CUDA graphs ----------------------------------------------------------------------------

void CudaDevice::set_cuda_graphs(bool on) {
  if (on && s_->cublas_workspace == nullptr) {
    // cuBLAS otherwise allocates its workspace itself, possibly inside a capture; 32 MiB is what
    // NVIDIA's cuBLAS guide recommends on Hopper.
    constexpr std::size_t kCublasWorkspace = 32u << 20;
    s_->cublas_workspace = allocate(kCublasWorkspace);
    INFERLAB_CUBLAS_CHECK(cublasSetWorkspace(s_->cublas, s_->cublas_workspace, kCublasWorkspace));
  }
  cuda_graphs_ = on;
}

bool CudaDevice::capturing() const { return s_->capture != nullptr; }

void CudaDevice::begin_capture() {
  check(!s_->capture, "cuda graphs: begin_capture while a capture is in progress");
  auto snapshots = std::make_unique<cuda_graph::HostSnapshots>();  // pinned before the capture
  s_->capture_pool_events = s_->pool_events();
  cuda_graph::begin(s_->stream);
  s_->capture = std::move(snapshots);
}

std::unique_ptr<StepGraph> CudaDevice::end_capture(std::string& reason) {
  check(s_->capture != nullptr, "cuda graphs: end_capture without begin_capture");
  const std::uint64_t events = s_->pool_events() - s_->capture_pool_events;
  reason = events == 0 ? std::string()
                       : "device memory was allocated or freed " + std::to_string(events) +
                             " times inside the captured step (its addresses would go stale on replay)";
  return cuda_graph::end(s_->stream, std::move(s_->capture), events == 0, reason);
}

void CudaDevice::abort_capture() noexcept {
  if (!s_->capture) return;
  cuda_graph::abort(s_->stream);
  s_->capture.reset();
}

std::uint64_t CudaDevice::memory_epoch() const { return s_->pool->stats().frees; }

CudaMemoryInfo cuda_memory_info(Device& device) { return cuda_device(device, "cuda_memory_info").memory_info(); }

CudaDevice& cuda_device(Device& device, const char* who) {
  if (auto* cuda = dynamic_cast<CudaDevice*>(&device)) return *cuda;
  throw Error(std::string(who) + ": expected the cuda device, this run's device is " + device_kind_name(device.kind()));
}

}  // namespace inferlab
