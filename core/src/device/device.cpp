// Device, Buffer, TensorView and the CPU device (see inferlab/device/device.h).
#include "inferlab/device/device.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>

#include "inferlab/device/cuda_device.h"
#include "inferlab/error.h"
#include "inferlab/huge_pages.h"
#include "inferlab/sim/sim.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/ops_fused.h"
#include "kernels/ref/ops.h"
#include "kernels/ref/ops_fused.h"

namespace inferlab {

const char* device_kind_name(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kCpu: return "cpu";
    case DeviceKind::kCuda: return "cuda";
    case DeviceKind::kSim: return "sim";
  }
  return "unknown";
}

bool parse_device_kind(const std::string& text, DeviceKind& kind) {
  for (DeviceKind k : {DeviceKind::kCpu, DeviceKind::kCuda, DeviceKind::kSim})
    if (text == device_kind_name(k)) {
      kind = k;
      return true;
    }
  return false;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kI8: return "i8";
    case DType::kU8: return "u8";
    case DType::kI32: return "i32";
  }
  return "unknown";
}

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32: case DType::kI32: return 4;
    case DType::kF16: case DType::kBF16: return 2;
    case DType::kI8: case DType::kU8: return 1;
  }
  return 0;
}

const char* time_category_name(TimeCategory category) {
  switch (category) {
    case TimeCategory::kLinear: return "linear";
    case TimeCategory::kAttention: return "attention";
    case TimeCategory::kNormRopeAct: return "norm_rope_act";
    case TimeCategory::kSampling: return "sampling";
    case TimeCategory::kScheduler: return "scheduler";
    case TimeCategory::kFramework: return "framework";
  }
  return "unknown";
}

// ---- TensorView ---------------------------------------------------------------------------

TensorView TensorView::of(void* data, DType dtype, DeviceKind location, std::initializer_list<std::int64_t> shape) {
  check(shape.size() <= 4, "TensorView: rank " + std::to_string(shape.size()) + " > 4");
  TensorView t;
  t.data = data;
  t.dtype = dtype;
  t.location = location;
  t.rank = static_cast<int>(shape.size());
  int i = 0;
  for (std::int64_t s : shape) t.shape[static_cast<std::size_t>(i++)] = s;
  std::int64_t stride = 1;
  for (int d = t.rank - 1; d >= 0; --d) {
    t.strides[static_cast<std::size_t>(d)] = stride;
    stride *= t.shape[static_cast<std::size_t>(d)];
  }
  return t;
}

std::int64_t TensorView::numel() const {
  std::int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= shape[static_cast<std::size_t>(d)];
  return n;
}

bool TensorView::contiguous() const {
  std::int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    if (shape[static_cast<std::size_t>(d)] != 1 && strides[static_cast<std::size_t>(d)] != stride) return false;
    stride *= shape[static_cast<std::size_t>(d)];
  }
  return true;
}

// ---- Buffer -------------------------------------------------------------------------------

Buffer::Buffer(Device& device, std::size_t bytes) : device_(&device), bytes_(bytes) {
  data_ = bytes > 0 ? device.allocate(bytes) : nullptr;
}

Buffer::~Buffer() {
  if (data_ != nullptr) device_->deallocate(data_);
}

Buffer::Buffer(Buffer&& other) noexcept : device_(other.device_), data_(other.data_), bytes_(other.bytes_) {
  other.data_ = nullptr;
  other.bytes_ = 0;
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) device_->deallocate(data_);
    device_ = other.device_;
    data_ = other.data_;
    bytes_ = other.bytes_;
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

// ---- fused ops: the CPU and CUDA devices' only --------------------------------------------

namespace {

[[noreturn]] void no_fused_ops(const Device& device, const char* op) {
  throw Error(std::string("device '") + device_kind_name(device.kind()) + "' has no fused op " + op +
              ": fuse runs on cpu and cuda (allowed: [device] fuse = true with kind = \"cpu\" or \"cuda\")");
}

}  // namespace

