// The CPU linears' kernel plan and format table: see linear_plan.h.
#include "kernels/cpu/linear_plan.h"

#include <algorithm>
#include <iterator>

#include "kernels/cpu/amx.h"

namespace inferlab::cpu {

CpuIsa CpuIsa::host() {
  CpuIsa isa;
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  isa.avx512 = true;
#if defined(__AVX512VNNI__)
  isa.vnni = true;
#endif
#endif
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
  isa.avx2 = true;
#endif
  isa.amx_int8 = amx_int8_enabled();
  isa.amx_bf16 = amx_bf16_enabled();
  return isa;
}

std::string cpu_isa_text(const CpuIsa& isa) {
  const std::string v = isa.vnni ? "AVX-512 VNNI" : isa.avx512 ? "AVX-512" : isa.avx2 ? "AVX2" : "scalar";
  return v + ", AMX int8 " + (isa.amx_int8 ? "on" : "off") + ", AMX bf16 " + (isa.amx_bf16 ? "on" : "off");
}

const CpuKernelInfo& cpu_kernel_info(CpuKernel k) {
  using A = CpuArithmetic;
  static const CpuKernelInfo kInfo[] = {
      {"panels_f32", A::kFp32Fma, "kernels/cpu/gemm_panels_f32.h"},
      {"panels_half", A::kFp32Fma, "kernels/cpu/gemm_panels_half.h"},
      {"amx_bf16", A::kAmxBf16, "kernels/cpu/gemm_amx_bf16.h"},
      {"panels_w8", A::kFp32Fma, "kernels/cpu/gemm_panels_w8.h"},
      {"panels_w8_int16", A::kInt16Dot, "kernels/cpu/gemm_w8_int16.h"},
      {"int8_stream", A::kFp32Fma, "kernels/cpu/matmul_int8.h"},
      {"int8_tiles", A::kFp32Fma, "kernels/cpu/matmul_int8.h"},
      {"int8_amx", A::kAmxBf16, "kernels/cpu/matmul_int8_amx.h"},
      {"amx_dequant", A::kAmxBf16, "kernels/cpu/gemm_amx_dequant.h"},
      {"panels_int8", A::kInt8Dot, "kernels/cpu/gemm_panels_int8.h"},
      {"panels_int8_amx", A::kAmxInt8, "kernels/cpu/gemm_panels_int8.h"},
      {"per_token_amx", A::kAmxInt8, "kernels/cpu/gemm_panels_int8.h"},
      {"int8_act_rows", A::kInt8Dot, "kernels/cpu/matmul_int8_act.h"},
      {"int8_loop", A::kInt8Dot, "plugins/quantization/smoothquant/smoothquant.cpp"},
      {"int4_rows", A::kFp32Fma, "kernels/cpu/matmul_int4_rows.h"},
      {"int4_dequant", A::kFp32Fma, "kernels/cpu/matmul_int4.h"},
      {"int4_panels", A::kInt8Dot, "kernels/cpu/gemm_int4_panels.h"},
      {"int4_panels_amx", A::kAmxInt8, "kernels/cpu/gemm_int4_panels.h"},
      {"int4_panels_int16", A::kInt16Dot, "kernels/cpu/gemm_int4_panels.h"},
      {"int4_panels_f32", A::kFp32Fma, "kernels/cpu/gemm_int4_panels.h"},
      {"int4_act_rows", A::kInt8Dot, "kernels/cpu/matmul_int4_act.h"},
      {"gguf_panels", A::kInt8Dot, "kernels/cpu/gemm_gguf.h"},
      {"gguf_panels_amx", A::kAmxInt8, "kernels/cpu/gemm_gguf.h"},
      {"gguf_avx2", A::kInt8Dot, "kernels/cpu/gemm_gguf_avx2.h"},
      {"gguf_act_rows", A::kInt8Dot, "kernels/cpu/matmul_gguf.h"},
      {"gguf_rows", A::kFp32Fma, "kernels/cpu/matmul_gguf.h"},
  };
  static_assert(std::size(kInfo) == static_cast<std::size_t>(CpuKernel::kGgufRows) + 1, "one row per kernel");
  return kInfo[static_cast<std::size_t>(k)];
}

const CpuKernelInfo* find_cpu_kernel(std::string_view name) {
  for (int k = 0; k <= static_cast<int>(CpuKernel::kGgufRows); ++k) {
    const CpuKernelInfo& info = cpu_kernel_info(static_cast<CpuKernel>(k));
    if (name == info.name) return &info;
  }
  return nullptr;
}

const char* cpu_arithmetic_name(CpuArithmetic a) {
  switch (a) {
    case CpuArithmetic::kFp32Fma: return "fp32 FMA";
    case CpuArithmetic::kInt8Dot: return "int8 dot";
    case CpuArithmetic::kInt16Dot: return "int16 dot";
    case CpuArithmetic::kAmxInt8: return "AMX int8";
    case CpuArithmetic::kAmxBf16: return "AMX bf16";
  }
  return "?";
}

namespace {

// W8A16 past its panels: matmul_int8's choice.
CpuKernel plan_int8_rows(int n, int in, const CpuIsa& isa) {
  // Wide: the row stream's tile of activations (up to 4 rows) would not stay in L1.
  const bool wide = sizeof(float) * static_cast<std::size_t>(std::min(n, 4)) * static_cast<std::size_t>(in) > kStreamActBytes;
  if (isa.amx_bf16 && n >= (wide ? kInt8AmxWideMinRows : kInt8AmxMinRows) && n <= kInt8AmxMaxRows)
    return CpuKernel::kInt8Amx;
  if (isa.amx_bf16 && n > kInt8AmxMaxRows && in >= kAmxDequantMinIn) return CpuKernel::kAmxDequant;
  return isa.avx512 && n < kInt8WidenOnceRows ? CpuKernel::kInt8Stream : CpuKernel::kInt8Tiles;
}

// W4A16: matmul_int4's choice.
CpuKernel plan_int4_rows(int n, int in, int group_size, const CpuIsa& isa) {
  const bool lookup = isa.avx512 && group_size > 0 && group_size % 8 == 0 &&
                      (128 % group_size == 0 || group_size % 128 == 0);
  if (n <= kInt4RowsMaxRows && lookup) return CpuKernel::kInt4Rows;
  const bool codes = group_size % 32 == 0;  // groups of whole tile steps: the codes, scaled per group
  if (isa.amx_bf16 && n >= (codes ? kInt4AmxCodesMinRows : kInt4AmxMinRows) && in >= kAmxDequantMinIn)
    return CpuKernel::kAmxDequant;
  return CpuKernel::kInt4Dequant;
}

}  // namespace

CpuKernel plan_cpu_linear(CpuFormat f, int n, const CpuLinearShape& s, const CpuIsa& isa) {
  switch (f) {
    case CpuFormat::kF32:
      return CpuKernel::kPanelsF32;
    case CpuFormat::kF16:
    case CpuFormat::kBf16:
      return s.amx_packed && isa.amx_bf16 && n >= amx_bf16_min_rows(f == CpuFormat::kBf16 ? 1 : s.weight_terms)
                 ? CpuKernel::kAmxBf16
                 : CpuKernel::kPanelsHalf;
    case CpuFormat::kW8A16:  // without the AMX tiles the panels serve every row count
      return s.packed && (n <= kW8PanelMaxRows || !isa.amx_bf16) ? CpuKernel::kPanelsW8 : plan_int8_rows(n, s.in, isa);
    case CpuFormat::kW8A16Int16:  // as W8A16: the AMX tiles' prefill past kW8PanelMaxRows
      return s.packed && (n <= kW8PanelMaxRows || !isa.amx_bf16) ? CpuKernel::kPanelsW8Int16 : plan_int8_rows(n, s.in, isa);
    case CpuFormat::kW8A8:
      if (!s.packed) return CpuKernel::kInt8ActRows;
      // AVX2 without AVX-512: the int16 panels with the int8 blocks widened (gemm_w8_int16.h's
      // widen_act_blocks_int16: gemm_panels_int8's bits, 0.73-0.84x its time from 3 rows).
      if (isa.avx2 && !isa.avx512 && s.in % 32 == 0) return CpuKernel::kPanelsW8Int16;
      return isa.amx_int8 && n >= kAmxBlocksMinRows && s.out % 32 == 0 && s.in % 32 == 0 ? CpuKernel::kPanelsInt8Amx
                                                                                          : CpuKernel::kPanelsInt8;
    case CpuFormat::kW8A8PerToken:
      if (!s.packed) return CpuKernel::kInt8Loop;
      // As W8A8: the int16 panels on AVX2 without AVX-512, one int32 sum a row (the same bits).
      if (isa.avx2 && !isa.avx512 && s.in % 32 == 0 && s.in <= 65536) return CpuKernel::kPanelsW8Int16;
      return isa.amx_int8 && n >= kPerTokenAmxMinRows && s.out % 32 == 0 && s.in % 64 == 0 && s.in <= 65536
                 ? CpuKernel::kPerTokenAmx
                 : CpuKernel::kPanelsInt8;
    case CpuFormat::kW4A16:  // the panels where packed (at load: int4_panels_f32_available), else the rows
      return s.packed ? CpuKernel::kInt4PanelsF32 : plan_int4_rows(n, s.in, s.group_size, isa);
    case CpuFormat::kW4A16Int16:
      return s.packed ? CpuKernel::kInt4PanelsInt16 : plan_int4_rows(n, s.in, s.group_size, isa);
    case CpuFormat::kW4A8:
      if (!s.packed) return CpuKernel::kInt4ActRows;
      return isa.amx_int8 && n >= kInt4PanelsAmxMinRows ? CpuKernel::kInt4PanelsAmx : CpuKernel::kInt4Panels;
    case CpuFormat::kGguf:
      if (s.packed) {
        if (!isa.vnni) return CpuKernel::kGgufAvx2;
        return isa.amx_int8 && n >= kAmxBlocksMinRows && s.type != GgmlType::kQ6_K ? CpuKernel::kGgufPanelsAmx
                                                                                   : CpuKernel::kGgufPanels;
      }
      return isa.amx_bf16 && n >= kGgufAmxMinRows ? CpuKernel::kAmxDequant : CpuKernel::kGgufActRows;
    case CpuFormat::kGgufFp32:
      return isa.amx_bf16 && n >= kGgufAmxMinRows ? CpuKernel::kAmxDequant : CpuKernel::kGgufRows;
  }
  return CpuKernel::kPanelsF32;
}

const std::vector<CpuFormatInfo>& cpu_formats() {
  static const std::vector<CpuFormatInfo> kFormats = {
      {CpuFormat::kF32, "f32", "none; the fp32 classifiers", "fp32"},
      {CpuFormat::kF16, "f16", "f16", "IEEE half (AMX: amx = split, two bf16 terms; bf16, one)"},
      {CpuFormat::kBf16, "bf16", "bf16", "bfloat16"},
      {CpuFormat::kW8A16, "w8a16", "int8 activations = fp32 (auto on cuda and portable builds)", "int8 per output channel, fp32 activations"},
      {CpuFormat::kW8A16Int16, "w8a16_int16", "int8 activations = int16 (auto on AVX2 / AVX-512)",
       "int8 per output channel, int16 activations per 32"},
      {CpuFormat::kW8A8, "w8a8", "int8 activations = int8", "int8 per output channel, int8 activations per 32"},
      {CpuFormat::kW8A8PerToken, "w8a8_per_token", "smoothquant", "int8 per output channel, int8 activations per token"},
      {CpuFormat::kW4A16, "w4a16", "int4 / gptq / awq activations = fp32", "int4 groups, fp32 activations"},
      {CpuFormat::kW4A16Int16, "w4a16_int16", "int4 / gptq / awq activations = int16",
       "int4 groups, int16 activations per 32"},
      {CpuFormat::kW4A8, "w4a8", "int4 (not g32) / gptq / awq activations = int8",
       "int4 groups, int8 activations per 32"},
      {CpuFormat::kGguf, "gguf", "gguf (default); int4 g32", "a GGUF block type, int8 activations per block"},
      {CpuFormat::kGgufFp32, "gguf_fp32", "gguf activations = fp32", "a GGUF block type, fp32 activations"},
  };
  return kFormats;
}

const CpuFormatInfo* find_cpu_format(std::string_view name) {
  for (const CpuFormatInfo& f : cpu_formats())
    if (name == f.name) return &f;
  return nullptr;
}

}  // namespace inferlab::cpu
