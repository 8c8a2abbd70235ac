// Intel AMX (Advanced Matrix Extensions: Sapphire Rapids and later Xeons) for the int8 GEMMs:
// eight tile registers of up to 16 rows x 64 bytes and a matrix unit (TMUL) whose `tdpb*d`
// multiplies a 16 x K int8 tile by a K x 16 one into 16 x 16 int32 sums (K <= 64) in about
// 16 cycles, whatever K: 2048 int8 ops a cycle per core at K = 64, 16 times AVX-512 VNNI's.
// Two conditions beside the compiler's (-march=native on such a CPU defines __AMX_INT8__):
//  - Linux hands the tile state (XTILEDATA, 8 KiB per thread) only to a process that asks for
//    it (arch_prctl ARCH_REQ_XCOMP_PERM, Linux 5.16+); amx_int8_enabled() asks once;
//  - each thread loads its own tile configuration (AmxConfig::load) before its first tile
//    instruction; tile state is per thread.
// INFERLAB_AMX=0 in the environment, or set_amx_int8(false), keeps the kernels on AVX-512 VNNI
// (the A/B of `inferlab_bench`, the parity tests); INFERLAB_AMX=0 or set_amx_bf16(false) keeps
// the half-precision linears on their fp32 panels.
#pragma once
#include <cstdint>

#if defined(__AMX_TILE__) && defined(__AMX_INT8__) && defined(__AVX512F__) && defined(__AVX512BW__) && \
    defined(__AVX512VNNI__)
#define INFERLAB_AMX_INT8 1
#endif
// The bf16 tiles (`tdpbf16ps`, gemm_amx_bf16.h) with AVX-512 BF16 for rounding x to bf16.
#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512F__) && defined(__AVX512BF16__)
#define INFERLAB_AMX_BF16 1
#endif

namespace inferlab::cpu {

// True when this build has the AMX int8 kernels (compile-time).
bool amx_int8_built();
// True when they run: built, the kernel granted the tile state, and not switched off.
bool amx_int8_enabled();
// Switches them on (when amx_int8_built() and the kernel grants the state) or off, process-wide;
// returns the previous amx_int8_enabled().
bool set_amx_int8(bool on);
// The same three for the bf16 tiles (the same INFERLAB_AMX=0 switch, a separate setter).
bool amx_bf16_built();
bool amx_bf16_enabled();
bool set_amx_bf16(bool on);

// A tile configuration (palette 1): rows and bytes per row of each of the 8 tiles.
struct alignas(64) AmxConfig {
  std::uint8_t palette = 1, start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
  AmxConfig& tile(int t, int r, int bytes) {
    rows[t] = static_cast<std::uint8_t>(r);
    colsb[t] = static_cast<std::uint16_t>(bytes);
    return *this;
  }
  // Loads it on the calling thread (ldtilecfg); release() frees the thread's tile state.
  void load() const;
  static void release();
};

// Every one of the 8 tiles at its largest, 16 rows x 64 bytes: the configuration the full-tile
// kernels (gemm_amx_bf16, gemm_amx_dequant, matmul_int8_amx, the int8 panels, the peak probe) load.
const AmxConfig& amx_full_tiles();

}  // namespace inferlab::cpu
