// The two limits inferlab bench prints beside a prompt test's measured pass (bench.h): the bytes
// the pass reads at the read bandwidth, and its linears' multiply-adds at the probed peak of
// the arithmetic the stack's format allows (kernels/cpu/peak_probe.h).
#include <cstdio>

#include "bench.h"
#include "kernels/cpu/gemm_amx_bf16.h"
#include "kernels/cpu/peak_probe.h"

namespace inferlab::cli {

ArithmeticPeaks ArithmeticPeaks::probe(int threads) {
  ArithmeticPeaks p;
  p.fp32_fma = cpu::measure_fma_peak(threads).ops_per_second;
  p.bf16_dot = cpu::measure_bf16_dot_peak(threads).ops_per_second;
  p.int8_dot = cpu::measure_int8_dot_peak(threads).ops_per_second;
  p.int16_dot = cpu::measure_int16_dot_peak(threads).ops_per_second;
  p.amx_int8 = cpu::measure_amx_int8_peak(threads).ops_per_second;
  p.amx_bf16 = cpu::measure_amx_bf16_peak(threads).ops_per_second;
  return p;
}

std::string ArithmeticPeaks::describe() const {
  char text[200];
  std::snprintf(text, sizeof text, "fp32 FMA %.0f GFLOP/s, bf16 dot %.0f GFLOP/s, int8 dot %.0f Gop/s, int16 dot %.0f Gop/s",
                fp32_fma / 1e9, bf16_dot / 1e9, int8_dot / 1e9, int16_dot / 1e9);
  std::string out = text;
  if (amx_bf16 > 0 || amx_int8 > 0) {
    std::snprintf(text, sizeof text, ", AMX bf16 %.0f GFLOP/s, AMX int8 %.0f Gop/s", amx_bf16 / 1e9, amx_int8 / 1e9);
    out += text;
  }
  return out;
}

std::pair<double, std::string> arithmetic_peak(const ArithmeticPeaks& peaks, const LinearArithmetic& a,
                                               bool bf16_weights, int rows) {
  if (a.native) return {peaks.fp32_fma, "fp32 FMA"};
  if (a.int16_dot && peaks.int16_dot > 0) return {peaks.int16_dot, "int16 dot"};  // no tile form
  // The bf16 strategy's tiles start below one full token tile (gemm_amx_bf16.h).
  if (rows >= (bf16_weights && !a.int8_mma ? cpu::kAmxBf16MinRows : kBenchAmxRows)) {
    if (a.int8_mma && peaks.amx_int8 > 0) return {peaks.amx_int8, "AMX int8"};
    if (!a.int8_mma && peaks.amx_bf16 > 0) return {peaks.amx_bf16, "AMX bf16"};
  }
  if (a.int8_mma && peaks.int8_dot > 0) return {peaks.int8_dot, "int8 dot"};
  if (bf16_weights && peaks.bf16_dot > 0) return {peaks.bf16_dot, "bf16 dot"};
  return {peaks.fp32_fma, "fp32 FMA"};
}

double pass_multiply_adds(const ModelConfig& cfg, int rows) {
  const double d = cfg.dim, h = cfg.hidden_dim, kv = cfg.kv_dim();
  const double per_layer = d * d + 2 * kv * d + d * d + 3 * h * d;  // wq, wk, wv, wo, w1, w2, w3
  return per_layer * cfg.n_layers * rows + static_cast<double>(cfg.vocab_size) * d;
}

}  // namespace inferlab::cli
