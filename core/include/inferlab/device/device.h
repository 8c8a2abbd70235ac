// The device seam: where tensors live and who runs the ops on them. The engine, the model,
// every Linear and every Attention receive a Device&; the CPU implementation owns the thread
// pool, the CUDA one (inferlab/device/cuda_device.h) a stream, a cuBLAS handle and an allocator pool, a
// simulated one (inferlab/sim/sim.h) a cost model. Every Device has memory (allocate, copies,
// synchronise) and times every op by category, so that each metrics row says where its time
// went; a ComputeDevice (CPU, CUDA) also runs the model's elementwise ops (embedding, RMSNorm,
// RoPE, KV write, residual add, SwiGLU, bias) on memory it owns. A simulated device runs none:
// code that runs ops asks for them with compute_device().
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "inferlab/device/step_graph.h"
#include "inferlab/device/token_choice.h"
#include "inferlab/model/model_config.h"
#include "inferlab/thread_pool.h"

namespace inferlab {

enum class DeviceKind { kCpu, kCuda, kSim };
const char* device_kind_name(DeviceKind kind);
// "cpu", "cuda", "sim".
bool parse_device_kind(const std::string& text, DeviceKind& kind);
// Whether a device of this kind runs the fused ops (ComputeDevice::set_fuse) unless told
// otherwise: the CPU does; CUDA not until its fused kernels have run on a GPU
// (docs/performance.md, "Not yet run on a GPU"); sim has none. What [device] fuse, bench --fuse
// and a CpuDevice default to.
constexpr bool fused_by_default(DeviceKind kind) { return kind == DeviceKind::kCpu; }

enum class DType { kF32, kF16, kBF16, kI8, kU8, kI32 };
const char* dtype_name(DType dtype);
std::size_t dtype_size(DType dtype);

// Where each op's time goes. Device ops are timed under the first three; the engine times the
// host-side strategies under sampling and scheduler; framework is the rest of a step.
enum class TimeCategory { kLinear, kAttention, kNormRopeAct, kSampling, kScheduler, kFramework };
inline constexpr int kTimeCategories = 6;
// "linear", "attention", "norm_rope_act", "sampling", "scheduler", "framework".
const char* time_category_name(TimeCategory category);

// Seconds accumulated per category, plus the number of timed ops (to charge the timer's own
// cost, which a device measures once: overhead_s_per_op).
struct OpTimes {
  std::array<double, kTimeCategories> seconds{};
  long long ops = 0;
  double& operator[](TimeCategory c) { return seconds[static_cast<std::size_t>(c)]; }
  double operator[](TimeCategory c) const { return seconds[static_cast<std::size_t>(c)]; }
};

// A non-owning view of a tensor: data, element type, where it lives, shape and strides (in
// elements, row-major by default). Rank at most 4.
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  DeviceKind location = DeviceKind::kCpu;
  int rank = 0;
  std::array<std::int64_t, 4> shape{};
  std::array<std::int64_t, 4> strides{};

  static TensorView of(void* data, DType dtype, DeviceKind location, std::initializer_list<std::int64_t> shape);
  std::int64_t numel() const;
  std::size_t bytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype); }
  bool contiguous() const;
  template <class T> T* as() const { return static_cast<T*>(data); }
};

class Device;

