// Measured compute peaks of this CPU, so GEMM benchmarks report "% of peak" against a number
// taken on the machine rather than a datasheet: a register-only loop of independent
// accumulator chains (12 per thread, enough to cover the FMA latency of every x86 core in
// use), run on `threads` std::threads at once for a fixed iteration count, timed by the wall
// clock. Which instructions: gemm::kIsaName's fp32 FMA (vfmadd231ps zmm with AVX-512, ymm with
// AVX2, scalar otherwise) and for int8 `vpdpbusd` (AVX-512 VNNI) when compiled with it, else
// AVX2 `vpmaddubsw` + `vpmaddwd` (+ `vpaddd`), else none (0); and the AMX tile unit's
// (tdpbsud, and tdpbf16ps for bf16) where it runs; and the bf16 pair dot (`vdpbf16ps` zmm, AVX-512 BF16) when compiled
// with it, else none (0). Run by `inferlab_bench
// --benchmark_filter=Peak` and by the GEMM benchmarks for their peak_fraction counters.
#pragma once

namespace inferlab::cpu {

struct Peak {
  double ops_per_second = 0.0;  // flop/s (fp32: an FMA is 2) or int op/s (a multiply-add is 2)
  const char* instruction = "";
};

// fp32 FMA peak of `threads` threads running together.
Peak measure_fma_peak(int threads);
// int8 dot-product peak (u8 x s8 multiply-adds into s32 lanes) of `threads` threads.
Peak measure_int8_dot_peak(int threads);
// int16 dot-product peak (vpdpwssd: int16 pairs multiplied and summed into s32 lanes, the W4A16
// and W8A16 int16 kernels' instruction; AVX2: vpmaddwd + vpaddd) of `threads` threads; 0
// without AVX2.
Peak measure_int16_dot_peak(int threads);
// bf16 dot-product peak (vdpbf16ps: bf16 pairs multiplied and summed into fp32 lanes; an op is
// a multiply or an add, 2 per product) of `threads` threads; 0 without AVX-512 BF16.
Peak measure_bf16_dot_peak(int threads);
// The AMX matrix unit's int8 peak (tdpbsud, 16 x 16 x 64 tiles; kernels/cpu/amx.h) of `threads`
// threads; 0 where AMX does not run.
Peak measure_amx_int8_peak(int threads);
// The AMX matrix unit's bf16 peak (tdpbf16ps, 16 x 16 x 32 pair tiles into fp32) of `threads`
// threads; 0 where the bf16 tiles do not run.
Peak measure_amx_bf16_peak(int threads);

}  // namespace inferlab::cpu
