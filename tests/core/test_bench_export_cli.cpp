// `inferlab bench` (llama-bench-style tests, CSV / JSON / Markdown columns, the cached bandwidth
// probe, bad values refused naming the flag) and `inferlab export --format gguf` end to end.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "format_writers.h"
#include "inferlab/formats/formats.h"
#include "inferlab/model/model_config.h"
#include "inferlab/model/weights.h"
#include "kernels/cpu/amx.h"
#include "kernels/cpu/gemm_gguf.h"
#include "kernels/cpu/linear_plan.h"
#include "test_support.h"

namespace inferlab {
namespace {

using testing::run_inferlab;

// The tiny preset on 1 thread; by default pp8, tg4 and tg4 x2 @ d8 for two stacks, 2 repetitions.
std::string tiny_bench(const testing::TempDir& dir, const std::string& tests = "-p 8 -n 4 --batch 2 --context 8 -r 2",
                       const std::string& quantization = "none,int8") {
  return "bench --preset stories260k " + tests + " -t 1 --attention naive --quantization " + quantization +
         " --bandwidth-cache " + dir.file("bw.tsv") + " --log warn ";
}

std::vector<std::vector<std::string>> csv_rows(const std::string& text, const testing::TempDir& dir) {
  testing::write_file(dir.file("out.csv"), text);
  return testing::read_csv(dir.file("out.csv"));
}

TEST(BenchCli, CsvHasTheColumnsAndOneRowPerStackAndTest) {
  testing::TempDir dir("bench_csv");
  const auto r = run_inferlab(tiny_bench(dir) + "-o csv");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto rows = csv_rows(r.out, dir);
  ASSERT_EQ(rows.size(), 1u + 3 * 2) << r.out;
  const std::vector<std::string> header = {
      "model", "size_bytes", "params", "backend", "threads", "attention", "quantization", "test", "n_prompt", "n_gen",
      "n_batch", "n_depth", "repetitions", "avg_ts", "stddev_ts", "avg_gbs", "bandwidth_gbs", "roofline_frac",
      "probe_gbs", "roofline_now_frac", "ratio_to_first", "cost_vs_pp1", "read_limit_ms", "arith_limit_ms", "arith_peak", "kernel"};
  EXPECT_EQ(rows[0], header);
  const std::vector<std::string> tests = {"pp8", "pp8", "tg4", "tg4", "tg4 x2 @ d8", "tg4 x2 @ d8"};
  const long long params = preset_config("stories260k").parameter_count();
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const auto& row = rows[i];
    ASSERT_EQ(row.size(), header.size());
    EXPECT_EQ(row[7], tests[i - 1]);
    EXPECT_EQ(row[6], i % 2 ? "none" : "int8");
    EXPECT_EQ(row[2], std::to_string(params));
    EXPECT_EQ(row[3], "CPU fused");  // the CPU's default
    EXPECT_EQ(row[4], "1");
    EXPECT_EQ(row[12], "2");
    EXPECT_GT(std::stod(row[13]), 0.0);
    EXPECT_GE(std::stod(row[14]), 0.0);
    EXPECT_GT(std::stod(row[15]), 0.0);   // bytes moved
    EXPECT_GT(std::stod(row[16]), 0.0);   // probed bandwidth
    EXPECT_NEAR(std::stod(row[17]), std::stod(row[15]) / std::stod(row[16]), 1e-6 + 1e-6 * std::stod(row[17]));
    // The probe passes around each repetition: a bandwidth, and the row's GB/s as a fraction of
    // it (a mean of per-repetition fractions, so only its order of magnitude follows from the means).
    EXPECT_GT(std::stod(row[18]), 0.0);
    EXPECT_GT(std::stod(row[19]), 0.0);
    EXPECT_NEAR(std::stod(row[19]), std::stod(row[15]) / std::stod(row[18]), 0.5 * std::stod(row[19]));
    if (i % 2) {
      EXPECT_EQ(row[20], "1");  // the first stack is the reference
    }
  }
  // int8 weights are smaller than fp32 ones.
  EXPECT_LT(std::stoll(rows[2][1]), std::stoll(rows[1][1]));
  EXPECT_EQ(rows[5][9], "4");
  EXPECT_EQ(rows[5][10], "2");
  EXPECT_EQ(rows[5][11], "8");
}

TEST(BenchCli, RowCountSweepPrintsCostsBesideBothLimits) {
  testing::TempDir dir("bench_sweep");
  const std::string sweep = tiny_bench(dir, "-p 1,2,4 -n 2 -r 2", "none,int8:activations=int8") + "--bandwidth 20 ";
  const auto r = run_inferlab(sweep + "-o csv");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto rows = csv_rows(r.out, dir);
  ASSERT_EQ(rows.size(), 1u + 4 * 2) << r.out;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const auto& row = rows[i];
    SCOPED_TRACE(row[6] + " " + row[7]);
    if (row[7] == "tg2") {  // not a pass of the sweep: no cost, no limits
      EXPECT_EQ(row[21], "0");
      EXPECT_EQ(row[22], "0");
      EXPECT_EQ(row[24], "");
      continue;
    }
    const int k = std::stoi(row[8]);
    if (k == 1) EXPECT_EQ(row[21], "1");
    else EXPECT_GT(std::stod(row[21]), 0.0);
    EXPECT_GT(std::stod(row[22]), 0.0);
    EXPECT_GT(std::stod(row[23]), 0.0);
    // W8A8's kernel at the preset's 64-input linears (most of its multiply-adds): on AVX2 builds
    // without AVX-512 the int16 panels (vpmaddwd), else the int8 panels.
    const std::string w8a8_peak = cpu::cpu_arithmetic_name(
        cpu::cpu_kernel_info(cpu::plan_cpu_linear(cpu::CpuFormat::kW8A8, k, cpu::CpuLinearShape{.out = 64, .in = 64},
                                                  cpu::CpuIsa::host()))
            .arithmetic);
    EXPECT_EQ(row[24], row[6] == "none" ? "fp32 FMA" : w8a8_peak);
    EXPECT_NE(row[25], "");  // the kernels the pass ran
  }
  // Rows 1, 3, 5: stack none at pp1, pp2, pp4. The read limit is the weights once for every k
  // (plus k rows of K/V); the arithmetic limit grows with the rows (the one logit row aside).
  EXPECT_NEAR(std::stod(rows[5][22]), std::stod(rows[1][22]), 0.2 * std::stod(rows[1][22]));
  EXPECT_GT(std::stod(rows[5][23]), 2.5 * std::stod(rows[1][23]));
  const auto m = run_inferlab(sweep + "-o md");
  ASSERT_EQ(m.code, 0) << m.err;
  EXPECT_NE(m.out.find("| stack | k | ms | cost | read limit ms | arithmetic limit ms | peak | kernels | × limit |"),
            std::string::npos)
      << m.out;
  EXPECT_NE(m.out.find("| naive + int8:activations=int8 | 4 | "), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("fp32 FMA "), std::string::npos) << m.out;
  // Without a pp1 there is nothing to be a cost over: no sweep table.
  const auto none = run_inferlab(tiny_bench(dir, "-p 4 -n '' -r 1", "none") + "-o md");
  ASSERT_EQ(none.code, 0) << none.err;
  EXPECT_EQ(none.out.find("| stack | k | ms | cost |"), std::string::npos) << none.out;
}

