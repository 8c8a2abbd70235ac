// A results folder's lock, atomic writes, crash marker and status as read back (run_folder.h).
#include "inferlab/run/run_folder.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>

#include "inferlab/experiment/tomlpp.h"

#include "formats/json.h"
#include "inferlab/error.h"
#include "inferlab/support/log.h"

namespace inferlab {

namespace fs = std::filesystem;

namespace {

constexpr const char* kLockFile = "run.lock";
constexpr const char* kReserveFile = ".reserve";
// What the reserve holds back: room for the last manifest.json and summary.md of a run whose
// disk filled up (their temp copies included).
constexpr off_t kReserveBytes = 256 << 10;

[[noreturn]] void write_failed(const std::string& path, int err) {
  if (err == ENOSPC || err == EDQUOT) throw Error("cannot write " + path + ": " + no_space_message(path));
  throw Error("cannot write " + path + ": " + std::strerror(err));
}

std::string slurp(const fs::path& p) {
  std::string out;
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return out;
}

// The lock file's "pid N\nhost H\nsince T\n" as "pid N on host H since T".
std::string holder_line(const std::string& text) {
  std::istringstream in(text);
  std::map<std::string, std::string> f;
  for (std::string line; std::getline(in, line);) {
    const auto sp = line.find(' ');
    if (sp != std::string::npos) f[line.substr(0, sp)] = line.substr(sp + 1);
  }
  if (!f.count("pid")) return "an unknown process";
  return "pid " + f["pid"] + " on host " + f["host"] + (f.count("since") ? " since " + f["since"] : "");
}

// ---- the crash marker: texts prepared between cells, written by an async-signal-safe handler.

struct CrashTexts {
  std::string manifest_path, manifest_tmp, summary_path, summary_tmp, reserve_path;
  std::string manifest_head, manifest_tail, summary_head, summary_tail;  // around the signal name
  std::vector<std::string> temps;  // the folder's fixed temp file names, unlinked
};

constexpr std::array<int, 5> kCrashSignals = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
std::atomic<const CrashTexts*> g_crash{nullptr};
struct sigaction g_previous[kCrashSignals.size()];

const char* crash_signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
  }
  return "a signal";
}

void write_all(int fd, const char* data, std::size_t size) {  // no allocation: called from the handler
  for (std::size_t off = 0; off < size;) {
    const ssize_t n = ::write(fd, data + off, size - off);
    if (n <= 0 && errno != EINTR) return;
    if (n > 0) off += static_cast<std::size_t>(n);
  }
}

void write_marked(const std::string& tmp, const std::string& path, const std::string& head, const char* sig,
                  const std::string& tail) {
  if (path.empty()) return;
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  write_all(fd, head.data(), head.size());
  write_all(fd, sig, std::strlen(sig));
  write_all(fd, tail.data(), tail.size());
  if (::close(fd) == 0) ::rename(tmp.c_str(), path.c_str());
  else ::unlink(tmp.c_str());
}

extern "C" void on_crash(int sig) {
  if (const CrashTexts* t = g_crash.exchange(nullptr)) {  // once, even if writing faults again
    ::unlink(t->reserve_path.c_str());
    for (const std::string& p : t->temps) ::unlink(p.c_str());
    const char* name = crash_signal_name(sig);
    write_marked(t->manifest_tmp, t->manifest_path, t->manifest_head, name, t->manifest_tail);
    write_marked(t->summary_tmp, t->summary_path, t->summary_head, name, t->summary_tail);
  }
  for (std::size_t i = 0; i < kCrashSignals.size(); ++i)
    if (kCrashSignals[i] == sig) sigaction(sig, &g_previous[i], nullptr);
  raise(sig);  // pending until the handler returns, then the previous disposition (a core dump)
}

std::pair<std::string, std::string> split_at_placeholder(const std::string& text) {
  const auto at = text.find(RunFolder::kSignalPlaceholder);
  if (at == std::string::npos) return {text, ""};
  return {text.substr(0, at), text.substr(at + std::strlen(RunFolder::kSignalPlaceholder))};
}

// Both generations of texts stay alive: a handler on another thread may be reading the older.
std::unique_ptr<CrashTexts> g_texts[2];
int g_next = 0;

void flatten(const toml::node& n, const std::string& key, std::map<std::string, std::string>& out) {
  if (const toml::table* t = n.as_table()) {
    if (t->empty() && !key.empty()) out[key] = "{}";
    for (auto&& [k, v] : *t) flatten(v, key.empty() ? std::string(k.str()) : key + "." + std::string(k.str()), out);
    return;
  }
  if (const toml::array* a = n.as_array(); a && !a->empty() && a->is_array_of_tables()) {
    for (std::size_t i = 0; i < a->size(); ++i) flatten(*a->get(i), key + "." + std::to_string(i), out);
    return;
  }
  std::ostringstream os;
  n.visit([&](auto&& x) { os << x; });
  out[key] = os.str();
}

