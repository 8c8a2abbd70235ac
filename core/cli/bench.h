// inferlab bench's parts (bench.cpp: options and rounds; bench_workloads.cpp: the timed tests;
// bench_report.cpp: Markdown / CSV / JSON; read_bandwidth_probe.cpp: the roofline's bandwidth).
// The tests are llama-bench's and llama-batched-bench's, so the tables line up:
//   pp N          one prefill of N tokens into an empty cache (BOS then random tokens)
//   tg N          N one-token decode steps from an empty cache (llama-bench's tg)
//   tg N xB @ dC  B sequences holding C tokens each (prefilled untimed) decode N steps together
//                 (llama-batched-bench's S_TG with -npp C -ntg N -npl B)
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "inferlab/plugin/attention.h"
#include "inferlab/plugin/quantization.h"
#include "inferlab/model/model.h"
#include "kernels/cpu/linear_plan.h"

namespace inferlab::cli {

// "128,512" -> {128, 512}, each in [lo, hi]; anything else is an Error naming the command and flag.
std::vector<int> int_list(const std::string& command, const std::string& text, const std::string& flag, int lo, int hi);

struct BenchTest {
  enum class Kind { kPrompt, kGen, kBatchedGen };
  Kind kind = Kind::kPrompt;
  int n_prompt = 0;  // pp: tokens of the prefill
  int n_gen = 0;     // tg: decode steps
  int batch = 1;     // sequences decoding together (kBatchedGen)
  int depth = 0;     // tokens each batched sequence holds before decoding (kBatchedGen)
  std::string name() const;  // "pp128", "tg32", "tg32 x8 @ d128"
  int tokens() const;        // tokens processed: n_prompt, n_gen or batch * n_gen
};

// One timed run of `test` (its cache is allocated and any context prefilled before the clock
// starts). Returns seconds; `bytes_read` gets the bytes the run must read at least: weights
// once per step (weight_bytes() - embedding_bytes()) plus the K/V each step's attention reads.
// device_choice: every decode step chooses its greedy tokens on the device
// (Model::forward_choosing, argmax) and downloads only their ids instead of the logits.
double run_bench_test(Model& model, Attention& attention, const BenchTest& test, std::uint64_t seed,
                      double& bytes_read, bool device_choice = false);

// One row of the results: a stack × a test, with its per-repetition throughputs.
struct BenchRow {
  std::string model, attention, quantization, backend;
  std::uint64_t size_bytes = 0, params = 0;
  int threads = 0;
  BenchTest test;
  std::vector<double> tokens_per_s;  // one per repetition
  std::vector<double> bytes_per_s;   // bytes_read / seconds, per repetition
  // Per repetition (CPU runs): the read bandwidth probed around it — the higher of the probe
  // passes just before and just after the timed run. Empty when no probe ran (--device cuda).
  std::vector<double> probe_bytes_per_s;
  // Prompt tests on the CPU (the row-count sweep `-p 1,2,4,8,16`): the two limits of one pass,
  // in seconds — the bytes it must read at the read bandwidth, and its linears' arithmetic
  // (2 · rows · weights, the classifier once: one logit row), each linear's multiply-adds at the
  // probed peak of the arithmetic its kernel runs (kernels/cpu/linear_plan.h). arith_peak names
  // the arithmetic of most of the multiply-adds ("fp32 FMA", "int8 dot", "AMX int8", ...), kernel
  // the kernels the pass's linears run, most multiply-adds first ("int8_amx+panels_f32"). 0 / "":
  // unknown.
  double read_limit_s = 0, arith_limit_s = 0;
  std::string arith_peak, kernel;
  double mean_tps() const;
  double sd_tps() const;  // sample standard deviation (0 for one repetition)
  double mean_bytes_per_s() const;
  double mean_probe_bytes_per_s() const;  // 0 when no probe ran
  // Mean over repetitions of bytes/s ÷ that repetition's probe: the fraction of what the memory
  // system delivered at that moment (on a shared host it moves by the minute). 0 without probes.
  double roofline_now() const;
  // Seconds of repetition k: the test's tokens over its throughput.
  double seconds(std::size_t k) const;
};

// The row-count sweep's cost: the mean over repetitions of this row's pass time over that of
// the same stack's pp1 in the same repetition (the stacks alternate, so both met the same
// load); 0 when r is not a prompt test or the stack has no pp1 row.
double cost_vs_one_row(const std::vector<BenchRow>& rows, const BenchRow& r);


struct BenchContext {
  double bandwidth_bytes_per_s = 0;  // 0: unknown (no roofline column values)
  std::string bandwidth_source;      // "probe (cached in FILE)", "--bandwidth", ...
  int repetitions = 0;
  std::string peaks;  // the arithmetic peaks probed for the limits ("" when none ran)
};

// The arithmetic peaks of this CPU the limits use, probed once on `threads` threads (op/s; a
// multiply-add is 2 ops): fp32 FMA, bf16 pair dot, int8 dot, int16 pair dot, and the AMX tiles' int8 and bf16
// products (0 where the build lacks it or the tiles do not run).
struct ArithmeticPeaks {
  double fp32_fma = 0, bf16_dot = 0, int8_dot = 0, int16_dot = 0, amx_int8 = 0, amx_bf16 = 0;
  static ArithmeticPeaks probe(int threads);
  std::string describe() const;  // "fp32 FMA 310 GFLOP/s, bf16 dot 620, int8 dot 1240 Gop/s, ..."
};
// The peak of one arithmetic (op/s); an arithmetic this build has no probe for (0) takes the
// fp32 FMA's, named so.
std::pair<double, std::string> arithmetic_peak(const ArithmeticPeaks& peaks, cpu::CpuArithmetic a);
// The arithmetic limit of one pass of `rows` token rows of `model` (every layer's linears at
// `rows`, the classifier at one row: bench's prefill asks one logit row): each linear's
// multiply-adds at the peak of its kernel's arithmetic (Linear::cpu_kernel; fp32 FMA for a linear
// that names none). Fills r.arith_limit_s, r.arith_peak and r.kernel.
void set_arithmetic_limit(const ArithmeticPeaks& peaks, const Model& model, int rows, BenchRow& r);

// Markdown like llama-bench's (plus stack, GB/s, roofline and × the first stack), CSV with a
// header row, or a JSON array of objects (samples included). Columns: docs/performance.md.
void write_bench_markdown(std::ostream& out, const std::vector<BenchRow>& rows, const BenchContext& ctx);
void write_bench_csv(std::ostream& out, const std::vector<BenchRow>& rows, const BenchContext& ctx);
void write_bench_json(std::ostream& out, const std::vector<BenchRow>& rows, const BenchContext& ctx);

// STREAM-style read bandwidth with `threads` threads: each sums the 64-bit words of its slice of
// a 256 MiB buffer (allocated and first-touched once, on huge pages as the weights are). bench
// keeps one to probe between timed runs.
class ReadBandwidthProbe {
 public:
  explicit ReadBandwidthProbe(int threads);
  ~ReadBandwidthProbe();
  ReadBandwidthProbe(const ReadBandwidthProbe&) = delete;
  ReadBandwidthProbe& operator=(const ReadBandwidthProbe&) = delete;
  double pass();  // one read of the whole buffer, in bytes/s (~7 ms at 37 GB/s)

 private:
  int threads_;
  std::size_t slice_words_;
  std::uint64_t* buf_;
};
// The median of 5 passes of a fresh probe, in bytes/s.
double probe_read_bandwidth(int threads);
// The machine's read bandwidth: the probe run now, or the highest earlier result recorded in
// `cache_file` (a TSV keyed by CPU model, host name and threads; created with its folder when
// missing) when that is higher (from_cache = true) — load from other jobs only lowers a probe.
// A higher result replaces the recorded one; a malformed line is dropped. cache_file "" probes
// without recording.
double cached_read_bandwidth(int threads, const std::string& cache_file, bool& from_cache, double* probed_now = nullptr);
// $XDG_CACHE_HOME/inferlab/read_bandwidth.tsv, else $HOME/.cache/inferlab/read_bandwidth.tsv
// ("" when neither is set).
std::string default_bandwidth_cache();
// "AMD EPYC 7B13 64-Core Processor" from /proc/cpuinfo ("unknown cpu" elsewhere).
std::string cpu_model_name();

}  // namespace inferlab::cli
