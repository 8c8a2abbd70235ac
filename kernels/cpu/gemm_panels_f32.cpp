// Packed fp32 GEMM: see gemm_panels_f32.h for the layout, the blocking and the contract; the
// algorithm is gemm_panels_impl.h's, here with fp32 weights.
#include "kernels/cpu/gemm_panels_f32.h"

#include <string>

#include "inferlab/error.h"
#include "kernels/cpu/gemm_panels_impl.h"

namespace inferlab::cpu {
namespace {

struct LoadF32 {
  using Storage = float;
  static gemm::Vec::V load(const float* p) { return gemm::Vec::load(p); }
};

}  // namespace

PackedPanelsF32 pack_panels_f32(const float* w, int out, int in) {
  check(out > 0 && in > 0, [&] {
    return "pack_panels_f32: out and in must be positive, got out=" + std::to_string(out) + " in=" + std::to_string(in);
  });
  PackedPanelsF32 packed;
  packed.out = out;
  packed.in = in;
  packed.data.resize(static_cast<std::size_t>(out) * in);
  gemm::pack_panels(w, out, in, packed.data.data());
  return packed;
}

void unpack_panel_row_f32(const PackedPanelsF32& w, int row, float* out) {
  check(row >= 0 && row < w.out, [&] {
    return "unpack_panel_row_f32: row " + std::to_string(row) + " outside [0, " + std::to_string(w.out) + ")";
  });
  gemm::unpack_panel_row(w.data.data(), w.out, w.in, row, out, [](float v) { return v; });
}

void gemm_panels_f32(const float* x, const PackedPanelsF32& w, float* y, int n, ThreadPool& pool) {
  gemm::gemm_panels<LoadF32>(x, w.data.data(), w.out, w.in, y, n, pool);
}

void gemm_panels_f32_group(const float* x, std::span<const GemmPanelsF32Output> group, int n, ThreadPool& pool) {
  gemm::gemm_panels_outputs<LoadF32>("gemm_panels_f32_group", x, group, n, pool);
}

}  // namespace inferlab::cpu
