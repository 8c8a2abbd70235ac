// Native GGUF-block matmuls (see matmul_gguf.h). One Format per block type says how to get a
// block's half-chunk scales/offsets and a chunk's 32 codes; one kernel template runs them all.
#include "kernels/cpu/matmul_gguf.h"
#include "kernels/cpu/amx.h"
#include "kernels/cpu/decode_prefetch.h"
#include "kernels/cpu/dot_tile.h"
#include "kernels/cpu/gemm_amx_dequant.h"
#include "kernels/cpu/matmul_gguf_formats.h"
#include "kernels/cpu/simd.h"

#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <vector>

#include "inferlab/error.h"
#include "inferlab/gguf_blocks.h"
#include "kernels/ref/matmul_int8.h"

namespace inferlab::cpu {
namespace {

using namespace gguf_formats;  // NOLINT: the format table below is this file's vocabulary

// The activations of one call as each kernel variant reads them.
struct FloatActs {
  const float* x;       // [n, in]
  const float* sum16;   // [n, in / 16] sums of x
  std::size_t stride, sum_stride;
};
struct BlockActs {
  const std::int8_t* xq;  // [n, in]
  const float* xs;        // [n, in / 32]
  const int* sum16;       // [n, in / 16] sums of xq
  std::size_t stride, scale_stride, sum_stride;
};

// y[r * ys] (r < R) = row · x_r for one weight row of `blocks` blocks.
template <class F, int R, class Acts>
void row_dot(const std::uint8_t* row, int blocks, const Acts& a, float* y, std::size_t ys) {
  constexpr int kChunks = F::kElems / kChunk;
  constexpr bool kInt = std::is_base_of_v<BlockActs, Acts>;
  float off[R] = {};
  float acc[R] = {};
#if INFERLAB_GGUF_AVX2
  __m256 vacc[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) vacc[r] = _mm256_setzero_ps();
#endif
  HalfScales hs;
  for (int blk = 0; blk < blocks; ++blk) {
    const std::uint8_t* b = row + static_cast<std::size_t>(blk) * F::kBytes;
    F::scales(b, hs);
    for (int c = 0; c < kChunks; ++c) {
      const int k = blk * kChunks + c;  // chunk index along the row
      const float sa = hs.s[2 * c], sb = hs.s[2 * c + 1];
#if INFERLAB_GGUF_AVX2
      const __m256i u = F::codes(b, c);
      if constexpr (kInt) {
        const __m256i ones = _mm256_set1_epi16(1);
        const __m256i mag = F::kSigned ? _mm256_sign_epi8(u, u) : u;  // maddubs wants unsigned left
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.xq + r * a.stride + k * kChunk));
          if (F::kSigned) x = _mm256_sign_epi8(x, u);
          // int32 lanes 0-3: the first 16 products, 4-7: the second 16
          const __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(mag, x), ones);
          const float sx = a.xs[r * a.scale_stride + static_cast<std::size_t>(k)];
          const __m256 scale = _mm256_set_m128(_mm_set1_ps(sb * sx), _mm_set1_ps(sa * sx));
          vacc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, vacc[r]);
          if (F::kOffsets) {
            const int* s16 = a.sum16 + r * a.sum_stride + 2 * k;
            off[r] += sx * (hs.o[2 * c] * static_cast<float>(s16[0]) + hs.o[2 * c + 1] * static_cast<float>(s16[1]));
          }
        }
      } else {
        const __m128i lo = _mm256_castsi256_si128(u), hi = _mm256_extracti128_si256(u, 1);
        auto widen = [](__m128i v) {
          return _mm256_cvtepi32_ps(F::kSigned ? _mm256_cvtepi8_epi32(v) : _mm256_cvtepu8_epi32(v));
        };
        const __m256 c0 = widen(lo), c1 = widen(_mm_srli_si128(lo, 8)), c2 = widen(hi), c3 = widen(_mm_srli_si128(hi, 8));
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          const float* x = a.x + r * a.stride + k * kChunk;
          const __m256 fa = _mm256_fmadd_ps(c1, _mm256_loadu_ps(x + 8), _mm256_mul_ps(c0, _mm256_loadu_ps(x)));
          const __m256 fb = _mm256_fmadd_ps(c3, _mm256_loadu_ps(x + 24), _mm256_mul_ps(c2, _mm256_loadu_ps(x + 16)));
          vacc[r] = _mm256_fmadd_ps(fb, _mm256_set1_ps(sb), _mm256_fmadd_ps(fa, _mm256_set1_ps(sa), vacc[r]));
          if (F::kOffsets) {
            const float* s16 = a.sum16 + r * a.sum_stride + 2 * k;
            off[r] += hs.o[2 * c] * s16[0] + hs.o[2 * c + 1] * s16[1];
          }
        }
      }
