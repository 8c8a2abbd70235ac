// A cell's result as a file, and a cell run in a forked child with time and memory limits.
#include "inferlab/run/cell.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <new>
#include <sstream>
#include <system_error>
#include <thread>

#include "inferlab/error.h"
#include "inferlab/run/run_folder.h"

namespace inferlab {

namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t kFnvBasis = 0xcbf29ce484222325ull;
// How a cell's child says it could not write its result: the disk is full, or another reason.
constexpr int kExitNoSpace = 118, kExitNoResult = 119;
// What a cell of an older build (no run_fault line) said when its child left no result.
constexpr const char* kNoResult = "cell process exited without a result";

std::uint64_t fnv_u64(std::uint64_t h, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) {
    h ^= (v >> (8 * i)) & 0xffu;
    h *= 0x100000001b3ull;
  }
  return h;
}

// Strings on one line: backslash and newline escaped.
std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else out += c;
  }
  return out;
}
std::string unescape(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char n = s[++i];
    out += n == 'n' ? '\n' : n == 'r' ? '\r' : n;
  }
  return out;
}

std::string exact(double v) {  // the shortest text that reads back as exactly v
  char buf[32];
  const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  return std::string(buf, end);
}

// The rest of `line` after "key ", or nullopt when the line is another key.
std::optional<std::string> field(const std::string& line, const std::string& key) {
  if (line.size() < key.size() + 1 || line.compare(0, key.size(), key) != 0 || line[key.size()] != ' ') return std::nullopt;
  return line.substr(key.size() + 1);
}

// Current address space of this process in bytes (/proc/self/statm, first field in pages).
std::uint64_t address_space_bytes() {
  std::ifstream in("/proc/self/statm");
  std::uint64_t pages = 0;
  in >> pages;
  return pages * static_cast<std::uint64_t>(sysconf(_SC_PAGE_SIZE));
}

[[noreturn]] void child_main(const std::function<CellResult()>& work, const CellLimits& limits,
                             const std::string& scratch_path, const ResultRow& identity, pid_t parent) {
  // The parent's crash marker is for the parent's own crash, not this cell's.
  for (int sig : {SIGINT, SIGTERM, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) signal(sig, SIG_DFL);
  // A cell outlives no run: killed with it (it holds the folder's lock, and its result would be
  // read by nobody).
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(kExitNoResult);
  if (limits.memory_mb > 0) {
    const rlim_t cap = static_cast<rlim_t>(address_space_bytes() + static_cast<std::uint64_t>(limits.memory_mb) * (1ull << 20));
    rlimit rl{cap, cap};
    setrlimit(RLIMIT_AS, &rl);
  }
  CellResult r;
  r.row = identity;
  const std::string limit_note = limits.memory_mb > 0 ? "exceeded the cell memory limit of " +
                                                            std::to_string(limits.memory_mb) + " MiB (cell_memory_mb): "
                                                      : "";
  try {
    r = work();
  } catch (const std::bad_alloc& e) {
    r.row.ok = false;
    r.row.error = limit_note + e.what();
  } catch (const std::system_error& e) {  // e.g. a thread that cannot get its stack under the limit
    r.row.ok = false;
    const bool resource = e.code() == std::errc::resource_unavailable_try_again || e.code() == std::errc::not_enough_memory;
    r.row.error = (resource ? limit_note : std::string()) + e.what();
  } catch (const std::exception& e) {
    r.row.ok = false;
    r.row.error = e.what();
  }
  // A device that reports its own failed allocation says "cannot allocate".
  if (!r.row.ok && !limit_note.empty() && r.row.error.find("cannot allocate") != std::string::npos &&
      r.row.error.rfind(limit_note, 0) != 0)
    r.row.error = limit_note + r.row.error;
  if (!r.row.ok) {
    r.row.metrics.clear();
    r.requests.clear();
    r.steps.clear();
  }
  try {
    write_cell_file(scratch_path, r);
  } catch (const Error& e) {
    _exit(std::string(e.what()).find("no space left on device") != std::string::npos ? kExitNoSpace : kExitNoResult);
  } catch (...) {
    _exit(kExitNoResult);
  }
  std::fflush(nullptr);
  _exit(0);  // no atexit handlers, no flushing of buffers inherited from the parent
}

}  // namespace

std::uint64_t tokens_hash(std::span<const int> tokens) {
  std::uint64_t h = kFnvBasis;
  for (int t : tokens) h = fnv_u64(h, static_cast<std::uint32_t>(t), 4);
  return h;
}