// From 16 rows the prefill kernels multiply on the AMX tiles where they run, so the arithmetic
// limit takes the tiles' probed peak: int8 activations the int8 tiles, the bf16 weights the bf16
// ones (from 7 rows: at 8 the bf16 tiles, the others not yet); fp32 weights stay on the FMAs; one
// row keeps the vector units' peaks. int4 with int16 activations takes the int16 dot at every row
// count (its kernel has no tile form).
// The arithmetic limit takes, per linear, the peak of the kernel its plan runs (kernels/cpu/
// linear_plan.h): the kernel column names them (most multiply-adds first) and the peak column
// is the first one's arithmetic.
TEST(BenchCli, EachPassTakesThePeakOfTheKernelsItsLinearsRun) {
  testing::TempDir dir("bench_amx_peak");
  const auto r = run_inferlab(
      tiny_bench(dir, "-p 1,8,16 -n '' -r 1", "none,bf16,int8:activations=int8,int4:activations=int16") +
      "--bandwidth 20 -o csv");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto rows = csv_rows(r.out, dir);
  ASSERT_EQ(rows.size(), 1u + 3 * 4) << r.out;
  ASSERT_EQ(rows[0][24], "arith_peak");
  ASSERT_EQ(rows[0][25], "kernel");
  auto arithmetic_of = [](const std::string& kernel) -> std::string {
    for (int k = 0; k <= static_cast<int>(cpu::CpuKernel::kGgufRows); ++k) {
      const cpu::CpuKernelInfo& info = cpu::cpu_kernel_info(static_cast<cpu::CpuKernel>(k));
      if (kernel == info.name) return cpu::cpu_arithmetic_name(info.arithmetic);
    }
    return "unknown kernel " + kernel;
  };
  const bool amx_bf16 = cpu::amx_bf16_enabled(), amx_int8 = cpu::amx_int8_enabled();
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const auto& row = rows[i];
    SCOPED_TRACE(row[6] + " " + row[8] + " rows: " + row[24] + ", " + row[25]);
    const std::string first = row[25].substr(0, row[25].find('+'));
    const std::string arithmetic = arithmetic_of(first);
#if defined(__AVX512VNNI__)
    EXPECT_EQ(row[24], arithmetic);
#else
    if (arithmetic != "int16 dot") {
      EXPECT_EQ(row[24], arithmetic);  // else no int16 probe here: the FMA's peak
    }
#endif
    EXPECT_GT(std::stod(row[23]), 0.0);  // arith_limit_ms
    const int k = std::stoi(row[8]);
    if (row[6] == "none") {
      EXPECT_EQ(row[25], "panels_f32");
    }
    if (row[6] == "bf16") {
      EXPECT_EQ(row[25], amx_bf16 && k >= cpu::kAmxBf16MinRows ? "amx_bf16" : "panels_half");
    }
    if (row[6] == "int8:activations=int8" && k >= cpu::kAmxBlocksMinRows && amx_int8) {
      EXPECT_NE(row[25].find("panels_int8_amx"), std::string::npos);  // the linears of whole panels and blocks
    }
    if (row[6] == "int8:activations=int8" && k < cpu::kAmxBlocksMinRows) {
      EXPECT_EQ(row[25].find("amx"), std::string::npos);
    }
#if defined(__AVX512VNNI__)
    if (row[6] == "int4:activations=int16") {
      EXPECT_NE(row[25].find("int4_panels_int16"), std::string::npos);
    }
#endif
  }
}

