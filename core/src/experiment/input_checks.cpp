// Input bounds checked before parsing or allocating; see inferlab/experiment/input_checks.h.
#include "inferlab/experiment/input_checks.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

#include "inferlab/error.h"

namespace inferlab {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// What may follow a table header's '[' (or '[['): a bare-key character, a quote, or the ']' of
// an empty header (which toml++ reports itself).
bool is_key_start(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-' || c == '"' ||
         c == '\'' || c == ']';
}

// A '.' inside a float literal such as 1.5 or -0.25e3 is not a key separator: it sits between
// digits in a run of number characters holding exactly one '.'. 1.2.3 is a dotted key.
bool float_dot(std::string_view line, std::size_t i) {
  if (i == 0 || i + 1 >= line.size() || !is_digit(line[i - 1]) || !is_digit(line[i + 1])) return false;
  auto number_char = [](char c) { return is_digit(c) || c == '.' || c == '_' || c == 'e' || c == 'E' || c == '+' || c == '-'; };
  // A float literal is short: a longer run (1.1.1...) is a key, and the scan stays O(1) per dot.
  constexpr std::size_t kLongestFloat = 64;
  std::size_t b = i, e = i;
  while (b > 0 && number_char(line[b - 1]))
    if (i - --b > kLongestFloat) return false;
  while (e + 1 < line.size() && number_char(line[e + 1]))
    if (++e - i > kLongestFloat) return false;
  int dots = 0;
  for (std::size_t k = b; k <= e; ++k) dots += line[k] == '.';
  return dots == 1;
}

}  // namespace

void check_toml_text(std::string_view text, const std::string& name) {
  if (text.size() > kMaxConfigBytes)
    throw Error(name + ": " + std::to_string(text.size()) + " bytes; allowed: at most " +
                std::to_string(kMaxConfigBytes) + " bytes for an experiment file");
  int line_no = 1, depth = 0, key_dots = 0;
  std::size_t line_start = 0;
  bool blank = true;  // only spaces and tabs so far on this line
  std::string_view multi;  // the closing delimiter of an open multi-line string, or empty
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line_no;
      key_dots = 0;
      line_start = i + 1;
      blank = true;
      continue;
    }
    if (!multi.empty()) {
      if (c == '\\' && multi == "\"\"\"") {
        ++i;  // an escape: the next character cannot close the string
      } else if (text.substr(i, 3) == multi) {
        i += 2;
        multi = {};
        blank = false;
      }
      continue;
    }
    const bool line_head = blank;
    if (c != ' ' && c != '\t' && c != '\r') blank = false;
    if (c == '#') {  // comment to the end of the line
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
      continue;
    }
    if (c == '"' || c == '\'') {
      // A quote straight after a bare value or key character (0"x", a'b') opens no string in
      // TOML; toml++ 3.3 reads on into what follows. Refused here at the quote, with what is
      // allowed.
      if (i > line_start) {
        const char p = text[i - 1];
        if ((p >= 'A' && p <= 'Z') || (p >= 'a' && p <= 'z') || is_digit(p) || p == '_' || p == '-' || p == '+')
          throw Error(name + ":" + std::to_string(line_no) + ": a quote right after '" + std::string(1, p) +
                      "'; allowed: a quoted string or key after '=', '[', '{', ',', '.' or a space");
      }
      if (text.substr(i, 3) == (c == '"' ? "\"\"\"" : "'''")) {
        multi = c == '"' ? "\"\"\"" : "'''";
        i += 2;
        continue;
      }
      for (++i; i < text.size() && text[i] != c && text[i] != '\n'; ++i)
        if (c == '"' && text[i] == '\\') ++i;
      if (i < text.size() && text[i] == '\n') --i;  // unterminated: the parser reports it
      continue;
    }
    if (static_cast<unsigned char>(c) >= 0x80)  // invalid TOML: said here with what is allowed
      throw Error(name + ":" + std::to_string(line_no) +
                  ": a non-ASCII character outside a quoted string or comment; allowed: ASCII there (bare keys are "
                  "A-Z a-z 0-9 _ -; quote keys and values that hold other characters)");
    if (c == '[' && depth == 0 && line_head) {
      // A table header: toml++ 3.3 asserts (undefined behaviour without assertions) when its first
      // key does not start with a key character, as in "[&".
      std::size_t j = i + 1 + (i + 1 < text.size() && text[i + 1] == '[');
      while (j < text.size() && (text[j] == ' ' || text[j] == '\t')) ++j;
      if (j < text.size() && !is_key_start(text[j]))
        throw Error(name + ":" + std::to_string(line_no) + ": a table header starting with '" + std::string(1, text[j]) +
                    "'; allowed: a key (A-Z a-z 0-9 _ - or a quoted key), e.g. [workload]");
    }
    if (c == '[' || c == '{') {
      if (++depth > kMaxConfigNesting)
        throw Error(name + ":" + std::to_string(line_no) + ": brackets nested " + std::to_string(depth) +
                    " deep; allowed: at most " + std::to_string(kMaxConfigNesting));
    } else if (c == ']' || c == '}') {
      depth = depth > 0 ? depth - 1 : 0;
    } else if (c == '.' && !float_dot(text.substr(line_start), i - line_start)) {
      if (++key_dots >= kMaxKeyParts)
        throw Error(name + ":" + std::to_string(line_no) + ": a dotted key with more than " +
                    std::to_string(kMaxKeyParts) + " parts; allowed: at most " + std::to_string(kMaxKeyParts) +
                    " parts, e.g. [a.b.c]");
    }
  }
}

void require_regular_file(const std::string& path, const std::string& expected) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ELOOP) throw Error(path + ": a symbolic link loop; expected " + expected);
    if (err == ENOENT || err == ENOTDIR) throw Error(path + ": cannot open: no such file; expected " + expected);
    throw Error(path + ": cannot access: " + std::strerror(err) + "; expected " + expected);
  }
  if (S_ISREG(st.st_mode)) return;
  const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                     : S_ISFIFO(st.st_mode) ? "a FIFO (named pipe)"
                     : S_ISCHR(st.st_mode)  ? "a character device"
                     : S_ISBLK(st.st_mode)  ? "a block device"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                                            : "a special file";
  throw Error(path + ": is " + std::string(kind) + ", not a regular file; expected " + expected);
}

void check_text_file(const std::string& path, const std::string& what, std::uint64_t max_bytes) {
  require_regular_file(path, "a text file for " + what);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && static_cast<std::uint64_t>(st.st_size) > max_bytes)
    throw Error(path + ": " + std::to_string(st.st_size) + " bytes; allowed for " + what + ": at most " +
                std::to_string(max_bytes) + " bytes");
}

std::string read_text_file(const std::string& path, const std::string& what, std::uint64_t max_bytes) {
  check_text_file(path, what, max_bytes);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open (" + what + "); expected a readable text file");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string quote_input(std::string_view text, std::size_t max_chars) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  std::size_t chars = 0, i = 0;
  for (; i < text.size() && chars < max_chars; ++i, ++chars) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b == '\n') out += "\\n";
    else if (b == '\t') out += "\\t";
    else if (b == '\r') out += "\\r";
    else if (b < 0x20 || b == 0x7f) out += std::string("\\x") + hex[b >> 4] + hex[b & 15];
    else out += static_cast<char>(b);
  }
  // A multi-byte UTF-8 character cut at the limit is completed, so the quote stays valid text.
  while (i < text.size() && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) out += text[i++];
  if (i < text.size()) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

}  // namespace inferlab