// Owning memory on a device, released through it. Move-only.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Device& device, std::size_t bytes);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  template <class T> T* as() const { return static_cast<T*>(data_); }
  std::size_t bytes() const { return bytes_; }

 private:
  Device* device_ = nullptr;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual DeviceKind kind() const = 0;
  // "cpu (2 threads)", "NVIDIA H200", ...
  virtual std::string describe() const = 0;

  // ---- memory -----------------------------------------------------------------------------
  // Zero-initialised, 64-byte aligned. Throws Error when it cannot be had.
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* ptr) = 0;
  virtual void copy_to_device(void* dst, const void* host_src, std::size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, std::size_t bytes) = 0;
  virtual void copy_on_device(void* dst, const void* src, std::size_t bytes) = 0;
  // Waits for every op issued so far (a no-op on the CPU, whose ops are synchronous).
  virtual void synchronize() {}

  // ---- timing -----------------------------------------------------------------------------
  // Brackets one op. Ops may nest (a draft model's linears inside the decoder's sampling
  // bracket): time is exclusive, charged to the innermost open op, so categories never count
  // the same second twice.
  virtual void op_begin(TimeCategory category) = 0;
  virtual void op_end(TimeCategory category) = 0;
  // Virtual: an asynchronous device first completes the timings still in flight.
  virtual const OpTimes& op_times() const { return times_; }
  virtual void reset_op_times() { times_ = OpTimes{}; }
  // Measured cost of one op_begin/op_end pair, charged to no category.
  virtual double timer_overhead_s() const = 0;

 protected:
  mutable OpTimes times_;  // mutable: op_times() may fold in completed asynchronous timings
};

// A device that runs the model's ops (the CPU and CUDA devices).
class ComputeDevice : public Device {
 public:
  // ---- the model's elementwise ops (pointers are memory of this device) -------------------
  // out[r, :] = table[tokens[r], :]                            out: [rows, dim]
  virtual void embedding(const float* table, const int* tokens, int rows, int dim, float* out) = 0;
  // out[r, :] = x[r, :] / sqrt(mean(x[r]^2) + eps) * w          x, out: [rows, dim]
  virtual void rmsnorm(const float* x, const float* w, float* out, int rows, int dim, float eps) = 0;
  // Rotates q [rows, n_heads, head_dim] and k [rows, n_kv_heads, head_dim] in place, row r at
  // positions[r]; pair j turns by pos * inv_freq[j] (inv_freq: [head_dim / 2]).
  virtual void rope(float* q, float* k, const int* positions, int rows, int n_heads, int n_kv_heads,
                    int head_dim, const float* inv_freq, RopeStyle style) = 0;
  // k_cache[slots[r], :] = k[r, :] and likewise v, for rows of kv_dim floats (f32 storage).
  virtual void kv_write_f32(float* k_cache, float* v_cache, const float* k, const float* v, const int* slots,
                            int rows, int kv_dim) = 0;
  // int8 storage: for each row r and KV head h, with x = k[r, h*head_dim : (h+1)*head_dim],
  // k_scale[slots[r] * n_kv_heads + h] = s = max|x| / 127 and
  // k_codes[(slots[r] * n_kv_heads + h) * head_dim + c] = clamp(round(x[c] / s), -127, 127)
  // (0 codes and s = 0 for an all-zero x); likewise v. k, v: [rows, n_kv_heads * head_dim].
  virtual void kv_write_int8(std::int8_t* k_codes, std::int8_t* v_codes, float* k_scale, float* v_scale,
                             const float* k, const float* v, const int* slots, int rows, int n_kv_heads,
                             int head_dim) = 0;
  // f16 / bf16 storage (dtype kF16 or kBf16): k_cache[slots[r] * kv_dim + c] = k[r, c] rounded to
  // nearest even in `dtype` (kv_quantize_row's rounding, bit for bit), likewise v. k_cache,
  // v_cache: [slots, kv_dim] 2-byte values; k, v: [rows, kv_dim].
  virtual void kv_write_half(KvDtype dtype, void* k_cache, void* v_cache, const float* k, const float* v,
                             const int* slots, int rows, int kv_dim) = 0;
  // x[i] += y[i] for n values (the residual stream).
  virtual void add(float* x, const float* y, std::size_t n) = 0;
  // gate[i] = silu(gate[i]) * up[i] for n values.
  virtual void swiglu(float* gate, const float* up, std::size_t n) = 0;
  // y[r, :] += b for rows of width.
  virtual void add_bias(float* y, const float* b, int rows, int width) = 0;