// inferlab kernels prints the plan's kernel per format and row count for this host, and refuses an
// unknown format or block type naming what is allowed.
TEST(KernelsCli, PrintsThePlanPerFormatAndRowCountAndRefusesUnknownNames) {
  const auto r = run_inferlab("kernels --rows 1,16 --format w8a16");
  ASSERT_EQ(r.code, 0) << r.err;
  const cpu::CpuLinearShape shape{.out = 5632, .in = 2048};  // the command's default linear; W8A16 packs its panels
  const cpu::CpuIsa isa = cpu::CpuIsa::host();
  const std::string want = std::string("| w8a16 | int8 activations = fp32 (auto on cuda and portable builds) | ") +
                           cpu::cpu_kernel_info(cpu::plan_cpu_linear(cpu::CpuFormat::kW8A16, 1, shape, isa)).name + " | " +
                           cpu::cpu_kernel_info(cpu::plan_cpu_linear(cpu::CpuFormat::kW8A16, 16, shape, isa)).name + " |";
  EXPECT_NE(r.out.find(want), std::string::npos) << r.out;
  const auto bad_type = run_inferlab("kernels --type Q9");
  EXPECT_NE(bad_type.code, 0);
  EXPECT_NE(bad_type.err.find("--type = Q9; allowed: "), std::string::npos) << bad_type.err;
  EXPECT_NE(bad_type.err.find("Q4_K"), std::string::npos) << bad_type.err;
  const auto bad_format = run_inferlab("kernels --format w9");
  EXPECT_NE(bad_format.code, 0);
  EXPECT_NE(bad_format.err.find("--format = w9; allowed: f32, f16"), std::string::npos) << bad_format.err;
}