std::uint64_t cell_tokens_hash(const std::vector<RequestTimeline>& requests) {
  std::uint64_t h = kFnvBasis;
  for (const auto& r : requests) h = fnv_u64(h, r.output_hash, 8);
  return h;
}

std::vector<StepTimeline> sample_steps(const std::vector<StepTimeline>& steps) {
  const std::size_t n = steps.size();
  if (n <= 2 * kStepsKeptWhole) return steps;
  const std::size_t k = (n - kStepsKeptWhole + kStepsKeptWhole - 1) / kStepsKeptWhole;
  std::vector<StepTimeline> kept(steps.begin(), steps.begin() + static_cast<std::ptrdiff_t>(kStepsKeptWhole));
  for (std::size_t i = kStepsKeptWhole; i < n; i += k) kept.push_back(steps[i]);
  if ((n - 1 - kStepsKeptWhole) % k != 0) kept.push_back(steps.back());
  return kept;
}

std::string hash_hex(std::uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string serialize_cell(const CellResult& c) {
  std::ostringstream o;
  o << "inferlab-cell 1\nvariant " << escape(c.row.variant) << "\nrepeat " << c.row.repeat << "\nok " << (c.row.ok ? 1 : 0)
    << "\nerror " << escape(c.row.error) << "\nwall_s " << exact(c.row.wall_s) << "\ntokens_hash "
    << hash_hex(c.row.tokens_hash) << "\n";
  if (c.run_fault) o << "run_fault 1\n";
  for (const auto& [k, v] : c.row.metrics) o << "metric " << k << " " << exact(v) << "\n";
  for (const auto& r : c.requests)
    o << "request " << r.id << " " << exact(r.arrival_s) << " " << exact(r.first_token_s) << " " << exact(r.finish_s) << " "
      << r.prompt_tokens << " " << r.output_tokens << " " << r.cached_prompt_tokens << " " << r.preemptions << " "
      << hash_hex(r.output_hash) << " " << static_cast<int>(r.status) << " " << r.priority << " " << r.slo_class << " "
      << exact(r.first_scheduled_s) << "\n";
  for (const auto& st : c.steps) {
    o << "step " << exact(st.start_s) << " " << exact(st.duration_s) << " " << st.seqs << " " << st.rows << " "
      << st.prefill_tokens << " " << st.decode_tokens << " " << st.kv_blocks_reserved << " " << st.kv_blocks_used << " "
      << st.kv_blocks_free << " " << st.kv_blocks_cached << " " << st.kv_tokens << " " << st.preemptions;
    for (double t : st.time_s) o << " " << exact(t);
    o << "\n";
  }
  o << "end\n";
  return o.str();
}

std::optional<CellResult> parse_cell(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != "inferlab-cell 1") return std::nullopt;
  CellResult c;
  try {
    while (std::getline(in, line)) {
      if (line == "end") {
        c.run_fault = c.run_fault || (!c.row.ok && c.row.error == kNoResult);  // a cell of an older build
        return c;
      }
      if (auto v = field(line, "variant")) c.row.variant = unescape(*v);
      else if (auto v = field(line, "repeat")) c.row.repeat = std::stoi(*v);
      else if (auto v = field(line, "ok")) c.row.ok = *v == "1";
      else if (auto v = field(line, "error")) c.row.error = unescape(*v);
      else if (auto v = field(line, "wall_s")) c.row.wall_s = std::strtod(v->c_str(), nullptr);
      else if (auto v = field(line, "tokens_hash")) c.row.tokens_hash = std::stoull(*v, nullptr, 16);
      else if (auto v = field(line, "run_fault")) c.run_fault = *v == "1";
      else if (auto v = field(line, "metric")) {
        const auto sp = v->find(' ');
        if (sp == std::string::npos) return std::nullopt;
        c.row.metrics.emplace_back(v->substr(0, sp), std::strtod(v->c_str() + sp + 1, nullptr));
      } else if (auto v = field(line, "request")) {
        std::istringstream f(*v);
        RequestTimeline r;
        std::string a, ft, fin, hash;
        f >> r.id >> a >> ft >> fin >> r.prompt_tokens >> r.output_tokens >> r.cached_prompt_tokens >> r.preemptions >> hash;
        if (!f) return std::nullopt;
        r.arrival_s = std::strtod(a.c_str(), nullptr);
        r.first_token_s = std::strtod(ft.c_str(), nullptr);
        r.finish_s = std::strtod(fin.c_str(), nullptr);
        r.output_hash = std::stoull(hash, nullptr, 16);
        int status = 0;
        std::string scheduled;
        if (f >> status >> r.priority >> r.slo_class >> scheduled) {  // absent in cells of older builds
          if (status < 0 || status > static_cast<int>(RequestStatus::kRejected)) return std::nullopt;
          r.status = static_cast<RequestStatus>(status);
          r.first_scheduled_s = std::strtod(scheduled.c_str(), nullptr);
        }
        c.requests.push_back(r);
      } else if (auto v = field(line, "step")) {
        std::istringstream f(*v);
        StepTimeline st;
        std::string start, duration;
        f >> start >> duration >> st.seqs >> st.rows >> st.prefill_tokens >> st.decode_tokens >> st.kv_blocks_reserved >>
            st.kv_blocks_used >> st.kv_blocks_free >> st.kv_blocks_cached >> st.kv_tokens >> st.preemptions;
        st.start_s = std::strtod(start.c_str(), nullptr);
        st.duration_s = std::strtod(duration.c_str(), nullptr);
        for (double& t : st.time_s) {
          std::string x;
          f >> x;
          t = std::strtod(x.c_str(), nullptr);
        }
        if (!f) return std::nullopt;
        c.steps.push_back(st);
      } else {
        return std::nullopt;
      }
    }
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return std::nullopt;  // no end marker: cut short
}

void write_cell_file(const std::string& path, const CellResult& cell) { write_file_atomically(path, serialize_cell(cell)); }

std::optional<CellResult> read_cell_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream s;
  s << in.rdbuf();
  return parse_cell(s.str());
}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGTRAP: return "SIGTRAP";
    case SIGXCPU: return "SIGXCPU";
    default: return "signal " + std::to_string(sig);
  }
}

