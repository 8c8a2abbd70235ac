// Bounds on user input, checked before the expensive or unbounded step that would otherwise
// crash, hang or allocate gigabytes (see docs/reliability.md). Each check throws inferlab::Error
// naming the file (and line) or flag and what is allowed.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace inferlab {

// An experiment file (or a --set value) larger than this is refused before parsing.
inline constexpr std::size_t kMaxConfigBytes = 16u << 20;
// Dotted-key parts per line ([a.b.c] or a.b.c = 1): toml++ recurses once per part.
inline constexpr int kMaxKeyParts = 128;
// Nested arrays and inline tables.
inline constexpr int kMaxConfigNesting = 64;
// Points of one [sweep] grid (the product of its axis lengths).
inline constexpr std::uint64_t kMaxSweepPoints = 10000;
// [experiment] repeats and --repeats.
inline constexpr int kMaxRepeats = 1000;
// Prompt or output tokens of one trace or lengths-file row: 2^20, above every released model's
// context; longer rows are refused at their line instead of being materialised.
inline constexpr long long kMaxRequestTokens = 1LL << 20;

// Pre-scan of TOML text: size, dotted-key parts per line, nesting depth. `name` is the file
// (or "--set ...") used in the message. Strings and comments are skipped.
void check_toml_text(std::string_view text, const std::string& name);

// Throws unless path names a regular file (after symlinks): a directory, FIFO, device or socket,
// a symlink loop and a missing file each get their own message. `expected` says what the file
// should be, e.g. "an experiment TOML file".
void require_regular_file(const std::string& path, const std::string& expected);

}  // namespace inferlab