void ComputeDevice::set_fuse(bool on) {
  if (on) no_fused_ops(*this, "(set_fuse)");
  fuse_ = false;
}
void ComputeDevice::residual_rmsnorm(float*, const float*, const float*, float*, std::int8_t*, float*, int, int, float) {
  no_fused_ops(*this, "residual_rmsnorm");
}
void ComputeDevice::rope_kv_write_f32(float*, float*, const float*, const int*, const int*, int, int, int, int,
                                      const float*, RopeStyle, float*, float*) {
  no_fused_ops(*this, "rope_kv_write_f32");
}
void ComputeDevice::rope_kv_write_half(KvDtype dtype, float* q, float* k, const float* v, const int* positions,
                                       const int* slots, int rows, int n_heads, int n_kv_heads, int head_dim,
                                       const float* inv_freq, RopeStyle style, void* k_cache, void* v_cache) {
  rope(q, k, positions, rows, n_heads, n_kv_heads, head_dim, inv_freq, style);
  kv_write_half(dtype, k_cache, v_cache, k, v, slots, rows, n_kv_heads * head_dim);
}
void ComputeDevice::swiglu_quantize(float*, const float*, std::int8_t*, float*, int, int) {
  no_fused_ops(*this, "swiglu_quantize");
}

// ---- token choice ----------------------------------------------------------------------------

const char* token_choice_name(TokenChoice::Kind kind) {
  switch (kind) {
    case TokenChoice::Kind::kNone: return "none";
    case TokenChoice::Kind::kArgmax: return "argmax";
    case TokenChoice::Kind::kSample: return "sample";
  }
  return "unknown";
}

void ComputeDevice::choose_tokens(const float*, int, int, const TokenChoice&, const double*, int*) {
  throw Error(std::string("device '") + device_kind_name(kind()) +
              "' does not choose tokens (choose_tokens): the engine asks only where chooses_tokens() is true");
}

// ---- CUDA graphs: the CUDA device's only ----------------------------------------------------

namespace {

[[noreturn]] void no_graphs(const Device& device, const char* op) {
  throw Error(std::string("device '") + device_kind_name(device.kind()) + "' has no graphs (" + op +
              "): cuda_graphs is cuda-only (allowed: [device] cuda_graphs = true with kind = \"cuda\")");
}

}  // namespace

void ComputeDevice::set_cuda_graphs(bool on) {
  if (on) no_graphs(*this, "set_cuda_graphs");
  cuda_graphs_ = false;
}
void ComputeDevice::begin_capture() { no_graphs(*this, "begin_capture"); }
std::unique_ptr<StepGraph> ComputeDevice::end_capture(std::string&) { no_graphs(*this, "end_capture"); }

// ---- CpuDevice ----------------------------------------------------------------------------

namespace {

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

}  // namespace

struct CpuHugeBlocks {
  std::mutex mutex;
  std::unordered_map<void*, std::size_t> bytes;
};

CpuDevice::CpuDevice(int threads) : pool_(threads), huge_(std::make_unique<CpuHugeBlocks>()) {
  fuse_ = fused_by_default(DeviceKind::kCpu);  // same results, fewer passes: set_fuse(false) is the ablation
  open_.reserve(8);
  // The cost of one timed op: the median of a few batches of empty begin/end pairs.
  constexpr int kPairs = 2000;
  double best = 1e9;
  for (int rep = 0; rep < 5; ++rep) {
    const std::uint64_t t0 = now_ns();
    for (int i = 0; i < kPairs; ++i) {
      op_begin(TimeCategory::kFramework);
      op_end(TimeCategory::kFramework);
    }
    best = std::min(best, static_cast<double>(now_ns() - t0) * 1e-9 / kPairs);
  }
  timer_overhead_s_ = best;
  reset_op_times();
}

std::string CpuDevice::describe() const { return "cpu (" + std::to_string(pool_.size()) + " threads)"; }

// A paged KV cache is read at scattered blocks, each a TLB miss on 4 KiB pages: SmolLM2's decode
// attention over 1500 positions (4 sequences x 30 layers, from DRAM) took 0.80-0.82x the time
// with the pool on 2 MiB pages (one thread, Zen 3, 2026-12-07). Under AddressSanitizer every
// allocation stays on the heap, so overflows remain visible.
void* CpuDevice::allocate(std::size_t bytes) {
  const std::size_t rounded = (bytes + 63) / 64 * 64;
#if !defined(INFERLAB_HUGE_PAGES_ASAN)
  if (rounded >= kHugePageBytes) {
    void* p = nullptr;
    try {
      p = allocate_huge(rounded);
    } catch (const std::bad_alloc&) {
      throw Error("cpu device: cannot allocate " + std::to_string(bytes) + " bytes");
    }
    std::memset(p, 0, rounded);  // the first touch, after the huge-page advice
    const std::lock_guard<std::mutex> lock(huge_->mutex);
    huge_->bytes[p] = rounded;
    return p;
  }
#endif
  void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (p == nullptr) throw Error("cpu device: cannot allocate " + std::to_string(bytes) + " bytes");
  std::memset(p, 0, rounded == 0 ? 64 : rounded);
  return p;
}

