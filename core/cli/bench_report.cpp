// inferlab bench's three outputs. Markdown lines up with llama-bench's table (model, size,
// params, backend, threads, test, t/s as mean ± sd) and adds the stack, the bytes/s the test
// moved, that as a fraction of the read-bandwidth roofline, and t/s × the first stack's for the
// same test (the A/B ratio, which a shared machine's noise disturbs least); then, for a
// row-count sweep (prompt tests beside a pp1), each pass's cost over pp1 and its two limits
// (bench.h). CSV and JSON carry the same fields, unformatted (JSON adds the per-repetition
// samples).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <numeric>
#include <sstream>

#include "bench.h"

namespace inferlab::cli {

namespace {

double mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

std::string human_bytes(std::uint64_t b) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(2);
  if (b >= (1ull << 30)) s << static_cast<double>(b) / (1ull << 30) << " GiB";
  else s << static_cast<double>(b) / (1ull << 20) << " MiB";
  return s.str();
}

std::string human_params(std::uint64_t p) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(2);
  if (p >= 1000000000ull) s << static_cast<double>(p) / 1e9 << " B";
  else s << static_cast<double>(p) / 1e6 << " M";
  return s.str();
}

// The row's throughput over the first row with the same test (the baseline stack).
double ratio_to_first(const std::vector<BenchRow>& rows, const BenchRow& r) {
  for (const BenchRow& first : rows)
    if (first.test.name() == r.test.name()) return first.mean_tps() > 0 ? r.mean_tps() / first.mean_tps() : 0.0;
  return 0.0;
}

double roofline(const BenchRow& r, const BenchContext& ctx) {
  return ctx.bandwidth_bytes_per_s > 0 ? r.mean_bytes_per_s() / ctx.bandwidth_bytes_per_s : 0.0;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += std::string("\\") + c;
    else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else out += c;
  }
  return out + "\"";
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// The row-count sweep: every prompt test of a stack that has a pp1, its pass time, its cost
// over pp1 and the two limits (bench.h), and the pass over the larger limit.
void write_few_row_table(std::ostream& out, const std::vector<BenchRow>& rows, const BenchContext& ctx) {
  bool any = false;
  for (const BenchRow& r : rows) any = any || cost_vs_one_row(rows, r) > 0;
  if (!any) return;
  out << "\nrow-count sweep: a prompt test of k rows is one pass; cost = its time over the same stack's pp1 "
         "(per repetition, mean); limits of the pass: its bytes read once at the read bandwidth, and its "
         "linears' multiply-adds at the probed peak of the arithmetic of each linear's kernel ("
      << ctx.peaks << "; peak: that of most multiply-adds); kernels: what the linears run (inferlab kernels), "
         "most multiply-adds first; × limit = the pass over the larger limit\n\n"
      << "| stack | k | ms | cost | read limit ms | arithmetic limit ms | peak | kernels | × limit |\n"
      << "| --- | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: |\n";
  for (const BenchRow& r : rows) {
    const double cost = cost_vs_one_row(rows, r);
    if (cost <= 0) continue;
    const double ms = 1e3 * r.test.n_prompt / r.mean_tps(), limit = 1e3 * std::max(r.read_limit_s, r.arith_limit_s);
    out << "| " << r.attention << " + " << r.quantization << " | " << r.test.n_prompt << " | " << std::fixed
        << std::setprecision(1) << ms << " | " << std::setprecision(2) << cost << " | " << std::setprecision(1)
        << 1e3 * r.read_limit_s << " | " << 1e3 * r.arith_limit_s << " | " << r.arith_peak << " | " << r.kernel << " | ";
    if (limit > 0) out << std::setprecision(2) << ms / limit;
    else out << "-";
    out << " |\n";
  }
}

}  // namespace

