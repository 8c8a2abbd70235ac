// The two limits inferlab bench prints beside a prompt test's measured pass (bench.h): the bytes
// the pass reads at the read bandwidth, and its linears' multiply-adds at the probed peak
// (kernels/cpu/peak_probe.h) of the arithmetic each linear's kernel runs (kernels/cpu/linear_plan.h).
#include <algorithm>
#include <cstdio>
#include <map>

#include "bench.h"
#include "kernels/cpu/linear_plan.h"
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

std::pair<double, std::string> arithmetic_peak(const ArithmeticPeaks& peaks, cpu::CpuArithmetic a) {
  double peak = 0;
  switch (a) {
    case cpu::CpuArithmetic::kFp32Fma: peak = peaks.fp32_fma; break;
    case cpu::CpuArithmetic::kInt8Dot: peak = peaks.int8_dot; break;
    case cpu::CpuArithmetic::kInt16Dot: peak = peaks.int16_dot; break;
    case cpu::CpuArithmetic::kAmxInt8: peak = peaks.amx_int8; break;
    case cpu::CpuArithmetic::kAmxBf16: peak = peaks.amx_bf16; break;
  }
  if (peak > 0) return {peak, cpu::cpu_arithmetic_name(a)};
  return {peaks.fp32_fma, cpu::cpu_arithmetic_name(cpu::CpuArithmetic::kFp32Fma)};
}

void set_arithmetic_limit(const ArithmeticPeaks& peaks, const Model& model, int rows, BenchRow& r) {
  const std::vector<const Linear*> linears = model.linears();
  std::map<std::string, double> by_kernel, by_peak;  // multiply-adds
  double seconds = 0;
  for (std::size_t i = 0; i < linears.size(); ++i) {
    const Linear& l = *linears[i];
    const int n = i + 1 == linears.size() ? 1 : rows;  // the classifier: one logit row
    const double mads = static_cast<double>(l.out_features()) * l.in_features() * n;
    const std::string kernel = l.cpu_kernel(n);
    const cpu::CpuKernelInfo* info = cpu::find_cpu_kernel(kernel);
    const auto [peak, name] = arithmetic_peak(peaks, info ? info->arithmetic : cpu::CpuArithmetic::kFp32Fma);
    if (peak > 0) seconds += 2 * mads / peak;
    by_kernel[info ? kernel : "?"] += mads;
    by_peak[name] += mads;
  }
  auto most_first = [](const std::map<std::string, double>& m) {
    std::vector<std::pair<double, std::string>> v;
    for (const auto& [name, mads] : m) v.emplace_back(-mads, name);
    std::sort(v.begin(), v.end());
    return v;
  };
  r.arith_limit_s = seconds;
  const auto peaks_used = most_first(by_peak);
  r.arith_peak = peaks_used.empty() ? "" : peaks_used.front().second;
  r.kernel.clear();
  for (const auto& [mads, name] : most_first(by_kernel)) r.kernel += (r.kernel.empty() ? "" : "+") + name;
}

}  // namespace inferlab::cli