TEST(BenchCli, JsonAndMarkdownCarryTheSameTests) {
  testing::TempDir dir("bench_json");
  const auto j = run_inferlab(tiny_bench(dir) + "-o json --bandwidth 20");
  ASSERT_EQ(j.code, 0) << j.err;
  EXPECT_EQ(j.out.front(), '[');
  std::size_t objects = 0;
  for (std::size_t p = j.out.find("\"samples_ts\": ["); p != std::string::npos; p = j.out.find("\"samples_ts\": [", p + 1))
    ++objects;
  EXPECT_EQ(objects, 6u);
  for (const char* key : {"\"model\": ", "\"test\": \"tg4 x2 @ d8\"", "\"avg_ts\": ", "\"stddev_ts\": ",
                          "\"bandwidth_gbs\": 20,", "\"bandwidth_source\": \"--bandwidth\"", "\"roofline_frac\": ",
                          "\"samples_probe_gbs\": [", "\"roofline_now_frac\": "})
    EXPECT_NE(j.out.find(key), std::string::npos) << key;
  const auto m = run_inferlab(tiny_bench(dir, "-p 8 -n 4 -r 1") + "-o md");
  ASSERT_EQ(m.code, 0) << m.err;
  EXPECT_NE(m.out.find("| model | size | params | backend | threads | stack | test | t/s | GB/s | roofline | roofline now | × first |"),
            std::string::npos) << m.out;
  EXPECT_NE(m.out.find("; roofline now: each repetition's GB/s over the higher of the probe passes"), std::string::npos)
      << m.out;
  EXPECT_NE(m.out.find("| naive + int8 | tg4 | "), std::string::npos) << m.out;
  EXPECT_EQ(m.out.find("x2 @ d8"), std::string::npos) << m.out;  // no batched tests asked
  EXPECT_NE(m.out.find(" ± "), std::string::npos);
}

TEST(BenchCli, BandwidthProbeIsCachedPerMachine) {
  testing::TempDir dir("bench_bw");
  const std::string args = tiny_bench(dir, "-p 8 -n '' -r 1", "none");
  const auto first = run_inferlab(args);
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_NE(first.out.find("probed now, recorded in " + dir.file("bw.tsv")), std::string::npos) << first.out;
  const std::string cache = testing::slurp(dir.file("bw.tsv"));
  std::istringstream lines(cache);
  std::string line;
  ASSERT_TRUE(std::getline(lines, line));
  std::vector<std::string> fields;
  for (std::size_t a = 0, b; a != std::string::npos; a = b == std::string::npos ? b : b + 1) {
    b = line.find('\t', a);
    fields.push_back(line.substr(a, b == std::string::npos ? std::string::npos : b - a));
  }
  ASSERT_EQ(fields.size(), 5u) << line;  // cpu model, host, threads, probe method, GB/s
  EXPECT_EQ(fields[2], "1");
  EXPECT_EQ(fields[3], "huge-pages, 2x LLC");
  EXPECT_GT(std::stod(fields[4]), 0.0);
  const std::string key = fields[0] + "\t" + fields[1] + "\t1\t";
  // A record of the older probe (4 KiB pages: no method field) is another key, never reused.
  testing::write_file(dir.file("bw.tsv"), key + "12500\n");
  const auto old = run_inferlab(args);
  ASSERT_EQ(old.code, 0) << old.err;
  EXPECT_NE(old.out.find("probed now, recorded in"), std::string::npos) << old.out;
  // Nor one of the 256 MiB probe on huge pages (read partly from a large last-level cache).
  testing::write_file(dir.file("bw.tsv"), key + "huge-pages\t12500\n");
  const auto old_size = run_inferlab(args);
  ASSERT_EQ(old_size.code, 0) << old_size.err;
  EXPECT_NE(old_size.out.find("probed now, recorded in"), std::string::npos) << old_size.out;
  // A recorded value above today's probe is used: the machine key matches, the number comes back.
  testing::write_file(dir.file("bw.tsv"), key + "huge-pages, 2x LLC\t12500\n");
  const auto second = run_inferlab(args);
  ASSERT_EQ(second.code, 0) << second.err;
  EXPECT_NE(second.out.find("read bandwidth: 12500.0 GB/s (read-sum probe, 1 threads, best recorded in"),
            std::string::npos)
      << second.out;
  EXPECT_NE(second.out.find("; this run's probe "), std::string::npos) << second.out;  // the conditions now
  // One below it (a probe taken while the machine was busy) is replaced by today's probe.
  testing::write_file(dir.file("bw.tsv"), key + "huge-pages, 2x LLC\t0.001\n");
  const auto third = run_inferlab(args);
  ASSERT_EQ(third.code, 0) << third.err;
  EXPECT_NE(third.out.find("probed now, recorded in"), std::string::npos) << third.out;
  EXPECT_EQ(testing::slurp(dir.file("bw.tsv")).find("\t0.001"), std::string::npos);
}

