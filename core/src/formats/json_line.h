// One JSON object per line (JSON-lines traces), read with Boost.JSON's event parser, which builds
// no tree: only the top-level members are kept, each with its value's text as written (a number
// as "1e300", a string with its quotes, a nested object as "{...}"), so that a reader's errors can
// quote what the file says. Private to core.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace inferlab::formats {

class JsonLineReader {
 public:
  // Views into the line parsed (or into the reader): valid until the next parse.
  struct Member {
    std::string_view key;
    std::string_view text;                   // the value as written; "[...]" for an array
    bool is_array = false;
    std::vector<std::string_view> elements;  // an array's elements, each as written (nested: "[...]", "{...}")
  };

  JsonLineReader();
  ~JsonLineReader();
  JsonLineReader(const JsonLineReader&) = delete;
  JsonLineReader& operator=(const JsonLineReader&) = delete;

  // Reads `line`, which must hold one JSON object (whitespace around it allowed). On malformed
  // text returns false with *problem in words ("no '{'", "an unknown escape '\q' ...") and
  // *column, the 1-based byte where the parser stopped. Strings may hold any bytes (a trace's
  // free-text fields are not interpreted).
  bool parse(std::string_view line, std::string* problem, std::size_t* column);

  // The value of `key` on the last line parsed (the last one when the key is repeated, as in
  // most JSON readers); null when absent.
  const Member* find(std::string_view key) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace inferlab::formats
