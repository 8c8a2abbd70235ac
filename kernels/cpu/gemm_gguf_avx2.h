// gemm_gguf's AVX2 micro-tiles (gemm_gguf_avx2.cpp), for builds without AVX-512 VNNI: the same
// packed panels (gemm_gguf_layout.h) and activation tiles (act_tiles.h), read with `vpmaddubsw`
// instead of `vpdpbusd`. Internal to kernels/cpu: gemm_gguf.cpp's group dispatch calls it.
#pragma once
#include "inferlab/ggml_types.h"
#include "kernels/cpu/act_tiles.h"
#include "kernels/cpu/gemm_gguf.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__) && \
    !(defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__))
#define INFERLAB_GEMM_GGUF_AVX2 1
#endif

namespace inferlab::cpu {

#if INFERLAB_GEMM_GGUF_AVX2
// y [n, w.out] columns of panels [p0, p1) = a's n token rows x W's panels (any packed type). a:
// pack_act_tiles(..., block 32, half sums where W is Q6_K) of activations in [-127, 127]
// (cpu::quantize_act_rows), which keeps every int16 sum inside its range.
void gemm_gguf_avx2_panels(const ActTiles& a, const PackedGguf& w, float* y, int n, int p0, int p1);
#endif

}  // namespace inferlab::cpu