std::string cut(const std::string& s) { return s.size() <= 40 ? s : s.substr(0, 37) + "..."; }

}  // namespace

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) write_failed(tmp, errno);
  for (std::size_t off = 0; off < text.size();) {
    const ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      ::close(fd);
      ::unlink(tmp.c_str());
      write_failed(tmp, err);
    }
    off += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0) {  // a network file system may report a full disk only here
    const int err = errno;
    ::unlink(tmp.c_str());
    write_failed(tmp, err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error("cannot rename " + tmp + " to " + path + ": " + std::strerror(err));
  }
}

std::string no_space_message(const std::string& path) {
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  struct statvfs st {};
  const unsigned long long free_bytes =
      ::statvfs(dir.c_str(), &st) == 0 ? static_cast<unsigned long long>(st.f_bavail) * st.f_frsize : 0;
  return "no space left on device (" + std::to_string(free_bytes) + " bytes free at " + dir.string() + ")";
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "unknown";
  return buf;
}

std::string folder_lock_holder(const std::string& dir) {
  const fs::path lock = fs::path(dir) / kLockFile;
  const int fd = ::open(lock.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  return held ? holder_line(slurp(lock)) : "";
}

FolderStatus read_folder_status(const std::string& dir) {
  FolderStatus s;
  const std::string text = slurp(fs::path(dir) / "manifest.json");
  if (text.empty()) return s;
  formats::json::value m;
  try {
    m = formats::parse_json(text, "manifest.json");
  } catch (const Error&) {
    s.status = "unreadable";
    s.detail = "manifest.json is not valid JSON";
    return s;
  }
  s.status = formats::json_text_at(m, "run.status", "running");
  s.cells_done = static_cast<std::size_t>(std::max<std::int64_t>(0, formats::json_int_at(m, "run.cells_done", 0)));
  s.cells_total = static_cast<std::size_t>(std::max<std::int64_t>(0, formats::json_int_at(m, "run.cells_total", 0)));
  s.detail = formats::json_text_at(m, s.status == "failed" ? "run.reason" : "run.signal", "");
  if (s.status == "running" && folder_lock_holder(dir).empty()) {
    // No live process holds the folder (the lock dies with its holder): the run was killed.
    s.status = "interrupted";
    s.stale = true;
    const std::string pid = formats::json_text_at(m, "run.pid", ""), host = formats::json_text_at(m, "run.host", "");
    s.detail = "left \"running\" by " + (pid.empty() ? std::string("a run") : "pid " + pid + " on host " + host) +
               ", which is gone";
  }
  return s;
}

std::string describe_status(const FolderStatus& s) {
  std::string out = s.status.empty() ? "no manifest" : s.status;
  if (!s.detail.empty()) out += " (" + s.detail + ")";
  if (s.cells_total > 0) out += ", " + std::to_string(s.cells_done) + " of " + std::to_string(s.cells_total) + " cells";
  return out;
}

void remove_temp_files(const std::string& dir) {
  std::error_code ec;
  for (const fs::path& d : {fs::path(dir), fs::path(dir) / "cells"})
    for (const auto& e : fs::directory_iterator(d, ec)) {
      const std::string name = e.path().filename().string();
      const bool tmp = name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0;
      const bool scratch = name.size() > 1 && name[0] == '.' && name.find(".child") != std::string::npos;
      if (tmp || scratch || name == kReserveFile) fs::remove(e.path(), ec);
    }
}

std::vector<std::string> changed_config_keys(const std::string& before, const std::string& after) {
  std::map<std::string, std::string> a, b;
  try {
    flatten(toml::parse(before), "", a);
  } catch (const std::exception&) {
    return {"the whole file (the recorded config does not parse)"};
  }
  try {
    flatten(toml::parse(after), "", b);
  } catch (const std::exception& e) {
    return {"the whole file (it no longer parses: " + cut(e.what()) + ")"};
  }
  std::vector<std::string> changed;
  for (const auto& [k, v] : a) {
    const auto it = b.find(k);
    if (it == b.end()) changed.push_back(k + " (" + cut(v) + " → absent)");
    else if (it->second != v) changed.push_back(k + " (" + cut(v) + " → " + cut(it->second) + ")");
  }
  for (const auto& [k, v] : b)
    if (!a.count(k)) changed.push_back(k + " (absent → " + cut(v) + ")");
  return changed;
}

RunFolder::RunFolder(const std::string& dir) : dir_(dir) {
  const fs::path lock = fs::path(dir) / kLockFile;
  fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) write_failed(lock.string(), errno);
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd_);
    if (err != EWOULDBLOCK) throw Error("cannot lock " + lock.string() + ": " + std::strerror(err));
    throw Error(dir + " is in use by another inferlab run (" + holder_line(slurp(lock)) +
                "); one run or --resume at a time may write a results folder: wait for it to end or stop it");
  }
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
  const std::string who = "pid " + std::to_string(getpid()) + "\nhost " + host_name() + "\nsince " + stamp + "\n";
  // Rewritten in place: the lock belongs to the open file, so the file itself must stay.
  if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, who.data(), who.size(), 0);
  remove_temp_files(dir);  // a killed holder's leftovers: nobody else writes here now
  // The reserve: best effort (a disk already too full for it fails at the first real write).
  const fs::path reserve = fs::path(dir) / kReserveFile;
  if (const int r = ::open(reserve.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644); r >= 0) {
    if (::posix_fallocate(r, 0, kReserveBytes) != 0) ::unlink(reserve.c_str());
    ::close(r);
  }
  struct sigaction sa {};
  sa.sa_handler = on_crash;
  sigemptyset(&sa.sa_mask);
  for (std::size_t i = 0; i < kCrashSignals.size(); ++i) sigaction(kCrashSignals[i], &sa, &g_previous[i]);
}