#else
      int codes[kChunk];
      for (int i = 0; i < kChunk; ++i) codes[i] = F::code(b, c, i);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
        for (int half = 0; half < 2; ++half) {
          const float s = half ? sb : sa, o = hs.o[2 * c + half];
          if constexpr (kInt) {
            int dot = 0;
            for (int i = half * kHalf; i < (half + 1) * kHalf; ++i) dot += codes[i] * a.xq[r * a.stride + k * kChunk + i];
            const float sx = a.xs[r * a.scale_stride + static_cast<std::size_t>(k)];
            acc[r] += sx * (s * static_cast<float>(dot) + o * static_cast<float>(a.sum16[r * a.sum_stride + 2 * k + half]));
          } else {
            float dot = 0.0f;
            for (int i = half * kHalf; i < (half + 1) * kHalf; ++i)
              dot += static_cast<float>(codes[i]) * a.x[r * a.stride + k * kChunk + i];
            acc[r] += s * dot + o * a.sum16[r * a.sum_stride + 2 * k + half];
          }
        }
#endif
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#if INFERLAB_GGUF_AVX2
    acc[r] += hsum(vacc[r]);
#endif
    y[static_cast<std::size_t>(r) * ys] = acc[r] + off[r];
  }
}

// Block blk's term of row r: its activation scale times the super-block's d times the integer dot
// product with the sub-block scales, plus the mins' term (row_dot_k).
template <class F>
[[gnu::always_inline]] inline float k_block_term(const KIntScales& ks, const BlockActs& a, int r, int blk, int dot) {
  constexpr int kChunks = F::kElems / kChunk;
  const int* s16 = a.sum16 + r * a.sum_stride + static_cast<std::size_t>(blk) * (2 * kChunks);
  int mins = 0;
  if constexpr (F::kOffsets)
    for (int h = 0; h < 2 * kChunks; ++h) mins += ks.mn[h] * s16[h];
  return a.xs[r * a.scale_stride + static_cast<std::size_t>(blk)] *
         (ks.D * static_cast<float>(dot) + ks.M * static_cast<float>(mins));
}

// A K-quant row against activation blocks of 256 (one scale per super-block): the 8 sub-block dots
// are weighted by their integer scales and summed in integer lanes; one float step per block.
template <class F, int R>
void row_dot_k(const std::uint8_t* row, int blocks, const BlockActs& a, float* y, std::size_t ys) {
  constexpr int kChunks = F::kElems / kChunk;
  float acc[R] = {};
  KIntScales ks;
  for (int blk = 0; blk < blocks; ++blk) {
    const std::uint8_t* b = row + static_cast<std::size_t>(blk) * F::kBytes;
    F::int_scales(b, ks);
#if INFERLAB_GGUF_AVX2
    if constexpr (F::kSigned) {
      // Signed codes (IQ4_XS) chunk by chunk: each chunk's |codes| and scales made once and taken
      // by every row at once, R int32 sums live. Held across the rows as below, a block's 8 chunks
      // of codes and scales spilled 10 ymm a block in the 4-row kernel under AVX-512, where vpsignb
      // has no EVEX form and keeps to ymm0-15; chunk by chunk it is 1.1-1.15x faster at 4 rows
      // (Zen 4, 576 x 1536, hot; 2026-12-07). Integer sums: the same result in either order.
      __m256i isum[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int c = 0; c < kChunks; ++c) {
        const __m256i u = F::codes(b, c), au = _mm256_abs_epi8(u);  // maddubs wants unsigned left
        const __m256i sv = _mm256_set_m128i(_mm_set1_epi16(ks.sc[2 * c + 1]), _mm_set1_epi16(ks.sc[2 * c]));
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          const std::int8_t* x = a.xq + r * a.stride + static_cast<std::size_t>(blk) * F::kElems + c * kChunk;
          const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
          isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(_mm256_maddubs_epi16(au, _mm256_sign_epi8(xv, u)), sv));
          pin(isum[r]);  // a chain: GCC's tree over the block's 8 chunks spilled its leaves
        }
      }
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r] += k_block_term<F>(ks, a, r, blk, hsum_i32(isum[r]));
    } else {
      // Unsigned codes: a block's chunks of codes and scales made once and held across the rows,
      // each row one chain over them (chunk by chunk as above took 1.2-1.4x the time at 4 rows
      // for Q2_K / Q3_K on the Zen 4).
      __m256i u[kChunks], sv[kChunks];
      for (int c = 0; c < kChunks; ++c) {
        u[c] = F::codes(b, c);
        sv[c] = _mm256_set_m128i(_mm_set1_epi16(ks.sc[2 * c + 1]), _mm_set1_epi16(ks.sc[2 * c]));
      }
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const std::int8_t* x = a.xq + r * a.stride + static_cast<std::size_t>(blk) * F::kElems;
        __m256i isum = _mm256_setzero_si256();
        for (int c = 0; c < kChunks; ++c) {
          const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + c * kChunk));
          isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(u[c], xv), sv[c]));
        }
        acc[r] += k_block_term<F>(ks, a, r, blk, hsum_i32(isum));
      }
    }
