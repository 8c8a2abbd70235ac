// Peak probes: see peak_probe.h. The loops keep every operand in registers; the iteration
// count is read through a volatile so the compiler cannot fold the chains away, and the
// accumulators are summed into a volatile sink at the end.
#include "kernels/cpu/peak_probe.h"

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "kernels/cpu/amx.h"
#include "kernels/cpu/gemm_vec.h"

namespace inferlab::cpu {
namespace {

constexpr int kChains = 12;
constexpr long kIterations = 20'000'000;
volatile float g_float_sink = 0.0f;
volatile std::int32_t g_int_sink = 0;
volatile float g_one = 0.9999999f;
volatile long g_iterations = kIterations;

// Per iteration: kChains FMAs of Vec::kWidth lanes.
void fma_loop() {
  using V = gemm::Vec::V;
  const V m = gemm::Vec::broadcast(g_one), c = gemm::Vec::broadcast(1e-7f);
  V acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = gemm::Vec::broadcast(static_cast<float>(i));
  const long n = g_iterations;
  for (long it = 0; it < n; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = gemm::Vec::fmadd(acc[i], m, c);
  V s = acc[0];
  for (int i = 1; i < kChains; ++i) s = gemm::Vec::add(s, acc[i]);
  alignas(64) float lanes[gemm::Vec::kWidth];
  gemm::Vec::store(lanes, s);
  g_float_sink = lanes[0];
}

#if defined(__AVX512VNNI__) && defined(__AVX512F__)
// kChains chains of Dot (an AVX-512 VNNI dot product into int32 lanes: c + a . b), the operands
// small enough that the sums stay far from overflow.
template <class Dot>
void vnni_loop() {
  const __m512i a = _mm512_set1_epi8(static_cast<char>(g_iterations & 3)), b = _mm512_set1_epi8(1);
  __m512i acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_epi32(i);
  const long n = g_iterations;
  for (long it = 0; it < n; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = Dot{}(acc[i], a, b);
  __m512i s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_epi32(s, acc[i]);
  alignas(64) std::int32_t lanes[16];
  _mm512_store_si512(lanes, s);
  g_int_sink = lanes[0];
}
struct DotBusd {
  __m512i operator()(__m512i c, __m512i a, __m512i b) const { return _mm512_dpbusd_epi32(c, a, b); }
};
struct DotWssd {
  __m512i operator()(__m512i c, __m512i a, __m512i b) const { return _mm512_dpwssd_epi32(c, a, b); }
};
constexpr int kInt8MacsPerChainOp = 64;  // vpdpbusd zmm: 16 lanes x 4 byte products
constexpr const char* kInt8Instruction = "vpdpbusd zmm (avx512_vnni)";
void int8_loop() { vnni_loop<DotBusd>(); }
#elif defined(__AVX2__)
// AVX2 has 16 vector registers: kChains operations an iteration as two rounds into 6 sums, each
// product independent of the sums (as in the kernels), with its own operand b[i] so no two are
// the same value, and `a` passed through an empty asm between rounds so nothing is hoisted out
// of the loop or shared between rounds (a loop-invariant product timed only the vpaddd: the
// int8 probe read 220 Gop/s on a Zen 3 that runs 2 multiplies a cycle).
constexpr int kAvx2Sums = kChains / 2;
template <class Product>
void avx2_loop(Product product) {
  __m256i a = _mm256_set1_epi8(static_cast<char>(g_iterations & 1));
  __m256i b[kAvx2Sums], acc[kAvx2Sums];
  for (int i = 0; i < kAvx2Sums; ++i) {
    b[i] = _mm256_set1_epi8(static_cast<char>(i + 1));
    acc[i] = _mm256_set1_epi32(i);
  }
  const long n = g_iterations;
  for (long it = 0; it < n; ++it)
    for (int round = 0; round < 2; ++round) {
      asm volatile("" : "+x"(a));
#pragma GCC unroll 6
      for (int i = 0; i < kAvx2Sums; ++i) acc[i] = _mm256_add_epi32(acc[i], product(a, b[i]));
    }
  __m256i s = acc[0];
  for (int i = 1; i < kAvx2Sums; ++i) s = _mm256_add_epi32(s, acc[i]);
  alignas(32) std::int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  g_int_sink = lanes[0];
}
constexpr int kInt8MacsPerChainOp = 32;  // maddubs + madd + add on ymm: 32 byte products
constexpr const char* kInt8Instruction = "vpmaddubsw + vpmaddwd ymm (avx2)";
void int8_loop() {
  const __m256i ones = _mm256_set1_epi16(1);
  avx2_loop([ones](__m256i a, __m256i b) { return _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones); });
}
#else
constexpr int kInt8MacsPerChainOp = 0;
constexpr const char* kInt8Instruction = "none (no AVX2 in this build)";
void int8_loop() {}
#endif

#if defined(__AVX512VNNI__) && defined(__AVX512F__)
constexpr int kInt16MacsPerChainOp = 32;  // vpdpwssd zmm: 16 lanes x 2 int16 products
constexpr const char* kInt16Instruction = "vpdpwssd zmm (avx512_vnni)";
void int16_loop() { vnni_loop<DotWssd>(); }
#elif defined(__AVX2__)
constexpr int kInt16MacsPerChainOp = 16;  // madd + add on ymm: 8 lanes x 2 int16 products
constexpr const char* kInt16Instruction = "vpmaddwd + vpaddd ymm (avx2)";
void int16_loop() {
  avx2_loop([](__m256i a, __m256i b) { return _mm256_madd_epi16(a, b); });
}
#else
constexpr int kInt16MacsPerChainOp = 0;
constexpr const char* kInt16Instruction = "none (no AVX2 in this build)";
void int16_loop() {}
#endif

#if defined(__AVX512BF16__) && defined(__AVX512F__)
constexpr int kBf16MacsPerChainOp = 32;  // vdpbf16ps zmm: 16 fp32 lanes x 2 bf16 products
constexpr const char* kBf16Instruction = "vdpbf16ps zmm (avx512_bf16)";
void bf16_loop() {
  const __m512bh a = reinterpret_cast<__m512bh>(_mm512_set1_epi16(static_cast<short>(0x3f80 + (g_iterations & 1))));
  const __m512bh b = reinterpret_cast<__m512bh>(_mm512_set1_epi16(0x3380));  // bf16 6e-8: the sums stay finite
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const long n = g_iterations;
  for (long it = 0; it < n; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  __m512 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  g_float_sink = lanes[0];
}
#else
constexpr int kBf16MacsPerChainOp = 0;
constexpr const char* kBf16Instruction = "none (no AVX-512 BF16 in this build)";
void bf16_loop() {}
#endif

#if INFERLAB_AMX_INT8 || INFERLAB_AMX_BF16
// Per iteration: 4 independent tile products (C tiles 0-3 from A tiles 4, 5 and B tiles 6, 7),
// so the matrix unit never waits on a result: tdpbsud of 16 x 16 x 64 int8, or (Bf16) tdpbf16ps
// of 16 x 16 x 32 bf16 pairs into fp32.
template <bool Bf16>
constexpr double kAmxOpsPerIteration = 4.0 * 2 * 16 * 16 * (Bf16 ? 32 : 64);
template <bool Bf16>
void amx_loop() {
  amx_full_tiles().load();
  // int8: the bytes 1, 0, 0, ...; bf16: 1.0, then zeros
  alignas(64) static const std::uint16_t data[16 * 32] = {Bf16 ? std::uint16_t{0x3F80} : std::uint16_t{1}};
  _tile_loadd(4, data, 64);
  _tile_loadd(5, data, 64);
  _tile_loadd(6, data, 64);
  _tile_loadd(7, data, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const long n = g_iterations / 16;  // 16 cycles a product: as long as the other loops
  for (long it = 0; it < n; ++it) {
    if constexpr (Bf16) {
#if INFERLAB_AMX_BF16
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
#endif
    } else {
#if INFERLAB_AMX_INT8
      _tile_dpbsud(0, 4, 6);
      _tile_dpbsud(1, 4, 7);
      _tile_dpbsud(2, 5, 6);
      _tile_dpbsud(3, 5, 7);
#endif
    }
  }
  alignas(64) std::int32_t out[16 * 16];  // the bits of the sums: only kept alive
  _tile_stored(0, out, 64);
  g_int_sink = out[0];
  AmxConfig::release();
}
#endif

// Ops per second of `loop` on `threads` threads started together.
double run_threads(int threads, void (*loop)(), double ops_per_thread) {
  if (threads < 1) threads = 1;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(loop);
  loop();
  for (auto& t : pool) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return ops_per_thread * threads / seconds;
}

}  // namespace

Peak measure_fma_peak(int threads) {
  const double ops = 2.0 * gemm::Vec::kWidth * kChains * static_cast<double>(kIterations);
  return {run_threads(threads, fma_loop, ops), gemm::kIsaName};
}

Peak measure_int8_dot_peak(int threads) {
  if (kInt8MacsPerChainOp == 0) return {0.0, kInt8Instruction};
  const double ops = 2.0 * kInt8MacsPerChainOp * kChains * static_cast<double>(kIterations);
  return {run_threads(threads, int8_loop, ops), kInt8Instruction};
}

Peak measure_int16_dot_peak(int threads) {
  if (kInt16MacsPerChainOp == 0) return {0.0, kInt16Instruction};
  const double ops = 2.0 * kInt16MacsPerChainOp * kChains * static_cast<double>(kIterations);
  return {run_threads(threads, int16_loop, ops), kInt16Instruction};
}

Peak measure_bf16_dot_peak(int threads) {
  if (kBf16MacsPerChainOp == 0) return {0.0, kBf16Instruction};
  const double ops = 2.0 * kBf16MacsPerChainOp * kChains * static_cast<double>(kIterations);
  return {run_threads(threads, bf16_loop, ops), kBf16Instruction};
}

Peak measure_amx_int8_peak(int threads) {
#if INFERLAB_AMX_INT8
  if (amx_int8_enabled())
    return {run_threads(threads, amx_loop<false>, kAmxOpsPerIteration<false> * static_cast<double>(kIterations / 16)), "tdpbsud (amx_int8)"};
  return {0.0, "tdpbsud (amx_int8): not granted by the kernel, or INFERLAB_AMX=0"};
#else
  (void)threads;
  return {0.0, "none (no AMX int8 in this build)"};
#endif
}

Peak measure_amx_bf16_peak(int threads) {
#if INFERLAB_AMX_BF16
  if (amx_bf16_enabled())
    return {run_threads(threads, amx_loop<true>, kAmxOpsPerIteration<true> * static_cast<double>(kIterations / 16)),
            "tdpbf16ps (amx_bf16)"};
  return {0.0, "tdpbf16ps (amx_bf16): not granted by the kernel, or INFERLAB_AMX=0"};
#else
  (void)threads;
  return {0.0, "none (no AMX bf16 in this build)"};
#endif
}

}  // namespace inferlab::cpu