TEST(BenchCli, QuantizationEntriesCarryPluginParameters) {
  testing::TempDir dir("bench_params");
  const auto r = run_inferlab(tiny_bench(dir, "-p 8 -n '' -r 1", "int4,int4:group_size=64:symmetric=true") + "-o csv");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto rows = csv_rows(r.out, dir);
  ASSERT_EQ(rows.size(), 3u) << r.out;
  EXPECT_EQ(rows[1][6], "int4");
  EXPECT_EQ(rows[2][6], "int4:group_size=64:symmetric=true");
  // Half the scales and no zero points: the parameters reached the plugin.
  EXPECT_LT(std::stoll(rows[2][1]), std::stoll(rows[1][1]));
}

// --fuse sets the device's own fuse() flag (on by default on the CPU); --fuse=false runs unfused.
TEST(BenchCli, FuseRunsTheCpuDeviceFused) {
  testing::TempDir dir("bench_fuse");
  for (const std::string flag : {"--fuse", "--fuse=false", "--fuse=true"}) {
    const auto r = run_inferlab(tiny_bench(dir, "-p 8 -n 2 -r 1", "int8:activations=int8") + flag + " -o csv");
    ASSERT_EQ(r.code, 0) << flag << ": " << r.err;
    const auto rows = csv_rows(r.out, dir);
    ASSERT_EQ(rows.size(), 3u) << r.out;
    const std::string backend = flag == "--fuse=false" ? "CPU" : "CPU fused";
    EXPECT_EQ(rows[1][3], backend) << flag;
    EXPECT_EQ(rows[2][3], backend) << flag;
  }
}

TEST(BenchCli, DeviceChoiceDecodesThroughTheDevicesTokenChoice) {
  testing::TempDir dir("bench_choice");
  const auto r = run_inferlab(tiny_bench(dir, "-p '' -n 2 --batch 2 --context 8 -r 1", "none") + "--device-choice -o csv");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto rows = csv_rows(r.out, dir);
  ASSERT_EQ(rows.size(), 3u) << r.out;  // tg2 and tg2 x2 @ d8
  EXPECT_EQ(rows[1][3], "CPU fused device-choice");
  EXPECT_EQ(rows[2][3], "CPU fused device-choice");
}

TEST(BenchCli, BadValuesAreRefusedNamingTheFlag) {
  testing::TempDir dir("bench_bad");
  // Each refused before any test runs (and before the bandwidth probe).
  const std::string base = "bench --preset stories260k --log warn --bandwidth-cache " + dir.file("bw.tsv") + " ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"-p 0", "--n-prompt"},          {"-p 8,x", "--n-prompt"},     {"-n 0", "--n-gen"},
      {"--batch 0", "--batch"},        {"-o xml", "--output"},       {"--repeats 0", "--repeats"},
      {"--bandwidth=-1", "--bandwidth"}, {"--seed x1", "--seed"},    {"--device tpu", "--device"},
      {"--context 0", "--context"},    {"-p 1000", "-p"},            {"-p '' -n ''", "no tests"},
      {"--n-layers=-1", "--n-layers"}, {"--threads 5000", "--threads"}, {"--quantization nope", "nope"},
      {"--quantization int8:nope=1", "allowed: activations"}, {"--quantization int8:activations=int4", "int4"},
      {"--quantization int4:group_size=x", "group_size = 'x' is not of type int"}, {"--quantization int8:activations", "NAME[:KEY=VALUE"},
      {"--quantization int4:symmetric=yes", "allowed: true, false"},
      {"--quantization int4:group_size=64:group_size=32", "given twice"}, {"--cuda-graphs", "--cuda-graphs"},
      {"--quantization int8:bits", "NAME[:KEY=VALUE"}, {"--attention naive:=1", "--attention"},
      {"--fuse=maybe", "--fuse"},
  };
  for (const auto& [args, flag] : cases) {
    const auto r = run_inferlab(base + args);
    EXPECT_NE(r.code, 0) << args;
    EXPECT_NE(r.err.find(flag), std::string::npos) << args << ": " << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("bw.tsv")));
}

