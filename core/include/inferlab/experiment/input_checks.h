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

// Documented ranges of the synthetic workload's distribution parameters (docs/experiment-format.md),
// checked at validate. Outside them the arrival process degenerates: a gamma burstiness of 1e300
// gives shape 0 and NaN arrival times, on which a run never finishes.
inline constexpr double kMinRate = 1e-6;        // requests per second
inline constexpr double kMaxRate = 1e9;
inline constexpr double kMinBurstiness = 1e-3;  // gamma coefficient of variation (1 = Poisson)
inline constexpr double kMaxBurstiness = 100.0;
inline constexpr double kMaxLengthSigma = 10.0;  // lognormal sigma of a length
inline constexpr double kMaxTimeScale = 1e6;     // [workload] time_scale
// Timeouts ([workload] timeout_s, queue_timeout_s, [experiment] cell_timeout_s): about 31 years.
inline constexpr double kMaxSeconds = 1e9;
// A trace arrival in seconds (and a timestamp's seconds since 1970): up to 1e10 s, the year 2286,
// so Unix-epoch arrival columns pass and 1e300 does not.
inline constexpr double kMaxArrivalSeconds = 1e10;

// Pre-scan of TOML text: size, dotted-key parts per line, nesting depth. `name` is the file
// (or "--set ...") used in the message. Strings and comments are skipped.
void check_toml_text(std::string_view text, const std::string& name);

// Throws unless path names a regular file (after symlinks): a directory, FIFO, device or socket,
// a symlink loop and a missing file each get their own message. `expected` says what the file
// should be, e.g. "an experiment TOML file".
void require_regular_file(const std::string& path, const std::string& expected);

// A text input (perplexity --text, tokenize --file, [quality] and [calibration] text) larger
// than this is refused before it is read: 256 MiB, far above any evaluation text.
inline constexpr std::uint64_t kMaxTextBytes = 256ull << 20;

// Throws unless path is a regular file (require_regular_file) of at most max_bytes; `what`
// names the flag or key in the message, e.g. "--text" or "[quality] text".
void check_text_file(const std::string& path, const std::string& what, std::uint64_t max_bytes = kMaxTextBytes);

// check_text_file, then the whole file. A FIFO or device is refused before any read, so the
// call neither blocks nor reads without end.
std::string read_text_file(const std::string& path, const std::string& what, std::uint64_t max_bytes = kMaxTextBytes);

// The most characters of an offending input an error message quotes.
inline constexpr std::size_t kMaxQuoted = 80;

// `text` as an error message may quote it: control bytes and DEL escaped (\n, \t, \xNN), cut
// after kMaxQuoted characters with "... (N bytes)" appended, so a 10 MB line or binary junk
// neither floods nor garbles the terminal.
std::string quote_input(std::string_view text, std::size_t max_chars = kMaxQuoted);

// The most characters of one error line main() prints: a net under every message, so one that
// quotes an input whole (a path, a plugin's text) still cannot flood the terminal.
inline constexpr std::size_t kMaxMessageChars = 4096;

}  // namespace inferlab