#else
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const std::int8_t* x = a.xq + r * a.stride + static_cast<std::size_t>(blk) * F::kElems;
      int dot = 0;
      for (int c = 0; c < kChunks; ++c)
        for (int i = 0; i < kChunk; ++i) dot += ks.sc[2 * c + i / kHalf] * F::code(b, c, i) * x[c * kChunk + i];
      acc[r] += k_block_term<F>(ks, a, r, blk, dot);
    }
#endif
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) y[static_cast<std::size_t>(r) * ys] = acc[r];
}

// The row kernel for a format and activations: K-quants against int8 blocks take row_dot_k.
template <class F, int R, class Acts>
void row_kernel(const std::uint8_t* row, int blocks, const Acts& a, float* y, std::size_t ys) {
  if constexpr (std::is_base_of_v<BlockActs, Acts> && F::kElems == ref::kGgufSuper)
    row_dot_k<F, R>(row, blocks, a, y, ys);
  else
    row_dot<F, R>(row, blocks, a, y, ys);
}

// Threads split the output rows; tokens go 4 at a time so a chunk is unpacked once for 4 rows.
template <class F, class Acts>
void run_rows(const std::uint8_t* w, const Acts& acts, float* y, int n, int out, int in, ThreadPool& pool) {
  const int blocks = in / F::kElems;
  const std::size_t row_bytes = static_cast<std::size_t>(blocks) * F::kBytes, ys = static_cast<std::size_t>(out);
  // Decode and a few rows stream each weight row once and spend many instructions per byte:
  // prefetch the stream decode_prefetch_bytes() ahead (decode_prefetch.h), a row's lines as the
  // row starts.
  const int ahead = decode_prefetch_bytes();
  parallel_for_channels(pool, n, out, in, [&](int o0, int o1) {
    for (int o = o0; o < o1; ++o) {
      const std::uint8_t* row = w + static_cast<std::size_t>(o) * row_bytes;
      prefetch_ahead(row, row_bytes, ahead);
      int r = 0;
      for (; r + 4 <= n; r += 4) {
        Acts at = acts;
        at.advance(r);
        row_kernel<F, 4>(row, blocks, at, y + r * ys + o, ys);
      }
      for (; r < n; ++r) {
        Acts at = acts;
        at.advance(r);
        row_kernel<F, 1>(row, blocks, at, y + r * ys + o, ys);
      }
    }
  });
}

constexpr const char* kNativeNames = "Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS";

// fn.template operator()<F>() for the Format of `type` (one of gguf_native_kernel's types).
template <class Fn>
void with_format(GgmlType type, const Fn& fn) {
  switch (type) {
    case GgmlType::kQ8_0: return fn.template operator()<FormatQ8_0>();
    case GgmlType::kQ4_0: return fn.template operator()<FormatQ4_0>();
    case GgmlType::kQ4_1: return fn.template operator()<FormatQ4_1>();
    case GgmlType::kQ4_K: return fn.template operator()<FormatQ4_K>();
    case GgmlType::kQ5_K: return fn.template operator()<FormatQ5_K>();
    case GgmlType::kQ6_K: return fn.template operator()<FormatQ6_K>();
    case GgmlType::kQ5_0: return fn.template operator()<FormatQ5_0>();
    case GgmlType::kQ5_1: return fn.template operator()<FormatQ5_1>();
    case GgmlType::kIQ4_NL: return fn.template operator()<FormatIQ4_NL>();
    case GgmlType::kQ2_K: return fn.template operator()<FormatQ2_K>();
    case GgmlType::kQ3_K: return fn.template operator()<FormatQ3_K>();
    case GgmlType::kIQ4_XS: return fn.template operator()<FormatIQ4_XS>();
    default: break;
  }
}

