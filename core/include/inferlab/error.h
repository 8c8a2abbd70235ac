// inferlab::Error: the one exception type for configuration and programmer errors.
// Expected runtime outcomes (cache full, cannot schedule) are return values, never exceptions.
#pragma once
#include <stdexcept>
#include <string>

namespace inferlab {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// A run stopped by SIGINT/SIGTERM (EngineOptions::stop): not a failure of the variant.
class Interrupted : public Error {
 public:
  using Error::Error;
};

// Throws Error(message) unless cond holds. For checks on user input and plugin contracts.
inline void check(bool cond, const std::string& message) {
  if (!cond) throw Error(message);
}

}  // namespace inferlab
