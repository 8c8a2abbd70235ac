// cuda_roofline: times the CUDA device's ops at model shapes and prints each against a measured
// peak — bytes/s against the bandwidth of a plain copy kernel (kernels/cuda/ops.h copy_f32 over
// 1 GiB, measured here, never a datasheet number), FLOP/s against the best GEMM rate measured
// at 8192³ in the same precision. Timing is the device's own CUDA-event op timing: warm-up
// rounds, then the median of `--repeats` rounds of `--iters` launches.
// Usage: cuda_roofline [--repeats R] [--iters N]   (scripts/gpu_check.sh runs it)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "inferlab/device/cuda_device.h"
#include "inferlab/error.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/ops.h"

using namespace inferlab;

namespace {

struct Row {
  std::string op, shape;
  double seconds = 0, bytes = 0, flops = 0;
};

// Median seconds per launch of `fn` over `repeats` rounds of `iters` launches each.
double time_op(CudaDevice& dev, int repeats, int iters, const std::function<void()>& fn) {
  for (int i = 0; i < 3; ++i) fn();  // warm-up
  dev.synchronize();
  std::vector<double> per;
  for (int r = 0; r < repeats; ++r) {
    dev.reset_op_times();
    {
      OpScope t(dev, TimeCategory::kNormRopeAct);
      for (int i = 0; i < iters; ++i) fn();
    }
    per.push_back(dev.op_times()[TimeCategory::kNormRopeAct] / iters);
  }
  std::sort(per.begin(), per.end());
  return per[per.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 7, iters = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--repeats")) repeats = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--iters")) iters = std::atoi(argv[i + 1]);
  }
  try {
    CudaDevice dev(0);
    std::printf("device: %s, %d SMs, sm_%d\n", dev.describe().c_str(), dev.sm_count(), dev.compute_capability());
    const auto s = dev.stream();
    std::vector<Row> rows;

    // Peak bandwidth: copy 1 GiB (read + write 2 GiB).
    const std::size_t big = 256u << 20;  // floats
    Buffer a(dev, big * 4), b(dev, big * 4);
    const double copy_s = time_op(dev, repeats, 5, [&] { cuda::copy_f32(b.as<float>(), a.as<float>(), big, s); });
    const double peak_bw = 2.0 * big * 4 / copy_s;
    rows.push_back({"copy_f32 (peak)", "1 GiB", copy_s, 2.0 * big * 4, 0});

    // Elementwise ops at SmolLM2-135M shapes: dim 576, hidden 1536, 9 heads / 3 KV heads of 64.
    for (int tokens : {1, 64, 4096}) {
      const int d = 576, h = 1536, hd = 64, nh = 9, nkv = 3, kvd = nkv * hd;
      const std::string sh = std::to_string(tokens) + " tok";
      Buffer x(dev, 4ull * tokens * h), y(dev, 4ull * tokens * h), w(dev, 4ull * h), tok(dev, 4ull * tokens),
          q(dev, 4ull * tokens * d), k(dev, 4ull * tokens * kvd), inv(dev, 4ull * hd), cache(dev, 4ull * tokens * kvd * 2);
      const std::size_t nd = static_cast<std::size_t>(tokens) * d, nh_ = static_cast<std::size_t>(tokens) * h;
      rows.push_back({"rmsnorm", sh + " x 576",
                      time_op(dev, repeats, iters, [&] { dev.rmsnorm(x.as<float>(), w.as<float>(), y.as<float>(), tokens, d, 1e-5f); }),
                      4.0 * (2 * nd + d), 0});
      rows.push_back({"add", sh + " x 576", time_op(dev, repeats, iters, [&] { dev.add(x.as<float>(), y.as<float>(), nd); }),
                      12.0 * nd, 0});
      rows.push_back({"swiglu", sh + " x 1536",
                      time_op(dev, repeats, iters, [&] { dev.swiglu(x.as<float>(), y.as<float>(), nh_); }), 12.0 * nh_, 0});
      rows.push_back({"rope (half)", sh + " 9+3 heads",
                      time_op(dev, repeats, iters, [&] {
                        dev.rope(q.as<float>(), k.as<float>(), tok.as<int>(), tokens, nh, nkv, hd, inv.as<float>(), RopeStyle::kHalf);
                      }),
                      8.0 * tokens * (d + kvd), 0});
      rows.push_back({"embedding", sh + " x 576",
                      time_op(dev, repeats, iters, [&] { dev.embedding(x.as<float>(), tok.as<int>(), tokens, d, y.as<float>()); }),
                      8.0 * nd, 0});
      rows.push_back({"kv_write_f32", sh + " x 192",
                      time_op(dev, repeats, iters, [&] {
                        dev.kv_write_f32(cache.as<float>(), cache.as<float>() + tokens * kvd, q.as<float>(), k.as<float>(),
                                         tok.as<int>(), tokens, kvd);
                      }),
                      16.0 * tokens * kvd, 0});
    }

    // GEMMs: peak = the rate at 8192³; then the model's shapes (decode 1 and 64 rows, prefill 4096).
    auto gemm_rows = [&](const char* name, int type) {  // 0 f32, 1 f16, 2 bf16
      const std::size_t e = type == 0 ? 4 : 2;
      auto run = [&](int n, int out, int in) {
        Buffer xa(dev, e * n * in), wa(dev, e * out * in), ya(dev, 4ull * n * out);
        return time_op(dev, repeats, std::max(1, iters / 4), [&] {
          if (type == 0)
            cuda::gemm_f32(dev.cublas(), xa.as<float>(), wa.as<float>(), ya.as<float>(), n, out, in);
          else
            cuda::gemm_half(dev.cublas(), xa.as<std::uint16_t>(), wa.as<std::uint16_t>(), ya.as<float>(), n, out, in,
                            type == 1 ? cuda::HalfType::kF16 : cuda::HalfType::kBF16);
        });
      };
      const double t_peak = run(8192, 8192, 8192);
      rows.push_back({std::string(name) + " (peak)", "8192^3", t_peak, 0, 2.0 * 8192.0 * 8192.0 * 8192.0});
      for (auto [n, out, in] : {std::tuple{1, 1536, 576}, std::tuple{64, 1536, 576}, std::tuple{4096, 1536, 576},
                                std::tuple{1, 49152, 576}, std::tuple{64, 49152, 576}})
        rows.push_back({name, std::to_string(n) + "x" + std::to_string(in) + " . " + std::to_string(out) + "x" +
                                  std::to_string(in) + "^T",
                        run(n, out, in), e * (static_cast<double>(n) * in + static_cast<double>(out) * in) + 4.0 * n * out,
                        2.0 * n * out * in});
    };
    gemm_rows("gemm_f32", 0);
    gemm_rows("gemm_f16", 1);
    gemm_rows("gemm_bf16", 2);

    std::printf("\n| op | shape | time (us) | GB/s | %% of copy BW | TFLOP/s | %% of GEMM peak |\n|---|---|---|---|---|---|---|\n");
    double gemm_peak = 0;
    for (const Row& r : rows) {
      if (r.op.find("(peak)") != std::string::npos && r.flops > 0) gemm_peak = r.flops / r.seconds;
      const double bw = r.bytes / r.seconds, fl = r.flops / r.seconds;
      std::printf("| %s | %s | %.2f | %.0f | %.0f%% | %s | %s |\n", r.op.c_str(), r.shape.c_str(), r.seconds * 1e6,
                  bw / 1e9, 100.0 * bw / peak_bw, r.flops > 0 ? std::to_string(fl / 1e12).substr(0, 6).c_str() : "-",
                  r.flops > 0 ? (std::to_string(static_cast<int>(100.0 * fl / gemm_peak)) + "%").c_str() : "-");
    }
    std::printf("\npeak copy bandwidth measured: %.0f GB/s (H200 HBM3e nominal ~4800 GB/s)\n", peak_bw / 1e9);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_roofline: %s\n", e.what());
    return 1;
  }
  return 0;
}