double BenchRow::mean_tps() const { return mean(tokens_per_s); }
double BenchRow::sd_tps() const {
  if (tokens_per_s.size() < 2) return 0.0;
  const double m = mean_tps();
  double ss = 0;
  for (double x : tokens_per_s) ss += (x - m) * (x - m);
  return std::sqrt(ss / static_cast<double>(tokens_per_s.size() - 1));
}
double BenchRow::mean_bytes_per_s() const { return mean(bytes_per_s); }
double BenchRow::mean_probe_bytes_per_s() const { return mean(probe_bytes_per_s); }
double BenchRow::seconds(std::size_t k) const { return tokens_per_s[k] > 0 ? test.tokens() / tokens_per_s[k] : 0.0; }

double cost_vs_one_row(const std::vector<BenchRow>& rows, const BenchRow& r) {
  if (r.test.kind != BenchTest::Kind::kPrompt) return 0.0;
  for (const BenchRow& one : rows) {
    if (one.test.kind != BenchTest::Kind::kPrompt || one.test.n_prompt != 1 || one.attention != r.attention ||
        one.quantization != r.quantization || one.tokens_per_s.size() != r.tokens_per_s.size())
      continue;
    double sum = 0;
    for (std::size_t k = 0; k < r.tokens_per_s.size(); ++k) sum += r.seconds(k) / one.seconds(k);
    return r.tokens_per_s.empty() ? 0.0 : sum / static_cast<double>(r.tokens_per_s.size());
  }
  return 0.0;
}

double BenchRow::roofline_now() const {
  if (probe_bytes_per_s.size() != bytes_per_s.size() || probe_bytes_per_s.empty()) return 0.0;
  double sum = 0;
  for (std::size_t k = 0; k < bytes_per_s.size(); ++k) sum += bytes_per_s[k] / probe_bytes_per_s[k];
  return sum / static_cast<double>(bytes_per_s.size());
}

void write_bench_markdown(std::ostream& out, const std::vector<BenchRow>& rows, const BenchContext& ctx) {
  out << "read bandwidth: ";
  if (ctx.bandwidth_bytes_per_s > 0) out << std::fixed << std::setprecision(1) << ctx.bandwidth_bytes_per_s / 1e9 << " GB/s";
  else out << "unknown";
  out << " (" << ctx.bandwidth_source << "); mean ± sd of " << ctx.repetitions << " repetitions";
  double lo = 0, hi = 0;
  for (const BenchRow& r : rows)
    for (double b : r.probe_bytes_per_s) {
      lo = lo == 0 ? b : std::min(lo, b);
      hi = std::max(hi, b);
    }
  if (hi > 0)
    out << "; roofline now: each repetition's GB/s over the higher of the probe passes just before and after it ("
        << std::fixed << std::setprecision(1) << lo / 1e9 << "-" << hi / 1e9 << " GB/s this run)";
  out << "\n\n"
      << "| model | size | params | backend | threads | stack | test | t/s | GB/s | roofline | roofline now | × first |\n"
      << "| --- | ---: | ---: | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (const BenchRow& r : rows) {
    out << "| " << r.model << " | " << human_bytes(r.size_bytes) << " | " << human_params(r.params) << " | "
        << r.backend << " | " << r.threads << " | " << r.attention << " + " << r.quantization << " | "
        << r.test.name() << " | " << std::fixed << std::setprecision(2) << r.mean_tps() << " ± " << r.sd_tps()
        << " | " << r.mean_bytes_per_s() / 1e9 << " | ";
    if (ctx.bandwidth_bytes_per_s > 0) out << roofline(r, ctx);
    else out << "-";
    out << " | ";
    if (r.roofline_now() > 0) out << r.roofline_now();
    else out << "-";
    out << " | " << ratio_to_first(rows, r) << " |\n";
  }
  write_few_row_table(out, rows, ctx);
}

