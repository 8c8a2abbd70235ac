// inferlab::Error: the one exception type for configuration and programmer errors.
// Expected runtime outcomes (cache full, cannot schedule) are return values, never exceptions.
#pragma once
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

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
// The message is built only when the check fails: a literal is not turned into a std::string
// (a heap allocation past 15 characters), and a composed message is passed as a callable
// returning it, `check(ok, [&] { return "seq " + std::to_string(id) + " ..."; })`, for checks
// on paths that run per token or per step.
inline void check(bool cond, const char* message) {
  if (!cond) throw Error(message);
}
inline void check(bool cond, const std::string& message) {
  if (!cond) throw Error(message);
}
template <class MakeMessage>
  requires std::is_invocable_r_v<std::string, MakeMessage>
inline void check(bool cond, MakeMessage&& make_message) {
  if (!cond) throw Error(std::forward<MakeMessage>(make_message)());
}

}  // namespace inferlab
