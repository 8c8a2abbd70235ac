// inferlab kernels: which CPU kernel each weight format's linear runs at each row count on this
// build and host (kernels/cpu/linear_plan.h, the plan the linears follow), for one linear shape.
#include <iostream>
#include <string>
#include <vector>

#include "bench.h"
#include "commands.h"
#include "inferlab/error.h"
#include "kernels/cpu/gemm_gguf.h"
#include "kernels/cpu/gemm_int4_panels.h"
#include "kernels/cpu/gemm_panels_int8.h"
#include "kernels/cpu/linear_plan.h"
#include "kernels/cpu/matmul_gguf.h"

namespace po = boost::program_options;

namespace inferlab::cli {

namespace {

// The format's linear of this shape as its strategy builds it on this host: what it packs at load
// is what the linears ask the same kernels' availability for (int8.cpp, int4_linear.cpp,
// gguf_linear.cpp, smoothquant.cpp, half_linear.cpp).
cpu::CpuLinearShape as_built(cpu::CpuFormat f, int out, int in, int group_size, GgmlType type, const cpu::CpuIsa& isa) {
  cpu::CpuLinearShape s{.out = out, .in = in, .group_size = group_size, .type = type};
  switch (f) {
    case cpu::CpuFormat::kF16:  // the f16 default, amx = split: two bf16 weight terms
      s.amx_packed = isa.amx_bf16;
      s.weight_terms = 2;
      break;
    case cpu::CpuFormat::kBf16:
      s.amx_packed = isa.amx_bf16;
      break;
    case cpu::CpuFormat::kW8A8:
    case cpu::CpuFormat::kW8A8PerToken:
      s.packed = cpu::gemm_panels_int8_available();
      break;
    case cpu::CpuFormat::kW4A16Int16:
    case cpu::CpuFormat::kW4A8:
      s.packed = cpu::int4_panels_available(in, group_size);
      break;
    case cpu::CpuFormat::kW4A16:
      s.packed = cpu::int4_panels_f32_available(in, group_size);
      break;
    case cpu::CpuFormat::kGguf:
      s.packed = cpu::gemm_gguf_available() && (cpu::gemm_gguf_packs(type) || cpu::gguf_transcodes_to_q8_0(type));
      if (s.packed && !cpu::gemm_gguf_packs(type)) s.type = GgmlType::kQ8_0;  // transcoded (Q5_0, IQ4_NL)
      break;
    default:
      break;
  }
  return s;
}

}  // namespace

int cmd_kernels(const std::vector<std::string>& args) {
  po::options_description o("kernels options");
  o.add_options()("rows,r", po::value<std::string>()->default_value("1,2,4,8,16,32,128"), "token rows per pass, comma-separated")(
      "out", po::value<int>()->default_value(5632), "output features of the linear (TinyLlama's gate projection)")(
      "in", po::value<int>()->default_value(2048), "input features of the linear")(
      "group-size", po::value<int>()->default_value(128), "int4 group size (w4a16, w4a16_int16, w4a8)")(
      "type", po::value<std::string>()->default_value("Q4_0"), "GGUF block type of the gguf rows (Q8_0, Q4_K, ...)")(
      "format", po::value<std::string>(), "only this format's row");
  po::variables_map vm;
  if (!parse_options(args,
                     "usage: inferlab kernels [--rows 1,2,4] [--out N] [--in N] [--group-size G] [--type T] [--format F]\n"
                     "The CPU kernel each weight format's linear runs at each row count on this build and host.",
                     o, nullptr, vm))
    return 0;
  const std::vector<int> rows = int_list("kernels", vm["rows"].as<std::string>(), "--rows (-r)", 1, 1 << 20);
  if (rows.empty()) throw Error("kernels: --rows (-r) is empty; allowed: comma-separated integers 1 .. 1048576");
  const int out = vm["out"].as<int>(), in = vm["in"].as<int>(), group = vm["group-size"].as<int>();
  if (out < 1 || in < 1) throw Error("kernels: --out and --in must be positive; allowed: integers 1 .. 2147483647");
  if (group < 8 || group % 8 != 0)
    throw Error("kernels: --group-size = " + std::to_string(group) + "; allowed: a positive multiple of 8");
  const std::string type_name = vm["type"].as<std::string>();
  GgmlType type{};
  bool known = false;
  std::string types;  // the block types the CPU kernels run (matmul_gguf.h), for the message
  for (std::uint32_t id = 0; id < 64; ++id) {
    const auto t = static_cast<GgmlType>(id);
    if (!ggml_type_supported(id) || !ggml_type_is_quantized(t) || !cpu::gguf_native_kernel(t)) continue;
    types += (types.empty() ? "" : ", ") + ggml_type_name(id);
    if (ggml_type_name(id) == type_name) type = t, known = true;
  }
  if (!known) throw Error("kernels: --type = " + type_name + "; allowed: " + types);
  std::vector<const cpu::CpuFormatInfo*> formats;
  if (vm.count("format")) {
    const cpu::CpuFormatInfo* f = cpu::find_cpu_format(vm["format"].as<std::string>());
    if (f == nullptr) {
      std::string allowed;
      for (const cpu::CpuFormatInfo& g : cpu::cpu_formats()) allowed += (allowed.empty() ? "" : ", ") + std::string(g.name);
      throw Error("kernels: --format = " + vm["format"].as<std::string>() + "; allowed: " + allowed);
    }
    formats.push_back(f);
  } else {
    for (const cpu::CpuFormatInfo& f : cpu::cpu_formats()) formats.push_back(&f);
  }

  const cpu::CpuIsa isa = cpu::CpuIsa::host();
  std::cout << "CPU linear kernels on this host (" << cpu::cpu_isa_text(isa) << "), a linear of " << out << " x " << in
            << ", int4 groups of " << group << ", GGUF " << type_name << "; columns: token rows per pass\n\n| format | strategies |";
  for (int n : rows) std::cout << " " << n << " |";
  std::cout << "\n|---|---|";
  for (std::size_t i = 0; i < rows.size(); ++i) std::cout << "---|";
  std::cout << "\n";
  std::vector<bool> used(static_cast<std::size_t>(cpu::CpuKernel::kGgufRows) + 1, false);
  for (const cpu::CpuFormatInfo* f : formats) {
    const cpu::CpuLinearShape s = as_built(f->format, out, in, group, type, isa);
    std::cout << "| " << f->name << " | " << f->plugins << " |";
    for (int n : rows) {
      const cpu::CpuKernel k = cpu::plan_cpu_linear(f->format, n, s, isa);
      used[static_cast<std::size_t>(k)] = true;
      std::cout << " " << cpu::cpu_kernel_info(k).name << " |";
    }
    std::cout << "\n";
  }
  std::cout << "\n| kernel | arithmetic | written in |\n|---|---|---|\n";
  for (std::size_t k = 0; k < used.size(); ++k) {
    if (!used[k]) continue;
    const cpu::CpuKernelInfo& info = cpu::cpu_kernel_info(static_cast<cpu::CpuKernel>(k));
    std::cout << "| " << info.name << " | " << cpu::cpu_arithmetic_name(info.arithmetic) << " | " << info.source << " |\n";
  }
  return 0;
}

}  // namespace inferlab::cli
