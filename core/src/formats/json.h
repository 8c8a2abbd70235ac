// A small, strict JSON reader for config.json, tokenizer.json and safetensors headers.
// Bounds-checked and depth-limited: malformed input throws Error("<where>: ... at line L:C").
// Private to core.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace inferlab::formats {

class Json {
 public:
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };

  // Parses a whole document; `where` (a file name) prefixes error messages.
  static Json parse(std::string_view text, const std::string& where);

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::kNull; }
  bool is_number() const { return kind_ == Kind::kNumber; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }

  // Typed access; `what` names the value in the Error thrown on a type mismatch.
  bool as_bool(const std::string& what) const;
  double as_number(const std::string& what) const;
  std::int64_t as_int(const std::string& what) const;  // integral numbers only
  const std::string& as_string(const std::string& what) const;
  const std::vector<Json>& as_array(const std::string& what) const;
  const std::vector<std::pair<std::string, Json>>& members(const std::string& what) const;

  // Member of an object by key (the first when repeated); null when absent or not an object.
  const Json* find(std::string_view key) const;

 private:
  friend class JsonParser;
  Kind kind_ = Kind::kNull;
  bool bool_ = false;
  double number_ = 0.0;
  std::string string_;
  std::vector<Json> array_;
  std::vector<std::pair<std::string, Json>> object_;
};

}  // namespace inferlab::formats