  // ---- fused ops ([device] fuse; the CPU and CUDA devices) ---------------------------------
  // When fuse() is on, the model runs these instead of the unfused sequences they stand for; the
  // results are bit-identical (kernels/cpu/ops_fused.h, kernels/cuda/fused.h). A CpuDevice starts
  // fused (the default everywhere on the CPU), every other device unfused. The CPU and CUDA
  // devices have them: set_fuse(true) on any other device throws Error (the experiment refuses
  // fuse with kind = "sim" at its [device] line), and the ops below throw there. act_q/act_scale
  // are memory of this device.
  bool fuse() const { return fuse_; }
  virtual void set_fuse(bool on);
  // x [rows, dim] += y (y may be null), then RMSNorm of x with w [dim] into out [rows, dim] (may be
  // null) and/or quantised per 32-block into act_q [rows, dim], act_scale [rows, act_blocks(dim)]
  // (act_q may be null), as the int8-activation linears quantise their input.
  virtual void residual_rmsnorm(float* x, const float* y, const float* w, float* out, std::int8_t* act_q,
                                float* act_scale, int rows, int dim, float eps);
  // rope (as above) then kv_write_f32 of the rotated k and of v, in one pass over the rows.
  virtual void rope_kv_write_f32(float* q, float* k, const float* v, const int* positions, const int* slots,
                                 int rows, int n_heads, int n_kv_heads, int head_dim, const float* inv_freq,
                                 RopeStyle style, float* k_cache, float* v_cache);
  // rope (as above) then kv_write_half of the rotated k and of v. This default runs exactly that
  // sequence (any device; the CPU's); the CUDA device does it in one pass over the rows.
  virtual void rope_kv_write_half(KvDtype dtype, float* q, float* k, const float* v, const int* positions,
                                  const int* slots, int rows, int n_heads, int n_kv_heads, int head_dim,
                                  const float* inv_freq, RopeStyle style, void* k_cache, void* v_cache);
  // swiglu of gate, up [rows, width], then gate quantised per 32-block into act_q, act_scale.
  virtual void swiglu_quantize(float* gate, const float* up, std::int8_t* act_q, float* act_scale, int rows,
                               int width);

  // ---- token choice on the device (Decoder::device_choice; the CPU and CUDA devices) -------
  // Whether choose_tokens runs here. The engine then lets the model choose a step's tokens
  // where the decoder allows it, and downloads only their ids (docs/architecture.md).
  virtual bool chooses_tokens() const { return false; }
  // out[r] = the token `choice` picks from row r of logits [rows, vocab]: kArgmax ref::argmax's
  // rule, kSample ref::sample_row with the uniform u[r] (kernels/ref/ops_fused.h); both
  // bit-identical to the decoders' host choice (plugins/common/decoding/sampling.h). logits, u
  // [rows] (read for kSample only) and out [rows] are memory of this device; asynchronous where
  // the device is. Throws Error on a device that does not choose, or for kNone.
  virtual void choose_tokens(const float* logits, int rows, int vocab, const TokenChoice& choice, const double* u,
                             int* out);

  // ---- CUDA graphs ([device] cuda_graphs = true; the CUDA device only) --------------------
  // When on, the model captures its decode steps per padded batch (inferlab/device/step_graph.h)
  // and replays them. set_cuda_graphs(true) throws Error on a device without graphs (the
  // experiment refuses the key with kind = "cpu" or "sim" at its [device] line).
  bool cuda_graphs() const { return cuda_graphs_; }
  virtual void set_cuda_graphs(bool on);
  // Between begin_capture and end_capture the ops issued are recorded into a graph, not run:
  // launches and device copies as they are, uploads from a host snapshot the graph owns (so a
  // replay uploads the bytes of the capture), op timing paused. An op that would make the host
  // wait (a download, synchronize) throws Error. end_capture returns the graph, or null with
  // `reason` when it cannot be replayed safely (device memory was allocated or freed inside:
  // its addresses would be stale); abort_capture ends a capture an Error interrupted. None of
  // the captured work has run: replay the graph (or run the ops again) for its results.
  virtual void begin_capture();
  virtual std::unique_ptr<StepGraph> end_capture(std::string& reason);
  virtual void abort_capture() noexcept {}
  // Counts frees of this device's memory: a graph captured at another epoch may address a
  // freed block (GraphCache drops it). Constant on a device without graphs.
  virtual std::uint64_t memory_epoch() const { return 0; }

