// The hardware profiles a simulated run can name ([device] profile). Numbers are the vendors'
// public spec-sheet values (dense tensor-core bf16/fp16, no structured sparsity):
//   A100 40GB/80GB SXM: NVIDIA A100 Tensor Core GPU datasheet (2021): 312 TFLOPS bf16,
//     624 TOPS int8 dense, 19.5 TFLOPS fp32 (off the tensor cores),
//     1,555 GB/s (40GB HBM2) and 2,039 GB/s (80GB HBM2e), NVLink 600 GB/s total (300 each way).
//   H100 SXM5 80GB: NVIDIA H100 Tensor Core GPU datasheet (2023): 989 TFLOPS bf16 dense
//     (1,979 with sparsity), 1,979 TOPS int8 dense, 67 TFLOPS fp32, 3.35 TB/s HBM3, NVLink
//     900 GB/s total (450 each way).
//   H200 SXM 141GB: NVIDIA H200 product page / datasheet (2024): 989 TFLOPS bf16 dense,
//     1,979 TOPS int8, 67 TFLOPS fp32, 4.8 TB/s HBM3e, 141 GB, NVLink 900 GB/s total.
//   The fp32 rate is what unpacking quantized weights runs at (integer and float ALU ops).
//   a100-80gb-100gbe: the A100-80GB with its GPUs linked by 100 Gb Ethernet instead of NVLink
//     (tensor parallelism across hosts, one 100 GbE NIC per GPU): 100 Gb/s = 12.5 GB/s per
//     direction (IEEE 802.3 100GBASE line rate). All-reduce latency 25 us: NCCL's own model of a
//     small (128-byte) inter-node ring all-reduce, printed in NVIDIA/nccl issue #1453 (the
//     measured time there was 61.6 us, so this is the optimistic end).
// Efficiencies, launch overhead and all-reduce latency are not spec values: they are round
// figures typical of well-tuned kernels (cuBLAS GEMMs reach ~70-80% of peak, FlashAttention
// ~50-70%, bandwidth-bound kernels ~80-90% of HBM), stated here so they can be argued with.
#include "inferlab/error.h"
#include "inferlab/sim/sim.h"

namespace inferlab {

namespace {

HwProfile make(const char* name, const char* description, double tflops, double int8_tops, double vector_tflops,
               double gb_s, double mem_gb, double link_gb_s, double link_latency_us = 8) {
  HwProfile p;
  p.name = name;
  p.description = description;
  p.peak_flops = tflops * 1e12;
  p.int8_ops = int8_tops * 1e12;
  p.vector_ops = vector_tflops * 1e12;
  p.mem_bw = gb_s * 1e9;
  p.mem_bytes = mem_gb * 1e9;
  p.link_bw = link_gb_s * 1e9;
  p.link_latency_s = link_latency_us * 1e-6;
  p.launch_s = 4e-6;
  p.eff_linear = 0.75;
  p.eff_attention = 0.6;
  p.eff_elementwise = 0.85;
  return p;
}

const std::vector<HwProfile>& profiles() {
  static const std::vector<HwProfile> all = {
      make("a100-40gb", "NVIDIA A100 SXM4 40GB (simulated)", 312, 624, 19.5, 1555, 40, 300),
      make("a100-80gb", "NVIDIA A100 SXM4 80GB (simulated)", 312, 624, 19.5, 2039, 80, 300),
      make("a100-80gb-100gbe", "NVIDIA A100 SXM4 80GB, GPUs linked by 100 Gb Ethernet (simulated)", 312, 624, 19.5,
           2039, 80, 12.5, 25),
      make("h100", "NVIDIA H100 SXM5 80GB (simulated)", 989, 1979, 67, 3350, 80, 450),
      make("h200", "NVIDIA H200 SXM 141GB (simulated)", 989, 1979, 67, 4800, 141, 450),
  };
  return all;
}

}  // namespace

const HwProfile& hw_profile(const std::string& name) {
  for (const HwProfile& p : profiles())
    if (p.name == name) return p;
  std::string known;
  for (const auto& n : hw_profile_names()) known += (known.empty() ? "" : ", ") + n;
  throw Error("unknown hardware profile '" + name + "'; allowed: " + known);
}

std::vector<std::string> hw_profile_names() {
  std::vector<std::string> names;
  for (const HwProfile& p : profiles()) names.push_back(p.name);
  return names;
}

}  // namespace inferlab
