// Boost.JSON, compiled here once (header-only mode: no libboost_json to link, install or pack for
// the GPU machine), and the error wording its users share.
#include <boost/json/src.hpp>

#include "formats/json.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "inferlab/error.h"

namespace inferlab::formats {

TextPosition text_position(std::string_view text, std::size_t at) {
  TextPosition p;
  for (std::size_t k = 0; k < at && k < text.size(); ++k) {
    if (text[k] == '\n') {
      ++p.line;
      p.column = 1;
    } else {
      ++p.column;
    }
  }
  return p;
}

std::string json_problem(std::string_view text, std::size_t at, const json::error_code& ec) {
  using json::error;
  if (ec == error::incomplete) return "unexpected end of text";
  if (ec == error::extra_data) return "unexpected data after the JSON value";
  if (ec == error::too_deep) return "nesting deeper than " + std::to_string(kJsonMaxDepth);
  if (ec == error::exponent_overflow) return "a number's exponent is out of range";
  if (ec == error::expected_hex_digit) {
    const std::size_t slash = text.rfind('\\', at);
    return "a \\u escape without 4 hex digits (" + std::string(text.substr(slash, 6)) + ")";
  }
  if (ec == error::illegal_leading_surrogate || ec == error::illegal_trailing_surrogate ||
      ec == error::expected_utf16_escape)
    return "a \\u escape of a lone UTF-16 surrogate";
  if (ec != error::syntax) return ec.message();
  if (at >= text.size()) return "unexpected end of text";
  const auto c = static_cast<unsigned char>(text[at]);
  // A high surrogate escape (\uD800-\uDBFF) must be followed by a low one.
  if (at >= 6 && text[at - 6] == '\\' && text[at - 5] == 'u' && (text[at - 4] == 'd' || text[at - 4] == 'D') &&
      std::string_view("89abAB").find(text[at - 3]) != std::string_view::npos)
    return "a \\u escape of a lone UTF-16 surrogate";
  if (at > 0 && text[at - 1] == '\\')
    return "an unknown escape '\\" + std::string(1, static_cast<char>(c)) +
           "' in a string (allowed: \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)";
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned>(c));
  if (c < 0x20) return std::string("a raw control character (") + hex + "), which a JSON string must escape";
  if (c >= 0x80) return std::string("a byte that is not UTF-8 (") + hex + ")";
  return "unexpected character '" + std::string(1, static_cast<char>(c)) + "'";
}

json::value parse_json(std::string_view text, const std::string& where) {
  json::parse_options options;
  options.max_depth = kJsonMaxDepth;
  json::parser p({}, options);
  json::error_code ec;
  const std::size_t at = p.write(text.data(), text.size(), ec);
  if (ec) {
    const TextPosition pos = text_position(text, at);
    throw Error(where + ": invalid JSON: " + json_problem(text, at, ec) + " at line " + std::to_string(pos.line) +
                ":" + std::to_string(pos.column));
  }
  return p.release();
}

bool json_bool(const json::value& v, const std::string& what) {
  if (!v.is_bool()) throw Error(what + " must be true or false");
  return v.get_bool();
}

double json_number(const json::value& v, const std::string& what) {
  if (!v.is_number()) throw Error(what + " must be a number");
  return v.to_number<double>();
}

std::int64_t json_int(const json::value& v, const std::string& what) {
  const bool whole = v.is_int64() || v.is_uint64() || (v.is_double() && std::floor(v.get_double()) == v.get_double());
  if (!whole) throw Error(what + " must be an integer");
  // Beyond 2^53 a double no longer holds every integer: such a value is out of range, not a non-integer.
  const double magnitude = v.is_int64() ? std::fabs(static_cast<double>(v.get_int64()))
                           : v.is_uint64() ? static_cast<double>(v.get_uint64())
                                           : std::fabs(v.get_double());
  if (magnitude > 9.0e15) {
    std::ostringstream os;
    os << what << " = " << json::serialize(v) << " is out of range; allowed: an integer of magnitude at most 9e15";
    throw Error(os.str());
  }
  return v.is_int64() ? v.get_int64() : static_cast<std::int64_t>(v.get_double());
}

std::string json_string(const json::value& v, const std::string& what) {
  if (!v.is_string()) throw Error(what + " must be a string");
  return std::string(v.get_string());
}

const json::array& json_array(const json::value& v, const std::string& what) {
  if (!v.is_array()) throw Error(what + " must be an array");
  return v.get_array();
}

const json::object& json_object(const json::value& v, const std::string& what) {
  if (!v.is_object()) throw Error(what + " must be an object");
  return v.get_object();
}

const json::value* json_find(const json::value& v, std::string_view key) {
  return v.is_object() ? v.get_object().if_contains(key) : nullptr;
}

const json::value* json_find_path(const json::value& v, std::string_view dotted) {
  const json::value* at = &v;
  while (at && !dotted.empty()) {
    const std::size_t dot = dotted.find('.');
    at = json_find(*at, dotted.substr(0, dot));
    if (dot == std::string_view::npos) break;
    dotted.remove_prefix(dot + 1);
  }
  return at;
}

std::string json_text_at(const json::value& v, std::string_view dotted, const std::string& fallback) {
  const json::value* at = json_find_path(v, dotted);
  if (!at || at->is_null()) return fallback;
  return at->is_string() ? std::string(at->get_string()) : json::serialize(*at);
}

std::int64_t json_int_at(const json::value& v, std::string_view dotted, std::int64_t fallback) {
  const json::value* at = json_find_path(v, dotted);
  return at && at->is_int64() ? at->get_int64() : fallback;
}

}  // namespace inferlab::formats