 protected:
  bool fuse_ = false;
  bool cuda_graphs_ = false;
};

// The ops of `device`; throws Error naming `who` when it runs none (a simulated device, whose
// runs replace the model's forward pass by a cost model).
ComputeDevice& compute_device(Device& device, const char* who);

// Times one op on a device for the scope's duration.
class OpScope {
 public:
  OpScope(Device& device, TimeCategory category) : device_(device), category_(category) {
    device_.op_begin(category_);
  }
  ~OpScope() { device_.op_end(category_); }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  Device& device_;
  TimeCategory category_;
};

// The host: memory is ordinary memory, ops run on a thread pool with the AVX2 kernels of
// kernels/cpu, timing is the steady clock.
struct CpuHugeBlocks;  // device.cpp

class CpuDevice final : public ComputeDevice {
 public:
  // threads <= 0 picks std::thread::hardware_concurrency().
  explicit CpuDevice(int threads = 0);
  ~CpuDevice();
  DeviceKind kind() const override { return DeviceKind::kCpu; }
  std::string describe() const override;
  ThreadPool& pool() { return pool_; }

  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr) override;
  void copy_to_device(void* dst, const void* host_src, std::size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, std::size_t bytes) override;
  void copy_on_device(void* dst, const void* src, std::size_t bytes) override;

  void op_begin(TimeCategory category) override;
  void op_end(TimeCategory category) override;
  double timer_overhead_s() const override { return timer_overhead_s_; }

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

  void set_fuse(bool on) override { fuse_ = on; }
  void residual_rmsnorm(float* x, const float* y, const float* w, float* out, std::int8_t* act_q, float* act_scale,
                        int rows, int dim, float eps) override;
  void rope_kv_write_f32(float* q, float* k, const float* v, const int* positions, const int* slots, int rows,
                         int n_heads, int n_kv_heads, int head_dim, const float* inv_freq, RopeStyle style,
                         float* k_cache, float* v_cache) override;
  void swiglu_quantize(float* gate, const float* up, std::int8_t* act_q, float* act_scale, int rows,
                       int width) override;

  // The reference choice itself (the host's; no download to save, but the engine's device path
  // runs and is tested on every machine). Counts its calls (tests: which path a step took).
  bool chooses_tokens() const override { return true; }
  void choose_tokens(const float* logits, int rows, int vocab, const TokenChoice& choice, const double* u,
                     int* out) override;
  long long token_choice_calls() const { return token_choice_calls_; }

 private:
  ThreadPool pool_;
  long long token_choice_calls_ = 0;
  struct OpenOp {
    TimeCategory category;
    std::uint64_t since_ns;  // when this op last resumed
  };
  std::vector<OpenOp> open_;  // innermost last
  double timer_overhead_s_ = 0;
  // Allocations of a huge page or more (the KV cache, activation buffers of long prompts) sit
  // on huge pages (inferlab/huge_pages.h): their sizes, for deallocate.
  std::unique_ptr<CpuHugeBlocks> huge_;
};

// The CPU thread pool of a device that must be a CpuDevice; throws Error naming `who` otherwise
// (a CPU-only plugin asked to run elsewhere).
ThreadPool& cpu_pool(Device& device, const char* who);

// A device of the kind an experiment asks for: cpu (threads <= 0: all cores), cuda (GPU 0) or
// sim (a SimDevice describing itself as `sim_description`; its cost model is set by the run).
// Throws Error when this build has none (cuda in a build without CUDA) or the machine has none
// (cuda without a visible GPU).
std::unique_ptr<Device> make_device(DeviceKind kind, int threads, const std::string& sim_description = "sim");

}  // namespace inferlab