void check_shape(GgmlType type, int in) {
  const std::size_t per = ggml_block_elements(type);
  // Every call: the messages only on a failure.
  check(gguf_native_kernel(type), [&] {
    return "matmul_gguf: no native kernel for GGML type " + ggml_type_name(static_cast<std::uint32_t>(type)) + " (" +
           kNativeNames + ")";
  });
  check(in > 0 && static_cast<std::size_t>(in) % per == 0, [&] {
    return "matmul_gguf: in = " + std::to_string(in) + " is not a multiple of the " +
           ggml_type_name(static_cast<std::uint32_t>(type)) + " block of " + std::to_string(per);
  });
}

template <class Acts>
void dispatch(GgmlType type, const std::uint8_t* w, const Acts& acts, float* y, int n, int out, int in, ThreadPool& pool) {
  check_shape(type, in);
  with_format(type, [&]<class F>() { run_rows<F>(w, acts, y, n, out, in, pool); });
}

#if INFERLAB_AMX_BF16
// The blocks of one matrix as gemm_amx_dequant's row dequantiser reads them.
struct BlockRows {
  const std::uint8_t* w;
  std::size_t row_bytes;
  int blocks;
};

// Row o as fp32: each half-chunk of 16 codes widened and mapped by its s * c + o in one FMA.
template <class F>
void dequantize_block_row(const void* ctx, int o, float* dst) {
  const auto& m = *static_cast<const BlockRows*>(ctx);
  const std::uint8_t* row = m.w + static_cast<std::size_t>(o) * m.row_bytes;
  HalfScales hs;
  for (int blk = 0; blk < m.blocks; ++blk) {
    const std::uint8_t* b = row + static_cast<std::size_t>(blk) * F::kBytes;
    F::scales(b, hs);
    for (int c = 0; c < F::kElems / kChunk; ++c) {
      const __m256i u = F::codes(b, c);
      float* d = dst + static_cast<std::size_t>(blk) * F::kElems + c * kChunk;
      for (int half = 0; half < 2; ++half) {
        const __m128i h = half ? _mm256_extracti128_si256(u, 1) : _mm256_castsi256_si128(u);
        // zero-mask forms: GCC 12 warns on the plain ones (see gemm_panels_int8.cpp)
        const __m512i wide = F::kSigned ? _mm512_maskz_cvtepi8_epi32(0xFFFF, h) : _mm512_maskz_cvtepu8_epi32(0xFFFF, h);
        _mm512_storeu_ps(d + half * kHalf,
                         _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, wide), _mm512_set1_ps(hs.s[2 * c + half]),
                                         _mm512_set1_ps(hs.o[2 * c + half])));
      }
    }
  }
}
#endif

// Where the AMX bf16 tiles run and n >= kGgufAmxMinRows: y = x · Wᵀ on them (gemm_amx_dequant.h),
// each weight row dequantised once to two bf16 terms for all n rows; false otherwise.
bool try_amx(GgmlType type, const std::uint8_t* w, const float* x, float* y, int n, int out, int in,
             ThreadPool& pool) {
  if (plan_cpu_linear(CpuFormat::kGgufFp32, n, CpuLinearShape{.out = out, .in = in, .type = type}, CpuIsa::host()) !=
      CpuKernel::kAmxDequant)
    return false;
#if INFERLAB_AMX_BF16
  check_shape(type, in);
  const BlockRows rows{w, ggml_tensor_bytes(type, static_cast<std::uint64_t>(in)),
                       in / static_cast<int>(ggml_block_elements(type))};
  AmxDequantWeights wd;
  with_format(type, [&]<class F>() { wd.row = &dequantize_block_row<F>; });
  wd.ctx = &rows;
  wd.out = out;
  wd.in = in;
  wd.weight_terms = 3;
  gemm_amx_dequant(x, n, wd, y, pool);
  return true;
#else
  (void)type, (void)w, (void)x, (void)y, (void)out, (void)in, (void)pool;
  return false;
#endif
}

}  // namespace