void write_bench_csv(std::ostream& out, const std::vector<BenchRow>& rows, const BenchContext& ctx) {
  out << "model,size_bytes,params,backend,threads,attention,quantization,test,n_prompt,n_gen,n_batch,n_depth,"
         "repetitions,avg_ts,stddev_ts,avg_gbs,bandwidth_gbs,roofline_frac,probe_gbs,roofline_now_frac,ratio_to_first,cost_vs_pp1,read_limit_ms,arith_limit_ms,arith_peak,kernel\n";
  out << std::setprecision(9);
  for (const BenchRow& r : rows)
    out << csv_field(r.model) << "," << r.size_bytes << "," << r.params << "," << csv_field(r.backend) << ","
        << r.threads << "," << csv_field(r.attention) << "," << csv_field(r.quantization) << ","
        << csv_field(r.test.name()) << "," << r.test.n_prompt << "," << r.test.n_gen << "," << r.test.batch << ","
        << r.test.depth << "," << r.tokens_per_s.size() << "," << r.mean_tps() << "," << r.sd_tps() << ","
        << r.mean_bytes_per_s() / 1e9 << "," << ctx.bandwidth_bytes_per_s / 1e9 << "," << roofline(r, ctx) << ","
        << r.mean_probe_bytes_per_s() / 1e9 << "," << r.roofline_now() << "," << ratio_to_first(rows, r) << ","
        << cost_vs_one_row(rows, r) << "," << 1e3 * r.read_limit_s << "," << 1e3 * r.arith_limit_s << ","
        << csv_field(r.arith_peak) << "," << csv_field(r.kernel) << "\n";
}

void write_bench_json(std::ostream& out, const std::vector<BenchRow>& rows, const BenchContext& ctx) {
  out << std::setprecision(9) << "[\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const BenchRow& r = rows[i];
    out << "  {\"model\": " << json_string(r.model) << ", \"size_bytes\": " << r.size_bytes
        << ", \"params\": " << r.params << ", \"backend\": " << json_string(r.backend) << ", \"threads\": " << r.threads
        << ", \"attention\": " << json_string(r.attention) << ", \"quantization\": " << json_string(r.quantization)
        << ", \"test\": " << json_string(r.test.name()) << ", \"n_prompt\": " << r.test.n_prompt
        << ", \"n_gen\": " << r.test.n_gen << ", \"n_batch\": " << r.test.batch << ", \"n_depth\": " << r.test.depth
        << ", \"repetitions\": " << r.tokens_per_s.size() << ", \"avg_ts\": " << r.mean_tps()
        << ", \"stddev_ts\": " << r.sd_tps() << ", \"samples_ts\": [";
    for (std::size_t k = 0; k < r.tokens_per_s.size(); ++k) out << (k ? ", " : "") << r.tokens_per_s[k];
    out << "], \"avg_gbs\": " << r.mean_bytes_per_s() / 1e9 << ", \"bandwidth_gbs\": " << ctx.bandwidth_bytes_per_s / 1e9
        << ", \"bandwidth_source\": " << json_string(ctx.bandwidth_source) << ", \"roofline_frac\": " << roofline(r, ctx)
        << ", \"samples_probe_gbs\": [";
    for (std::size_t k = 0; k < r.probe_bytes_per_s.size(); ++k) out << (k ? ", " : "") << r.probe_bytes_per_s[k] / 1e9;
    out << "], \"roofline_now_frac\": " << r.roofline_now() << ", \"ratio_to_first\": " << ratio_to_first(rows, r)
        << ", \"cost_vs_pp1\": " << cost_vs_one_row(rows, r) << ", \"read_limit_ms\": " << 1e3 * r.read_limit_s
        << ", \"arith_limit_ms\": " << 1e3 * r.arith_limit_s << ", \"arith_peak\": " << json_string(r.arith_peak)
        << ", \"kernel\": " << json_string(r.kernel) << "}" << (i + 1 < rows.size() ? "," : "") << "\n";
  }
  out << "]\n";
}

}  // namespace inferlab::cli
