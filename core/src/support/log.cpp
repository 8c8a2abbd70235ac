// The logging facade: a level filter and one mutex-guarded write to stderr per message.
#include "inferlab/support/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace inferlab::log {
namespace {

Level level_from_env() {
  const char* env = std::getenv("INFERLAB_LOG");
  if (env == nullptr || *env == '\0') return Level::kInfo;
  if (std::strcmp(env, "debug") == 0) return Level::kDebug;
  if (std::strcmp(env, "info") == 0) return Level::kInfo;
  if (std::strcmp(env, "warn") == 0) return Level::kWarn;
  if (std::strcmp(env, "error") == 0) return Level::kError;
  if (std::strcmp(env, "quiet") == 0) return Level::kQuiet;
  std::fprintf(stderr, "[inferlab] warn: INFERLAB_LOG=%s not one of debug|info|warn|error|quiet; using info\n",
               env);
  return Level::kInfo;
}

std::atomic<int>& current() {
  static std::atomic<int> value{static_cast<int>(level_from_env())};
  return value;
}

std::mutex& write_mutex() {
  static std::mutex m;
  return m;
}

const char* level_name(Level level) {
  switch (level) {
    case Level::kDebug: return "debug";
    case Level::kInfo: return "info";
    case Level::kWarn: return "warn";
    case Level::kError: return "error";
    case Level::kQuiet: return "quiet";
  }
  return "?";
}

}  // namespace

void set_level(Level level) { current().store(static_cast<int>(level)); }

Level level() { return static_cast<Level>(current().load()); }

void write(Level message_level, const std::string& message) {
  if (message_level == Level::kQuiet) return;
  if (static_cast<int>(message_level) < current().load()) return;
  // One fprintf per message under a lock so lines from several threads never interleave.
  std::lock_guard<std::mutex> lock(write_mutex());
  std::fprintf(stderr, "[inferlab] %s: %s\n", level_name(message_level), message.c_str());
  std::fflush(stderr);
}

}  // namespace inferlab::log
