// JsonLineReader: a Boost.JSON basic_parser handler that keeps the top-level members of one
// object. Storage is reused from line to line, so a 100k-line trace allocates almost nothing.
#include "formats/json_line.h"

#include <deque>

#include <boost/json/basic_parser_impl.hpp>

#include "formats/json.h"

namespace inferlab::formats {

namespace {

using json::error_code;
using json::string_view;

class MemberHandler {
 public:
  static constexpr std::size_t max_array_size = static_cast<std::size_t>(-1);
  static constexpr std::size_t max_object_size = static_cast<std::size_t>(-1);
  static constexpr std::size_t max_string_size = static_cast<std::size_t>(-1);
  static constexpr std::size_t max_key_size = static_cast<std::size_t>(-1);

  std::vector<JsonLineReader::Member> members;  // the first `count` are this line's
  std::size_t count = 0;

  bool on_document_begin(error_code&) {
    count = 0;
    depth_ = 0;
    owned_.clear();
    return true;
  }
  bool on_document_end(error_code&) { return true; }

  bool on_object_begin(error_code&) { return open("{...}"); }
  bool on_object_end(std::size_t, error_code&) { return close(); }
  bool on_array_begin(error_code&) {
    if (depth_ == 1) current().is_array = true;
    return open("[...]");
  }
  bool on_array_end(std::size_t, error_code&) { return close(); }

  // A key or string without escapes arrives whole and points into the line; one with escapes
  // arrives in parts, unescaped, and is assembled in part_.
  bool on_key_part(string_view s, std::size_t, error_code&) {
    if (depth_ == 1) part_.append(s.data(), s.size());
    return true;
  }
  bool on_key(string_view s, std::size_t, error_code&) {
    if (depth_ != 1) return true;
    if (members.size() == count) members.emplace_back();
    JsonLineReader::Member& m = members[count++];
    m.key = part_.empty() ? std::string_view(s.data(), s.size()) : keep(part_.append(s.data(), s.size()));
    m.text = {};
    m.is_array = false;
    m.elements.clear();
    part_.clear();
    return true;
  }

  bool on_string_part(string_view s, std::size_t, error_code&) {
    if (collects()) part_.append(s.data(), s.size());
    return true;
  }
  bool on_string(string_view s, std::size_t, error_code&) {
    if (!collects()) return true;
    // Quoted, as written (escapes resolved): a number given as a string must read as one.
    std::string quoted;
    quoted.reserve(part_.size() + s.size() + 2);
    quoted.append("\"").append(part_).append(s.data(), s.size()).push_back('"');
    part_.clear();
    return store(keep(std::move(quoted)));
  }
  bool on_number_part(string_view s, error_code&) {
    if (collects()) part_.append(s.data(), s.size());
    return true;
  }
  bool on_int64(std::int64_t, string_view s, error_code&) { return number(s); }
  bool on_uint64(std::uint64_t, string_view s, error_code&) { return number(s); }
  bool on_double(double, string_view s, error_code&) { return number(s); }
  bool on_bool(bool b, error_code&) { return !collects() || store(b ? "true" : "false"); }
  bool on_null(error_code&) { return !collects() || store("null"); }
  bool on_comment_part(string_view, error_code&) { return true; }
  bool on_comment(string_view, error_code&) { return true; }

 private:
  JsonLineReader::Member& current() { return members[count - 1]; }

  // A value at depth 1 is a member's; at depth 2 an element of a member's array.
  bool collects() const { return depth_ == 1 || (depth_ == 2 && count > 0 && members[count - 1].is_array); }

  std::string_view keep(std::string text) { return owned_.emplace_back(std::move(text)); }

  bool open(const char* text) {
    if (collects()) store(text);
    ++depth_;
    return true;
  }
  bool close() {
    --depth_;
    return true;
  }
  bool number(string_view s) {
    if (!collects()) return true;
    if (part_.empty()) return store(std::string_view(s.data(), s.size()));
    part_.append(s.data(), s.size());
    const std::string_view text = keep(part_);
    part_.clear();
    return store(text);
  }
  // The text of a value: the member's own at depth 1, else an element of its array.
  bool store(std::string_view text) {
    if (depth_ == 1) current().text = text;
    else current().elements.push_back(text);
    return true;
  }

  std::size_t depth_ = 0;
  std::string part_;
  std::deque<std::string> owned_;  // texts that are not in the line: keys and strings with escapes
};

json::parse_options line_options() {
  json::parse_options o;
  o.max_depth = kJsonMaxDepth;
  o.allow_invalid_utf8 = true;
  return o;
}

}  // namespace

struct JsonLineReader::Impl {
  json::basic_parser<MemberHandler> parser{line_options()};
};

JsonLineReader::JsonLineReader() : impl_(std::make_unique<Impl>()) {}
JsonLineReader::~JsonLineReader() = default;

bool JsonLineReader::parse(std::string_view line, std::string* problem, std::size_t* column) {
  MemberHandler& h = impl_->parser.handler();
  h.count = 0;
  const std::size_t start = line.find_first_not_of(" \t\r");
  if (start == std::string_view::npos || line[start] != '{') {
    *problem = "no '{'";
    *column = (start == std::string_view::npos ? line.size() : start) + 1;
    return false;
  }
  impl_->parser.reset();
  error_code ec;
  const std::size_t used = impl_->parser.write_some(false, line.data(), line.size(), ec);
  if (!ec && used < line.size()) ec = json::error::extra_data;
  if (ec) {
    *problem = ec == json::error::extra_data ? "text after the object" : json_problem(line, used, ec);
    *column = used + 1;
    h.count = 0;
    return false;
  }
  return true;
}

const JsonLineReader::Member* JsonLineReader::find(std::string_view key) const {
  const MemberHandler& h = impl_->parser.handler();
  for (std::size_t i = h.count; i-- > 0;)
    if (h.members[i].key == key) return &h.members[i];
  return nullptr;
}

}  // namespace inferlab::formats