RunFolder::~RunFolder() {
  g_crash.store(nullptr);
  for (std::size_t i = 0; i < kCrashSignals.size(); ++i) sigaction(kCrashSignals[i], &g_previous[i], nullptr);
  free_reserve();
  ::close(fd_);  // releases the lock (the cells' children, which share it, are gone by now)
}

void RunFolder::set_crash_texts(const std::string& manifest, const std::string& summary) {
  auto t = std::make_unique<CrashTexts>();
  const fs::path d(dir_);
  t->manifest_path = (d / "manifest.json").string();
  t->manifest_tmp = t->manifest_path + ".tmp";
  t->summary_path = (d / "summary.md").string();
  t->summary_tmp = t->summary_path + ".tmp";
  t->reserve_path = (d / kReserveFile).string();
  std::tie(t->manifest_head, t->manifest_tail) = split_at_placeholder(manifest);
  std::tie(t->summary_head, t->summary_tail) = split_at_placeholder(summary);
  for (const char* f : {"config.toml", "metrics.csv", "metrics.json", "requests.csv"})
    t->temps.push_back((d / f).string() + ".tmp");
  g_texts[g_next] = std::move(t);
  g_crash.store(g_texts[g_next].get());
  g_next ^= 1;
}

void RunFolder::free_reserve() {
  std::error_code ec;
  fs::remove(fs::path(dir_) / kReserveFile, ec);
}

std::string status_line(const RunState& state, const std::string& dir) {
  const std::string cells = std::to_string(state.done.size()) + " of " +
                            std::to_string(state.done.size() + state.missing.size()) + " cells done";
  const std::string rest = "; `inferlab run --resume " + dir + "` runs the rest.";
  if (state.status == "interrupted") return "Interrupted by " + state.signal + ": " + cells + rest;
  if (state.status == "failed") return "Failed: " + state.reason + ". " + cells + rest;
  if (state.status == "running") return "Running: " + cells + ".";
  return "";
}

void record_folder_config(const std::string& dir, const std::string& config_text, RunState& state) {
  state.config_hash = text_hash(config_text);
  write_file_atomically((fs::path(dir) / "cells" / "config.toml").string(), config_text);
}

std::string check_folder_config(const std::string& dir, RunState& state, bool force) {
  const fs::path config = fs::path(dir) / "config.toml";
  const std::string text = slurp(config);
  if (state.config_hash.empty()) {  // a folder of an older build: nothing to compare with
    record_folder_config(dir, text, state);
    return "";
  }
  const std::string now = text_hash(text);
  if (now == state.config_hash) return "";
  const fs::path recorded = fs::path(dir) / "cells" / "config.toml";
  std::vector<std::string> keys = fs::exists(recorded) && text_hash(slurp(recorded)) == state.config_hash
                                      ? changed_config_keys(slurp(recorded), text)
                                      : std::vector<std::string>{"unknown keys (cells/config.toml, the recorded copy, is gone or edited too)"};
  if (keys.empty()) keys.push_back("no key (formatting or comments only)");
  std::string list;
  for (std::size_t i = 0; i < keys.size() && i < 8; ++i) list += (i ? ", " : "") + keys[i];
  if (keys.size() > 8) list += ", and " + std::to_string(keys.size() - 8) + " more";
  if (!force)
    throw Error(config.string() + " was edited after the folder's cells were run (changed: " + list +
                "); resuming would mix cells of two configs. Restore it, or accept the edit with "
                "`inferlab run --resume " + dir + " --force-config` (the manifest records it)");
  state.config_forced.push_back({state.resumes, keys, state.config_hash, now});
  record_folder_config(dir, text, state);
  return "config: config.toml was edited after cells were run and accepted by --force-config at resume " +
         std::to_string(state.resumes) + " (changed: " + list + "); cells before and after it may differ";
}

void RunIo::write_state() {
  out->write_text("manifest.json", manifest_with_state(manifest, state));
  out->set_status(status_line(state, out->dir()));
  RunState crashed = state;
  crashed.status = "failed";
  crashed.reason = crash_reason;
  folder->set_crash_texts(manifest_with_state(manifest, crashed), out->summary(status_line(crashed, out->dir())));
}

void RunIo::mark_failed(const std::string& reason) {
  folder->free_reserve();
  remove_temp_files(out->dir());
  state.status = "failed";
  state.reason = reason;
  try {
    write_state();
    out->write_text("summary.md", out->summary(status_line(state, out->dir())));
  } catch (const std::exception& e) {
    log::error("could not mark " + out->dir() + " failed: " + e.what());
  }
  remove_temp_files(out->dir());
}

}  // namespace inferlab