CpuDevice::~CpuDevice() = default;

void CpuDevice::deallocate(void* ptr) {
  {
    const std::lock_guard<std::mutex> lock(huge_->mutex);
    const auto it = huge_->bytes.find(ptr);
    if (it != huge_->bytes.end()) {
      free_huge(ptr, it->second);
      huge_->bytes.erase(it);
      return;
    }
  }
  std::free(ptr);
}

void CpuDevice::copy_to_device(void* dst, const void* host_src, std::size_t bytes) {
  if (bytes > 0) std::memcpy(dst, host_src, bytes);
}
void CpuDevice::copy_to_host(void* host_dst, const void* src, std::size_t bytes) {
  if (bytes > 0) std::memcpy(host_dst, src, bytes);
}
void CpuDevice::copy_on_device(void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0) std::memmove(dst, src, bytes);
}

void CpuDevice::op_begin(TimeCategory category) {
  const std::uint64_t now = now_ns();
  if (!open_.empty()) times_[open_.back().category] += static_cast<double>(now - open_.back().since_ns) * 1e-9;
  open_.push_back({category, now});
}

void CpuDevice::op_end(TimeCategory category) {
  const std::uint64_t now = now_ns();
  if (open_.empty() || open_.back().category != category) return;  // unmatched: ignored (called from destructors)
  times_[category] += static_cast<double>(now - open_.back().since_ns) * 1e-9;
  times_.ops++;
  open_.pop_back();
  if (!open_.empty()) open_.back().since_ns = now;
}

void CpuDevice::embedding(const float* table, const int* tokens, int rows, int dim, float* out) {
  cpu::embedding(table, tokens, rows, dim, out, pool_);
}
void CpuDevice::rmsnorm(const float* x, const float* w, float* out, int rows, int dim, float eps) {
  cpu::rmsnorm(x, w, out, rows, dim, eps, pool_);
}
void CpuDevice::rope(float* q, float* k, const int* positions, int rows, int n_heads, int n_kv_heads,
                     int head_dim, const float* inv_freq, RopeStyle style) {
  cpu::rope(q, k, positions, rows, n_heads, n_kv_heads, head_dim, inv_freq, style, pool_);
}
void CpuDevice::kv_write_f32(float* k_cache, float* v_cache, const float* k, const float* v, const int* slots,
                             int rows, int kv_dim) {
  cpu::kv_write_f32(k_cache, v_cache, k, v, slots, rows, kv_dim, pool_);
}
void CpuDevice::kv_write_int8(std::int8_t* k_codes, std::int8_t* v_codes, float* k_scale, float* v_scale,
                              const float* k, const float* v, const int* slots, int rows, int n_kv_heads,
                              int head_dim) {
  // Single-threaded: a step writes only its own rows (one per token), a few KiB.
  ref::kv_write_int8(reinterpret_cast<signed char*>(k_codes), k_scale, k, slots, rows, n_kv_heads, head_dim);
  ref::kv_write_int8(reinterpret_cast<signed char*>(v_codes), v_scale, v, slots, rows, n_kv_heads, head_dim);
}
void CpuDevice::kv_write_half(KvDtype dtype, void* k_cache, void* v_cache, const float* k, const float* v,
                              const int* slots, int rows, int kv_dim) {
  check(kv_dtype_half(dtype),
        [&] { return std::string("kv_write_half: dtype ") + kv_dtype_name(dtype) + " (allowed: f16, bf16)"; });
  // Single-threaded, as kv_write_int8: a step writes only its own rows. A whole row at once: the
  // conversion is per value, so the row's heads need no separate calls.
  const std::size_t w = static_cast<std::size_t>(kv_dim);
  for (int r = 0; r < rows; ++r) {
    const std::size_t at = static_cast<std::size_t>(slots[r]) * w * 2;  // bytes
    kv_quantize_row(dtype, kv_dim, k + static_cast<std::size_t>(r) * w, kv_dim, static_cast<char*>(k_cache) + at, nullptr);
    kv_quantize_row(dtype, kv_dim, v + static_cast<std::size_t>(r) * w, kv_dim, static_cast<char*>(v_cache) + at, nullptr);
  }
}
void CpuDevice::add(float* x, const float* y, std::size_t n) { cpu::add(x, y, n, pool_); }
void CpuDevice::swiglu(float* gate, const float* up, std::size_t n) { cpu::swiglu(gate, up, n, pool_); }
void CpuDevice::add_bias(float* y, const float* b, int rows, int width) {
  cpu::add_bias(y, b, rows, width, pool_);
}

