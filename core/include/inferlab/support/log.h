// The one logging facade. Everything goes to stderr; stdout carries results only.
// Plugins log through this too and never print to stdout.
#pragma once
#include <sstream>
#include <string>

namespace inferlab::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kQuiet = 4 };

void set_level(Level level);
Level level();
void write(Level level, const std::string& message);

inline void debug(const std::string& m) { write(Level::kDebug, m); }
inline void info(const std::string& m) { write(Level::kInfo, m); }
inline void warn(const std::string& m) { write(Level::kWarn, m); }
inline void error(const std::string& m) { write(Level::kError, m); }

}  // namespace inferlab::log
