#include "experiment/experiment_override.h"

#include <vector>

#include "inferlab/error.h"
#include "inferlab/experiment/input_checks.h"

namespace inferlab {

namespace {

bool all_digits(const std::string& s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos; }

// Splits a dotted key; a part in "double" or 'single' quotes keeps its dots.
std::vector<std::string> split_key(const std::string& text, const std::string& key) {
  std::vector<std::string> parts;
  std::string cur;
  bool quoted_part = false;
  for (std::size_t i = 0; i <= key.size(); ++i) {
    if (i == key.size() || key[i] == '.') {
      if (cur.empty() && !quoted_part) throw Error("--set " + quote_input(text) + ": empty part in key '" + quote_input(key) + "'");
      parts.push_back(cur);
      cur.clear();
      quoted_part = false;
      continue;
    }
    const char c = key[i];
    if ((c == '"' || c == '\'') && cur.empty() && !quoted_part) {
      const std::size_t end = key.find(c, i + 1);
      if (end == std::string::npos) throw Error("--set " + quote_input(text) + ": unterminated quote in key '" + quote_input(key) + "'");
      cur = key.substr(i + 1, end - i - 1);
      quoted_part = true;
      i = end;
      if (i + 1 < key.size() && key[i + 1] != '.')
        throw Error("--set " + quote_input(text) + ": text after a quoted part in key '" + quote_input(key) + "'; allowed: a.\"b.c\".d");
      continue;
    }
    cur += c;
  }
  if (static_cast<int>(parts.size()) > kMaxKeyParts)
    throw Error("--set " + quote_input(text) + ": key has " + std::to_string(parts.size()) + " parts; allowed: at most " +
                std::to_string(kMaxKeyParts));
  return parts;
}

}  // namespace

void apply_override(toml::table& root, const std::string& text) {
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw Error("--set " + quote_input(text) + ": expected key=value with a dotted key, e.g. baseline.attention=flash");
  std::string key = text.substr(0, eq), value = text.substr(eq + 1);
  // A quoted key part may hold '=': find the '=' outside quotes.
  for (std::size_t i = 0, q = 0; i < text.size(); ++i) {
    if ((text[i] == '"' || text[i] == '\'') && (q == 0 || q == static_cast<unsigned char>(text[i])))
      q = q ? 0 : static_cast<unsigned char>(text[i]);
    else if (text[i] == '=' && q == 0) {
      key = text.substr(0, i);
      value = text.substr(i + 1);
      break;
    }
  }
  const std::vector<std::string> parts = split_key(text, key);
  toml::table* t = &root;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    toml::node* next = t->get(parts[i]);
    if (next && next->is_array()) {
      auto* arr = next->as_array();
      if (!all_digits(parts[i + 1]))
        throw Error("--set " + quote_input(text) + ": '" + quote_input(parts[i]) + "' is an array; index it, e.g. " + parts[i] + ".0");
      // More digits than any array can be long would overflow stoul; such an index is absent.
      const std::size_t idx = parts[i + 1].size() > 9 ? arr->size() : std::stoul(parts[i + 1]);
      if (idx >= arr->size() || !arr->get(idx)->is_table())
        throw Error("--set " + quote_input(text) + ": '" + quote_input(parts[i]) + "' has no table at index " + parts[i + 1] + "; allowed: 0.." +
                    std::to_string(arr->size() - 1));
      t = arr->get(idx)->as_table();
      ++i;
      if (i + 1 >= parts.size()) throw Error("--set " + quote_input(text) + ": missing key after the index");
      continue;
    }
    if (!next && all_digits(parts[i + 1]))  // variant.0.x on a file without [[variant]]
      throw Error("--set " + quote_input(text) + ": the file has no [[" + parts[i] + "]] entries to index; add one with [[" +
                  parts[i] + "]] in the file");
    if (next && next->is_string()) {
      std::string name = next->as_string()->get();
      t->insert_or_assign(parts[i], toml::table{{"name", name}});
      next = t->get(parts[i]);
    }
    if (!next) {
      t->insert_or_assign(parts[i], toml::table{});
      next = t->get(parts[i]);
    }
    if (!next->is_table()) throw Error("--set " + quote_input(text) + ": '" + quote_input(parts[i]) + "' is not a table");
    t = next->as_table();
  }
  check_toml_text("v = " + value, "--set " + quote_input(key));  // checked as the value it is: "[...]" is an array
  toml::table parsed;
  try {
    parsed = toml::parse("v = " + value, std::string_view(kOverrideSource));
  } catch (const toml::parse_error&) {
    parsed = toml::table{{"v", value}};  // a bare string
  }
  t->insert_or_assign(parts.back(), *parsed.get("v"));
}

}  // namespace inferlab
