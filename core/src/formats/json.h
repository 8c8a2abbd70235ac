// The core's one JSON reader is Boost.JSON (config.json, tokenizer.json, safetensors headers,
// manifests, JSON-lines traces); this header adds what its users share: parse errors that name
// the file, line and column, and typed getters whose errors name the key. Private to core.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <boost/json/error.hpp>
#include <boost/json/value.hpp>

namespace inferlab::formats {

namespace json = boost::json;

// Nesting allowed in a document (Boost.JSON's parser is not recursive; its default is 32).
inline constexpr std::size_t kJsonMaxDepth = 256;

// Parses a whole document (RFC 8259, strict UTF-8); malformed text throws
// Error("<where>: invalid JSON: <problem> at line L:C"). A key given twice keeps its last value.
json::value parse_json(std::string_view text, const std::string& where);

// What went wrong in `text` at byte `at` (where a Boost.JSON parser stopped with `ec`), in words:
// "unexpected end of text", "an unknown escape '\q'", "unexpected character ','", ...
std::string json_problem(std::string_view text, std::size_t at, const json::error_code& ec);

// The 1-based line and column of byte `at` of `text`.
struct TextPosition {
  std::size_t line = 1, column = 1;
};
TextPosition text_position(std::string_view text, std::size_t at);

// Typed access; `what` names the value in the Error thrown on a type mismatch.
bool json_bool(const json::value& v, const std::string& what);
double json_number(const json::value& v, const std::string& what);
// Integral numbers only (3.0 counts), of magnitude at most 9e15.
std::int64_t json_int(const json::value& v, const std::string& what);
std::string json_string(const json::value& v, const std::string& what);
const json::array& json_array(const json::value& v, const std::string& what);
const json::object& json_object(const json::value& v, const std::string& what);

// Member `key` of an object; null when absent or when `v` is no object.
const json::value* json_find(const json::value& v, std::string_view key);

// The value at a dotted path of nested objects ("run.shard.index"; "" is `v`); null when a step is absent.
const json::value* json_find_path(const json::value& v, std::string_view dotted);
// Lenient reads of a document this program wrote (manifest.json): the text at the path (a
// string's characters, another scalar as JSON writes it) or the integer there; `fallback` when
// the path is absent, null or (for the integer) not an integer.
std::string json_text_at(const json::value& v, std::string_view dotted, const std::string& fallback);
std::int64_t json_int_at(const json::value& v, std::string_view dotted, std::int64_t fallback);

}  // namespace inferlab::formats