bool gguf_native_kernel(GgmlType type) {
  switch (type) {
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
    case GgmlType::kQ5_0:
    case GgmlType::kQ5_1:
    case GgmlType::kIQ4_NL:
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
    case GgmlType::kIQ4_XS:
      return true;
    default:
      return false;
  }
}

int gguf_act_block(GgmlType type) {
  return gguf_native_kernel(type) && ggml_block_elements(type) == ref::kGgufSuper ? ref::kGgufSuper : ref::kActBlock;
}

void matmul_gguf(GgmlType type, const std::uint8_t* w, const float* x, float* y, int n, int out, int in,
                 ThreadPool& pool) {
  if (n <= 0 || out <= 0) return;
  if (try_amx(type, w, x, y, n, out, in, pool)) return;
  const int halves = in / kHalf;
  std::vector<float> sum16(static_cast<std::size_t>(n) * static_cast<std::size_t>(std::max(halves, 0)));  // [n, in / 16]
  for (int r = 0; r < n; ++r)
    for (int h = 0; h < halves; ++h) {
      float s = 0.0f;
      for (int i = 0; i < kHalf; ++i) s += x[static_cast<std::size_t>(r) * in + h * kHalf + i];
      sum16[static_cast<std::size_t>(r) * halves + h] = s;
    }
  struct Acts : FloatActs {
    void advance(int r) {
      x += static_cast<std::size_t>(r) * stride;
      sum16 += static_cast<std::size_t>(r) * sum_stride;
    }
  };
  Acts acts;
  acts.x = x;
  acts.sum16 = sum16.data();
  acts.stride = static_cast<std::size_t>(in);
  acts.sum_stride = static_cast<std::size_t>(halves);
  dispatch(type, w, acts, y, n, out, in, pool);
}

void matmul_gguf_act(GgmlType type, const std::uint8_t* w, const std::int8_t* xq, const float* xs, float* y, int n,
                     int out, int in, ThreadPool& pool) {
  if (n <= 0 || out <= 0) return;
  if (plan_cpu_linear(CpuFormat::kGguf, n, CpuLinearShape{.out = out, .in = in, .type = type, .packed = false},
                      CpuIsa::host()) == CpuKernel::kAmxDequant) {
    // The activation blocks as fp32 values (xq * xs, rounded once), then the tiles as matmul_gguf.
    const int block = gguf_act_block(type);
    thread_local std::vector<float> xf;
    xf.resize(static_cast<std::size_t>(n) * in);
    const std::size_t scales = static_cast<std::size_t>((in + block - 1) / block);
    for (int r = 0; r < n; ++r)
      for (int k = 0; k < in; ++k)
        xf[static_cast<std::size_t>(r) * in + k] =
            static_cast<float>(xq[static_cast<std::size_t>(r) * in + k]) * xs[r * scales + static_cast<std::size_t>(k / block)];
    if (try_amx(type, w, xf.data(), y, n, out, in, pool)) return;
  }
  const int halves = in / kHalf;
  std::vector<int> sum16(static_cast<std::size_t>(n) * static_cast<std::size_t>(std::max(halves, 0)));  // [n, in / 16]
  for (int r = 0; r < n; ++r)
    for (int h = 0; h < halves; ++h) {
      int s = 0;
      for (int i = 0; i < kHalf; ++i) s += xq[static_cast<std::size_t>(r) * in + h * kHalf + i];
      sum16[static_cast<std::size_t>(r) * halves + h] = s;
    }
  struct Acts : BlockActs {
    void advance(int r) {
      xq += static_cast<std::size_t>(r) * stride;
      xs += static_cast<std::size_t>(r) * scale_stride;
      sum16 += static_cast<std::size_t>(r) * sum_stride;
    }
  };
  Acts acts;
  acts.xq = xq;
  acts.xs = xs;
  acts.sum16 = sum16.data();
  acts.stride = static_cast<std::size_t>(in);
  acts.scale_stride = static_cast<std::size_t>((in + gguf_act_block(type) - 1) / gguf_act_block(type));
  acts.sum_stride = static_cast<std::size_t>(halves);
  dispatch(type, w, acts, y, n, out, in, pool);
}

}  // namespace inferlab::cpu