std::optional<CellResult> run_cell_isolated(const std::function<CellResult()>& work, const CellLimits& limits,
                                            const std::string& scratch_path, const std::function<bool()>& stop,
                                            const ResultRow& identity) {
  std::error_code ec;
  fs::remove(scratch_path, ec);
  std::fflush(nullptr);  // nothing buffered is written twice
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw Error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) child_main(work, limits, scratch_path, identity, parent);

  const auto t0 = std::chrono::steady_clock::now();
  bool timed_out = false;
  int status = 0;
  for (;;) {
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) throw Error(std::string("waitpid failed: ") + std::strerror(errno));
    if (stop && stop()) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      fs::remove(scratch_path, ec);
      return std::nullopt;
    }
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (limits.timeout_s > 0 && elapsed > limits.timeout_s) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }

  CellResult failed;
  failed.row = identity;
  failed.row.ok = false;
  std::ostringstream limit;
  limit << limits.timeout_s;
  if (timed_out) {
    failed.row.error = "exceeded the cell time limit of " + limit.str() + " s (cell_timeout_s); killed";
  } else if (WIFSIGNALED(status) && (WTERMSIG(status) == SIGINT || WTERMSIG(status) == SIGTERM)) {
    fs::remove(scratch_path, ec);
    return std::nullopt;  // the run is being interrupted (the terminal signals the whole group)
  } else if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    failed.row.error = "crashed: killed by " + signal_name(sig) + " (signal " + std::to_string(sig) + ")" +
                       (sig == SIGKILL && limits.memory_mb > 0 ? "; cell_memory_mb = " + std::to_string(limits.memory_mb) : "");
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == kExitNoSpace) {
    fs::remove(scratch_path, ec);
    throw Error("cell " + identity.variant + " repeat " + std::to_string(identity.repeat) + " could not write its result to " +
                scratch_path + ": " + no_space_message(scratch_path));
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == kExitNoResult) {
    failed.row.error = "cell process could not write its result to " + scratch_path;
    failed.run_fault = true;
  } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    failed.row.error = "cell process exited with code " + std::to_string(WEXITSTATUS(status)) + " before writing its result";
  } else if (auto r = read_cell_file(scratch_path)) {
    fs::remove(scratch_path, ec);
    return r;
  } else {
    failed.row.error = kNoResult;  // its result file was taken away: the run's trouble, not the cell's
    failed.run_fault = true;
  }
  fs::remove(scratch_path, ec);
  return failed;
}

}  // namespace inferlab
