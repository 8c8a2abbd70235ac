// The read-bandwidth probe behind inferlab bench's roofline column: every thread sums the 64-bit
// words of its slice of a buffer twice the last-level cache, at least 256 MiB
// (inferlab/huge_pages.h: dram_stream_bytes; a 256 MiB buffer read partly from a VM's 480 MiB L3,
// 5-9 % above what the same loop reads from 1 GiB and more; the compiler vectorises
// the integer sum, so the loop is bound by memory reads, as a decode step's weight stream is).
// The probe runs on every bench (~0.3 s) and the highest result per machine is kept: a probe
// taken while other jobs ran reads low, and a stale low value would put decode above 1.0 of
// its roofline. The buffer is allocated as the weights are (inferlab/huge_pages.h: 2 MiB pages
// where the kernel gives them), so the probe and the kernels it judges see the same TLB; the
// cache key says so ("huge-pages, 2x LLC"), and records of the older probes (4 KiB pages, or a
// 256 MiB buffer whatever the cache) are not reused.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "bench.h"
#include "inferlab/error.h"
#include "inferlab/huge_pages.h"

namespace inferlab::cli {

namespace {

constexpr int kProbePasses = 5;

std::uint64_t sum_words(const std::uint64_t* p, std::size_t n) {
  std::uint64_t s = 0;
  for (std::size_t i = 0; i < n; ++i) s += p[i];
  return s;
}

// fn(t) on `threads` threads, t = 0 .. threads - 1 (the probe's own threads, not the pool's).
template <class Fn>
void run_threads(int threads, Fn fn) {
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(fn, t);
  for (auto& th : pool) th.join();
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown host";
  return buf;
}

std::string cache_key(int threads) {
  return cpu_model_name() + "\t" + host_name() + "\t" + std::to_string(threads) + "\thuge-pages, 2x LLC";
}

}  // namespace

std::string cpu_model_name() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  return "unknown cpu";
}

ReadBandwidthProbe::ReadBandwidthProbe(int threads)
    : threads_(std::max(threads, 1)),
      slice_words_(dram_stream_bytes() / sizeof(std::uint64_t) / static_cast<std::size_t>(threads_)),
      buf_(static_cast<std::uint64_t*>(allocate_huge(slice_words_ * static_cast<std::size_t>(threads_) * sizeof(std::uint64_t)))) {
  run_threads(threads_, [&](int t) {  // first touch by the reading thread (NUMA placement)
    const std::size_t begin = static_cast<std::size_t>(t) * slice_words_;
    for (std::size_t i = begin; i < begin + slice_words_; ++i) buf_[i] = i;
  });
}

ReadBandwidthProbe::~ReadBandwidthProbe() { free_huge(buf_, slice_words_ * static_cast<std::size_t>(threads_) * sizeof(std::uint64_t)); }

double ReadBandwidthProbe::pass() {
  std::vector<std::uint64_t> sums(static_cast<std::size_t>(threads_));
  const auto t0 = std::chrono::steady_clock::now();
  run_threads(threads_, [&](int t) {
    sums[static_cast<std::size_t>(t)] = sum_words(buf_ + static_cast<std::size_t>(t) * slice_words_, slice_words_);
  });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::uint64_t expect = 0;  // the sums must be used, or the reads could be optimised away
  for (auto x : sums) expect += x;
  if (expect == 0) throw Error("bench: read-bandwidth probe read back zeros");
  return static_cast<double>(slice_words_ * static_cast<std::size_t>(threads_) * sizeof(std::uint64_t)) / s;
}

double probe_read_bandwidth(int threads) {
  ReadBandwidthProbe probe(threads);
  std::vector<double> passes;
  for (int pass = 0; pass < kProbePasses; ++pass) passes.push_back(probe.pass());
  // The median pass, not the best: the record keeps the highest probe ever seen, so one pass
  // that read fast for a reason that does not last (a probe on this VM once gave 54.4 GB/s
  // where every other read 34-37) would have set the roofline for good.
  std::nth_element(passes.begin(), passes.begin() + kProbePasses / 2, passes.end());
  return passes[kProbePasses / 2];
}

std::string default_bandwidth_cache() {
  std::filesystem::path base;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) base = xdg;
  else if (const char* home = std::getenv("HOME"); home && *home) base = std::filesystem::path(home) / ".cache";
  else return "";
  return (base / "inferlab" / "read_bandwidth.tsv").string();
}

double cached_read_bandwidth(int threads, const std::string& cache_file, bool& from_cache, double* probed_now) {
  from_cache = false;
  const double now = probe_read_bandwidth(threads);
  if (probed_now != nullptr) *probed_now = now;
  if (cache_file.empty()) return now;
  const std::string key = cache_key(threads);
  std::vector<std::string> keep;
  double recorded = 0;
  {
    std::ifstream in(cache_file);
    for (std::string line; std::getline(in, line);) {
      const auto tab = line.rfind('\t');
      if (tab == std::string::npos) continue;
      if (line.compare(0, tab, key) == 0) {
        char* end = nullptr;
        const double gbs = std::strtod(line.c_str() + tab + 1, &end);
        if (end != line.c_str() + tab + 1 && gbs > 0) recorded = std::max(recorded, gbs * 1e9);
        continue;  // (malformed: dropped, rewritten below)
      }
      keep.push_back(line);
    }
  }
  // Other load only ever lowers a probe: the machine's bandwidth is the best one seen.
  if (recorded >= now) {
    from_cache = true;
    return recorded;
  }
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(cache_file).parent_path(), ec);
  std::ofstream out(cache_file, std::ios::trunc);
  if (!out) throw Error("bench: cannot write the bandwidth cache " + cache_file + "; allowed: a writable file, or --bandwidth-cache none");
  for (const auto& l : keep) out << l << "\n";
  std::ostringstream gbs;
  gbs << now / 1e9;
  out << key << "\t" << gbs.str() << "\n";
  return now;
}

}  // namespace inferlab::cli
