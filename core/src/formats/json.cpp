// Recursive-descent JSON parser (RFC 8259): every read is checked against the end of the text,
// nesting is limited, \u escapes (with surrogate pairs) become UTF-8.
#include "json.h"

#include "../utf8.h"

#include <cmath>
#include <sstream>
#include <cstdlib>

#include "inferlab/error.h"

namespace inferlab::formats {

class JsonParser {
 public:
  JsonParser(std::string_view text, const std::string& where) : s_(text), where_(where) {}

  Json document() {
    Json v = value(0);
    skip_ws();
    if (i_ != s_.size()) fail("unexpected data after the JSON value");
    return v;
  }

 private:
  static constexpr int kMaxDepth = 256;

  [[noreturn]] void fail(const std::string& problem) const {
    std::size_t line = 1, col = 1;
    for (std::size_t k = 0; k < i_ && k < s_.size(); ++k) {
      if (s_[k] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw Error(where_ + ": invalid JSON: " + problem + " at line " + std::to_string(line) + ":" +
                std::to_string(col));
  }

  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  char peek() {
    if (i_ >= s_.size()) fail("unexpected end of text");
    return s_[i_];
  }
  void expect_word(std::string_view w) {
    if (s_.substr(i_, w.size()) != w) fail("unexpected character");
    i_ += w.size();
  }

  Json value(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than " + std::to_string(kMaxDepth));
    skip_ws();
    Json v;
    const char c = peek();
    if (c == '{') {
      v.kind_ = Json::Kind::kObject;
      ++i_;
      skip_ws();
      if (peek() == '}') {
        ++i_;
        return v;
      }
      while (true) {
        skip_ws();
        if (peek() != '"') fail("expected a string key");
        std::string key = string();
        skip_ws();
        if (peek() != ':') fail("expected ':'");
        ++i_;
        v.object_.emplace_back(std::move(key), value(depth + 1));
        skip_ws();
        const char d = peek();
        ++i_;
        if (d == '}') return v;
        if (d != ',') fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      v.kind_ = Json::Kind::kArray;
      ++i_;
      skip_ws();
      if (peek() == ']') {
        ++i_;
        return v;
      }
      while (true) {
        v.array_.push_back(value(depth + 1));
        skip_ws();
        const char d = peek();
        ++i_;
        if (d == ']') return v;
        if (d != ',') fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      v.kind_ = Json::Kind::kString;
      v.string_ = string();
      return v;
    }
    if (c == 't') {
      expect_word("true");
      v.kind_ = Json::Kind::kBool;
      v.bool_ = true;
      return v;
    }
    if (c == 'f') {
      expect_word("false");
      v.kind_ = Json::Kind::kBool;
      return v;
    }
    if (c == 'n') {
      expect_word("null");
      return v;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind_ = Json::Kind::kNumber;
      v.number_ = number();
      return v;
    }
    fail("unexpected character");
  }

  double number() {
    const std::size_t start = i_;
    auto digits = [&] {
      const std::size_t d0 = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      if (i_ == d0) fail("malformed number");
    };
    if (s_[i_] == '-') ++i_;
    if (i_ < s_.size() && s_[i_] == '0') ++i_;
    else digits();
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      digits();
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      digits();
    }
    const std::string text(s_.substr(start, i_ - start));
    return std::strtod(text.c_str(), nullptr);
  }

  unsigned hex4() {
    if (s_.size() - i_ < 4) fail("truncated \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = s_[i_++];
      v <<= 4;
      if (h >= '0' && h <= '9') v |= static_cast<unsigned>(h - '0');
      else if (h >= 'a' && h <= 'f') v |= static_cast<unsigned>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') v |= static_cast<unsigned>(h - 'A' + 10);
      else fail("bad hex digit in \\u escape");
    }
    return v;
  }



  std::string string() {
    ++i_;  // opening quote
    std::string out;
    while (true) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated escape");
      const char e = s_[i_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00 && s_.size() - i_ >= 6 && s_[i_] == '\\' && s_[i_ + 1] == 'u') {
            const std::size_t save = i_;
            i_ += 2;
            const unsigned lo = hex4();
            if (lo >= 0xDC00 && lo < 0xE000) cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            else i_ = save;  // lone high surrogate: keep as is, reparse the next escape
          }
          utf8::append(out, static_cast<char32_t>(cp));
          break;
        }
        default: fail("unknown escape");
      }
    }
  }

  std::string_view s_;
  const std::string& where_;
  std::size_t i_ = 0;
};

Json Json::parse(std::string_view text, const std::string& where) {
  return JsonParser(text, where).document();
}

bool Json::as_bool(const std::string& what) const {
  if (kind_ != Kind::kBool) throw Error(what + " must be true or false");
  return bool_;
}

double Json::as_number(const std::string& what) const {
  if (kind_ != Kind::kNumber) throw Error(what + " must be a number");
  return number_;
}

std::int64_t Json::as_int(const std::string& what) const {
  if (kind_ != Kind::kNumber || std::floor(number_) != number_) throw Error(what + " must be an integer");
  // Beyond 2^53 a double no longer holds every integer: such a value is out of range, not a non-integer.
  if (std::fabs(number_) > 9.0e15) {
    std::ostringstream os;
    os << what << " = " << number_ << " is out of range; allowed: an integer of magnitude at most 9e15";
    throw Error(os.str());
  }
  return static_cast<std::int64_t>(number_);
}

const std::string& Json::as_string(const std::string& what) const {
  if (kind_ != Kind::kString) throw Error(what + " must be a string");
  return string_;
}

const std::vector<Json>& Json::as_array(const std::string& what) const {
  if (kind_ != Kind::kArray) throw Error(what + " must be an array");
  return array_;
}

const std::vector<std::pair<std::string, Json>>& Json::members(const std::string& what) const {
  if (kind_ != Kind::kObject) throw Error(what + " must be an object");
  return object_;
}

const Json* Json::find(std::string_view key) const {
  if (kind_ != Kind::kObject) return nullptr;
  for (const auto& [k, v] : object_)
    if (k == key) return &v;
  return nullptr;
}

}  // namespace inferlab::formats