void CpuDevice::residual_rmsnorm(float* x, const float* y, const float* w, float* out, std::int8_t* act_q,
                                 float* act_scale, int rows, int dim, float eps) {
  cpu::residual_rmsnorm(x, y, w, out, {act_q, act_scale}, rows, dim, eps, pool_);
}
void CpuDevice::rope_kv_write_f32(float* q, float* k, const float* v, const int* positions, const int* slots,
                                  int rows, int n_heads, int n_kv_heads, int head_dim, const float* inv_freq,
                                  RopeStyle style, float* k_cache, float* v_cache) {
  cpu::rope_kv_write_f32(q, k, v, positions, slots, rows, n_heads, n_kv_heads, head_dim, inv_freq, style, k_cache,
                         v_cache, pool_);
}
void CpuDevice::swiglu_quantize(float* gate, const float* up, std::int8_t* act_q, float* act_scale, int rows,
                                int width) {
  cpu::swiglu_quantize(gate, up, {act_q, act_scale}, rows, width, pool_);
}

void CpuDevice::choose_tokens(const float* logits, int rows, int vocab, const TokenChoice& choice, const double* u,
                              int* out) {
  check(choice.kind != TokenChoice::Kind::kNone, "choose_tokens: no choice to make (kind none)");
  check(choice.kind != TokenChoice::Kind::kSample || choice.temperature > 0,
        "choose_tokens: sampling needs a temperature > 0");
  check(vocab > 0, "choose_tokens: empty logits");
  ++token_choice_calls_;
  for (int r = 0; r < rows; ++r) {
    const float* row = logits + static_cast<std::size_t>(r) * static_cast<std::size_t>(vocab);  // [vocab]
    out[r] = choice.kind == TokenChoice::Kind::kArgmax ? ref::argmax(row, vocab)
                                                       : ref::sample_row(row, vocab, choice.temperature, u[r]);
  }
}

ComputeDevice& compute_device(Device& device, const char* who) {
  if (auto* ops = dynamic_cast<ComputeDevice*>(&device)) return *ops;
  throw Error(std::string(who) + " runs the model's ops, which device '" + device_kind_name(device.kind()) +
              "' has none of (a simulated device has memory and time only)");
}

ThreadPool& cpu_pool(Device& device, const char* who) {
  if (auto* cpu = dynamic_cast<CpuDevice*>(&device)) return cpu->pool();
  throw Error(std::string(who) + " runs on the cpu only; this run's device is " + device_kind_name(device.kind()));
}

#if !INFERLAB_HAVE_CUDA
bool cuda_device_visible(std::string& reason) {
  reason = "this build has no CUDA (configured with INFERLAB_CUDA=OFF, or no nvcc was found)";
  return false;
}

CudaMemoryInfo cuda_memory_info(Device& device) {
  throw Error(std::string("cuda_memory_info: this build has no CUDA; the device is ") + device_kind_name(device.kind()));
}
#endif

std::unique_ptr<Device> make_device(DeviceKind kind, int threads, const std::string& sim_description) {
  if (kind == DeviceKind::kCpu) return std::make_unique<CpuDevice>(threads);
  if (kind == DeviceKind::kSim) return std::make_unique<SimDevice>(sim_description);
#if INFERLAB_HAVE_CUDA
  return std::make_unique<CudaDevice>(0);  // throws when no GPU is visible
#else
  throw Error(std::string("device kind '") + device_kind_name(kind) +
              "': this build has no CUDA (configure with INFERLAB_CUDA=AUTO or ON and nvcc on the PATH;"
              " allowed here: cpu, sim)");
#endif
}

}  // namespace inferlab