TEST(ExportCli, WritesThePresetsWeightsAndBenchRunsTheFile) {
  testing::TempDir dir("export_cli");
  const auto r = run_inferlab("export --preset stories260k --seed 4 --format gguf --type q4_0 --out " + dir.file("m.gguf"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("tokenizer synthetic"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kept as f32"), std::string::npos) << r.out;  // ffn_down: 172 columns
  const ModelWeights w = random_weights(preset_config("stories260k"), 4);
  const LoadedModel back = load_gguf(dir.file("m.gguf"));
  std::vector<std::uint8_t> q(ggml_tensor_bytes(GgmlType::kQ4_0, w.layers[1].wk.size()));
  quantize(GgmlType::kQ4_0, w.layers[1].wk.data(), w.layers[1].wk.size(), q.data());
  std::vector<float> expect(w.layers[1].wk.size());
  dequantize(GgmlType::kQ4_0, q.data(), expect.size(), expect.data());
  EXPECT_TRUE(back.weights.layers[1].wk.empty());  // held as its Q4_0 blocks
  EXPECT_EQ(back.weights.matrix("layers.1.wk"), expect);
  EXPECT_EQ(back.weights.layers[1].w2, w.layers[1].w2);
  const auto b = run_inferlab("bench --model " + dir.file("m.gguf") + " -p 4 -n 2 -r 1 -t 1 --quantization none "
                              "--bandwidth 10 -o csv");
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_NE(b.out.find(dir.file("m.gguf")), std::string::npos);
  // NAME:KEY=VALUE hands the plugin its parameters: with int8 activations (the default) the gguf
  // strategy packs its Q4_0 blocks for cpu::gemm_gguf where the build has it, padding out to whole
  // panels of 32 rows (w1/w3: 172 -> 192), so it holds more bytes than the file's blocks, which
  // activations = fp32 runs as they are.
  const auto g = run_inferlab("bench --model " + dir.file("m.gguf") + " -p 4 -n '' -r 1 -t 1 --quantization "
                              "gguf:activations=fp32,gguf --bandwidth 10 -o csv");
  ASSERT_EQ(g.code, 0) << g.err;
  const auto rows = csv_rows(g.out, dir);
  ASSERT_EQ(rows.size(), 3u) << g.out;
  EXPECT_EQ(rows[1][6], "gguf:activations=fp32");
  EXPECT_EQ(rows[2][6], "gguf");
  if (cpu::gemm_gguf_available())
    EXPECT_GT(std::stoll(rows[2][1]), std::stoll(rows[1][1]));
  else
    EXPECT_EQ(rows[2][1], rows[1][1]);
  const auto bad = run_inferlab("bench --model " + dir.file("m.gguf") + " -p 4 -n '' -r 1 -t 1 --quantization "
                                "gguf:activations=int4 --bandwidth 10");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("activations"), std::string::npos) << bad.err;
}

TEST(ExportCli, BadValuesAreRefusedNamingTheFlag) {
  testing::TempDir dir("export_bad");
  const std::string out = " --out " + dir.file("x.gguf");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--preset stories260k --type q5_k" + out, "--type"},
      {"--preset stories260k --format onnx" + out, "--format"},
      {"--preset stories260k --tokenizer bpe" + out, "--tokenizer"},
      {"--preset stories260k", "--out"},
      {"--preset nosuch" + out, "nosuch"},
      {"--preset stories260k --model a.bin" + out, "--model and --preset"},
  };
  for (const auto& [args, flag] : cases) {
    const auto r = run_inferlab("export " + args);
    EXPECT_NE(r.code, 0) << args;
    EXPECT_NE(r.err.find(flag), std::string::npos) << args << ": " << r.err;
  }
}

}  // namespace
}  // namespace inferlab
