// Trace readers: canonical CSV/JSONL, Azure LLM inference 2023/2024 CSV, Mooncake JSONL, Vidur /
// Splitwise CSV, BurstGPT CSV, detection from the header, and the
// lengths files behind LengthSpec "trace". Every malformed row is an Error naming path:line,
// what is wrong and what is allowed. JSON lines are read with Boost.JSON (formats/json_line.h),
// which keeps each value's text as written so that errors quote it.
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "formats/json_line.h"
#include "inferlab/error.h"
#include "inferlab/experiment/input_checks.h"
#include "inferlab/workload/workload.h"

namespace inferlab {
namespace {

std::string read_whole_file(const std::string& path) {
  require_regular_file(path, "a trace or lengths file (CSV or JSON lines)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open the file; expected a readable trace file");
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);  // UTF-8 byte-order mark
  return text;
}

[[noreturn]] void fail(const std::string& path, int line, const std::string& what,
                       const std::string& expected) {
  throw Error(path + ":" + std::to_string(line) + ": " + what + "; expected " + expected);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// Yields the non-blank lines of a text with their 1-based numbers; strips CR of CRLF ends and
// copes with a missing final newline.
class LineReader {
 public:
  explicit LineReader(std::string_view text) : text_(text) {}
  bool next(std::string_view& line) {
    while (pos_ < text_.size()) {
      std::size_t end = text_.find('\n', pos_);
      if (end == std::string_view::npos) end = text_.size();
      line = text_.substr(pos_, end - pos_);
      pos_ = end + 1;
      ++number_;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (!trim(line).empty()) return true;
    }
    return false;
  }
  int number() const { return number_; }

 private:
  std::string_view text_;
  std::size_t pos_ = 0;
  int number_ = 0;
};

std::vector<std::string_view> split_csv(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = line.find(',', start);
    std::string_view f = trim(line.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (f.size() >= 2 && f.front() == '"' && f.back() == '"') f = f.substr(1, f.size() - 2);
    fields.push_back(f);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return fields;
}

bool parse_double(std::string_view s, double& out) {
  s = trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty() && std::isfinite(out);
}

bool parse_ll(std::string_view s, long long& out) {
  s = trim(s);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

// Context for one row: where it is, for error messages.
struct Where {
  const std::string& path;
  int line;
};

int count_field(const Where& w, std::string_view name, std::string_view raw) {
  long long v = 0;
  if (!parse_ll(raw, v))
    fail(w.path, w.line, std::string(name) + " '" + quote_input(raw) + "' is not an integer",
         "a non-negative integer token count");
  // Bounded here, at the row, before anything is built from it (a 1e8-token prompt would be
  // materialised as gigabytes before the scheduler could refuse it).
  if (v < 0 || v > kMaxRequestTokens)
    fail(w.path, w.line, std::string(name) + " " + std::to_string(v) + " is out of range",
         "an integer token count 0 .. " + std::to_string(kMaxRequestTokens) + " (2^20)");
  return static_cast<int>(v);
}

// A time in `unit`s (1 = seconds, 1000 = milliseconds), returned in seconds: at most
// kMaxArrivalSeconds, so an arrival of 1e300 is refused at its row instead of reporting a
// throughput of 1e-300 tokens per second.
double seconds_field(const Where& w, std::string_view name, std::string_view raw, double unit = 1.0) {
  const std::string allowed = "a number 0 .. " + std::string(unit == 1.0 ? "1e10 (seconds" : "1e13 (milliseconds") +
                              ", until the year 2286)";
  double v = 0;
  if (!parse_double(raw, v)) fail(w.path, w.line, std::string(name) + " '" + quote_input(raw) + "' is not a number", allowed);
  if (v < 0) fail(w.path, w.line, std::string(name) + " " + quote_input(raw) + " is negative", allowed);
  if (v / unit > kMaxArrivalSeconds) fail(w.path, w.line, std::string(name) + " " + quote_input(raw) + " is out of range", allowed);
  return v / unit;
}

int priority_field(const Where& w, std::string_view raw, std::string_view name = "priority") {
  long long v = 0;
  const std::string allowed = "an integer " + std::string(name) + " -1000000 .. 1000000";
  if (!parse_ll(raw, v)) {
    // Digits that overflow a 64-bit integer are still an integer: out of range, not malformed.
    std::string_view digits = trim(raw);
    if (!digits.empty() && (digits.front() == '-' || digits.front() == '+')) digits.remove_prefix(1);
    const bool integer = !digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos;
    fail(w.path, w.line, std::string(name) + " '" + quote_input(raw) + (integer ? "' is out of range" : "' is not an integer"),
         allowed);
  }
  if (v < -1'000'000 || v > 1'000'000)
    fail(w.path, w.line, std::string(name) + " " + std::to_string(v) + " is out of range", allowed);
  return static_cast<int>(v);
}

// One block hash: a non-negative integer that fits 64 bits.
std::uint64_t hash_value(const Where& w, std::string_view name, std::string_view raw) {
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(raw.data(), raw.data() + raw.size(), v);
  if (ec != std::errc() || p != raw.data() + raw.size() || raw.empty())
    fail(w.path, w.line, std::string(name) + " element '" + quote_input(raw) + "' is not a non-negative integer",
         "a list of non-negative integer block hashes");
  return v;
}

// Block hashes of a CSV field: numbers separated by ',', ';' or spaces.
std::vector<std::uint64_t> hash_list(const Where& w, std::string_view name, std::string_view raw) {
  std::vector<std::uint64_t> out;
  std::size_t i = 0;
  while (i < raw.size()) {
    while (i < raw.size() && (raw[i] == ' ' || raw[i] == ',' || raw[i] == ';' || raw[i] == '\t')) ++i;
    if (i >= raw.size()) break;
    std::size_t j = i;
    while (j < raw.size() && raw[j] != ' ' && raw[j] != ',' && raw[j] != ';' && raw[j] != '\t') ++j;
    out.push_back(hash_value(w, name, raw.substr(i, j - i)));
    i = j;
  }
  return out;
}

// ---- CSV ----------------------------------------------------------------------------------

struct CsvTable {
  std::vector<std::string_view> header;
  int find(std::string_view name) const {
    for (std::size_t i = 0; i < header.size(); ++i)
      if (header[i] == name) return static_cast<int>(i);
    return -1;
  }
};

// Reads the header, checks the required columns, then calls row(fields, where) per data row.
template <class RowFn>
void read_csv(const std::string& path, const std::string& text, const std::vector<std::string>& required,
              const std::string& expected_header, RowFn row) {
  LineReader lines(text);
  std::string_view line;
  if (!lines.next(line)) fail(path, 1, "empty file", "a CSV header " + expected_header + " and rows");
  CsvTable table{split_csv(line)};
  for (const auto& col : required)
    if (table.find(col) < 0)
      fail(path, lines.number(), "header lacks column '" + col + "'", "a CSV header with " + expected_header);
  int rows = 0;
  while (lines.next(line)) {
    std::vector<std::string_view> fields = split_csv(line);
    Where w{path, lines.number()};
    if (fields.size() != table.header.size())
      fail(path, w.line,
           "row has " + std::to_string(fields.size()) + " fields but the header has " +
               std::to_string(table.header.size()),
           "one comma-separated value per header column");
    row(table, fields, w);
    ++rows;
  }
  if (rows == 0) fail(path, lines.number(), "no rows after the header", "at least one request row");
}

std::vector<TraceRow> read_canonical_csv(const std::string& path, const std::string& text) {
  std::vector<TraceRow> rows;
  read_csv(path, text, {"arrival_s", "prompt_tokens", "output_tokens"},
           "arrival_s,prompt_tokens,output_tokens[,priority][,slo_class][,prefix_blocks]",
           [&](const CsvTable& t, const std::vector<std::string_view>& f, const Where& w) {
             TraceRow r;
             r.arrival_s = seconds_field(w, "arrival_s", f[t.find("arrival_s")]);
             r.prompt_tokens = count_field(w, "prompt_tokens", f[t.find("prompt_tokens")]);
             r.output_tokens = count_field(w, "output_tokens", f[t.find("output_tokens")]);
             if (int c = t.find("priority"); c >= 0 && !f[c].empty()) r.priority = priority_field(w, f[c]);
             if (int c = t.find("slo_class"); c >= 0 && !f[c].empty()) r.slo_class = priority_field(w, f[c], "slo_class");
             if (int c = t.find("prefix_blocks"); c >= 0) {
               std::string_view raw = f[c];
               if (raw.size() >= 2 && raw.front() == '[' && raw.back() == ']') raw = raw.substr(1, raw.size() - 2);
               r.prefix_blocks = hash_list(w, "prefix_blocks", raw);
             }
             rows.push_back(std::move(r));
           });
  return rows;
}

// Seconds since 1970 of "YYYY-MM-DD HH:MM:SS[.fraction][Z|+HH:MM|-HH:MM]", split into whole
// seconds and the fraction so 7 fractional digits survive the subtraction of the first row.
bool parse_timestamp(std::string_view s, long long& whole, double& frac) {
  s = trim(s);
  auto num = [&](std::size_t pos, std::size_t len, int& out) {
    if (pos + len > s.size()) return false;
    auto [p, ec] = std::from_chars(s.data() + pos, s.data() + pos + len, out);
    return ec == std::errc() && p == s.data() + pos + len;
  };
  int y, mo, d, h, mi, sec;
  if (s.size() < 19 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') || s[13] != ':' ||
      s[16] != ':')
    return false;
  if (!num(0, 4, y) || !num(5, 2, mo) || !num(8, 2, d) || !num(11, 2, h) || !num(14, 2, mi) ||
      !num(17, 2, sec))
    return false;
  std::chrono::year_month_day ymd{std::chrono::year{y}, std::chrono::month{static_cast<unsigned>(mo)},
                                  std::chrono::day{static_cast<unsigned>(d)}};
  if (!ymd.ok() || h > 23 || mi > 59 || sec > 60) return false;
  std::size_t pos = 19;
  frac = 0;
  if (pos < s.size() && s[pos] == '.') {
    double scale = 0.1;
    ++pos;
    std::size_t digits = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      frac += (s[pos] - '0') * scale;
      scale *= 0.1;
      ++pos;
      ++digits;
    }
    if (digits == 0) return false;
  }
  long long offset = 0;
  if (pos < s.size() && s[pos] == 'Z') {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    int oh, om;
    if (pos + 6 != s.size() || s[pos + 3] != ':' || !num(pos + 1, 2, oh) || !num(pos + 4, 2, om)) return false;
    if (oh > 18 || om > 59 || (oh == 18 && om > 0)) return false;  // ISO 8601 offsets: +-18:00 at most
    offset = (s[pos] == '+' ? 1 : -1) * (oh * 3600LL + om * 60LL);
    pos += 6;
  }
  if (pos != s.size()) return false;
  long long days = std::chrono::sys_days(ymd).time_since_epoch().count();
  whole = days * 86400LL + h * 3600LL + mi * 60LL + sec - offset;
  return whole >= 0 && static_cast<double>(whole) <= kMaxArrivalSeconds;
}

std::vector<TraceRow> read_azure(const std::string& path, const std::string& text) {
  std::vector<TraceRow> rows;
  long long first_whole = 0;
  double first_frac = 0;
  read_csv(path, text, {"TIMESTAMP", "ContextTokens", "GeneratedTokens"},
           "TIMESTAMP,ContextTokens,GeneratedTokens",
           [&](const CsvTable& t, const std::vector<std::string_view>& f, const Where& w) {
             long long whole = 0;
             double frac = 0;
             std::string_view ts = f[t.find("TIMESTAMP")];
             if (!parse_timestamp(ts, whole, frac))
               fail(path, w.line, "TIMESTAMP '" + quote_input(ts) + "' is not a timestamp",
                    "YYYY-MM-DD HH:MM:SS[.fraction][Z|+HH:MM|-HH:MM] such as 2023-11-16 18:15:46.6805900, from 1970 "
                    "to 2286, with a UTC offset of at most 18:00");
             if (rows.empty()) {
               first_whole = whole;
               first_frac = frac;
             }
             TraceRow r;
             r.arrival_s = static_cast<double>(whole - first_whole) + (frac - first_frac);
             r.prompt_tokens = count_field(w, "ContextTokens", f[t.find("ContextTokens")]);
             r.output_tokens = count_field(w, "GeneratedTokens", f[t.find("GeneratedTokens")]);
             rows.push_back(std::move(r));
           });
  return rows;
}

// Vidur / Splitwise request traces: arrived_at in seconds.
std::vector<TraceRow> read_vidur(const std::string& path, const std::string& text) {
  std::vector<TraceRow> rows;
  read_csv(path, text, {"arrived_at", "num_prefill_tokens", "num_decode_tokens"},
           "arrived_at,num_prefill_tokens,num_decode_tokens",
           [&](const CsvTable& t, const std::vector<std::string_view>& f, const Where& w) {
             TraceRow r;
             r.arrival_s = seconds_field(w, "arrived_at", f[t.find("arrived_at")]);
             r.prompt_tokens = count_field(w, "num_prefill_tokens", f[t.find("num_prefill_tokens")]);
             r.output_tokens = count_field(w, "num_decode_tokens", f[t.find("num_decode_tokens")]);
             rows.push_back(std::move(r));
           });
  return rows;
}

// BurstGPT: Timestamp (seconds), Model, Request tokens, Response tokens[, Total tokens, Log Type];
// rows kept only when they match the filter's model and log type (empty = any).
std::vector<TraceRow> read_burstgpt(const std::string& path, const std::string& text, const TraceFilter& filter) {
  std::vector<TraceRow> rows;
  read_csv(path, text, {"Timestamp", "Model", "Request tokens", "Response tokens"},
           "Timestamp,Model,Request tokens,Response tokens[,Total tokens][,Log Type]",
           [&](const CsvTable& t, const std::vector<std::string_view>& f, const Where& w) {
             if (!filter.model.empty() && f[t.find("Model")] != filter.model) return;
             const int log_col = t.find("Log Type");
             if (!filter.log_type.empty() && (log_col < 0 || f[log_col] != filter.log_type)) return;
             TraceRow r;
             r.arrival_s = seconds_field(w, "Timestamp", f[t.find("Timestamp")]);
             r.prompt_tokens = count_field(w, "Request tokens", f[t.find("Request tokens")]);
             r.output_tokens = count_field(w, "Response tokens", f[t.find("Response tokens")]);
             rows.push_back(std::move(r));
           });
  if (rows.empty())
    throw Error(path + ": no rows match model = \"" + filter.model + "\", log_type = \"" + filter.log_type +
                "\"; expected BurstGPT rows with that Model and Log Type (e.g. \"ChatGPT\", \"Conversation log\")");
  return rows;
}

// ---- JSONL --------------------------------------------------------------------------------

using JsonMember = formats::JsonLineReader::Member;

std::string_view required(const Where& w, const formats::JsonLineReader& m, std::string_view key,
                          const std::string& expected) {
  const JsonMember* v = m.find(key);
  if (!v) fail(w.path, w.line, "missing key \"" + std::string(key) + "\"", expected);
  return v->text;
}

std::vector<std::uint64_t> json_hashes(const Where& w, std::string_view key, const JsonMember& v) {
  if (!v.is_array) fail(w.path, w.line, std::string(key) + " is not an array", "an array of non-negative integers");
  std::vector<std::uint64_t> out;
  out.reserve(v.elements.size());
  for (std::string_view e : v.elements) out.push_back(hash_value(w, key, e));
  return out;
}

// Reads one JSON object per non-blank line with Boost.JSON (formats/json_line.h) and hands each
// line's members to row().
template <class RowFn>
std::vector<TraceRow> read_jsonl(const std::string& path, const std::string& text, const std::string& expected,
                                 RowFn row) {
  std::vector<TraceRow> rows;
  LineReader lines(text);
  formats::JsonLineReader reader;
  std::string problem;
  std::size_t column = 0;
  std::string_view line;
  while (lines.next(line)) {
    Where w{path, lines.number()};
    if (!reader.parse(line, &problem, &column))
      fail(path, w.line, problem + " at column " + std::to_string(column),
           "one JSON object per line, such as {\"key\": 1, \"list\": [1, 2]}");
    rows.push_back(row(w, reader));
  }
  if (rows.empty()) fail(path, 1, "empty file", expected);
  return rows;
}

std::vector<TraceRow> read_canonical_jsonl(const std::string& path, const std::string& text) {
  const std::string expected =
      "one object per line with arrival_s, prompt_tokens, output_tokens[, priority][, slo_class][, prefix_blocks]";
  return read_jsonl(path, text, expected, [&](const Where& w, const formats::JsonLineReader& m) {
    TraceRow r;
    r.arrival_s = seconds_field(w, "arrival_s", required(w, m, "arrival_s", expected));
    r.prompt_tokens = count_field(w, "prompt_tokens", required(w, m, "prompt_tokens", expected));
    r.output_tokens = count_field(w, "output_tokens", required(w, m, "output_tokens", expected));
    if (const auto* p = m.find("priority")) r.priority = priority_field(w, p->text);
    if (const auto* p = m.find("slo_class")) r.slo_class = priority_field(w, p->text, "slo_class");
    if (const auto* p = m.find("prefix_blocks")) r.prefix_blocks = json_hashes(w, "prefix_blocks", *p);
    return r;
  });
}

std::vector<TraceRow> read_mooncake(const std::string& path, const std::string& text) {
  const std::string expected =
      "one object per line with timestamp (ms), input_length, output_length[, hash_ids]";
  return read_jsonl(path, text, expected, [&](const Where& w, const formats::JsonLineReader& m) {
    TraceRow r;
    r.arrival_s = seconds_field(w, "timestamp", required(w, m, "timestamp", expected), 1000.0);
    r.prompt_tokens = count_field(w, "input_length", required(w, m, "input_length", expected));
    r.output_tokens = count_field(w, "output_length", required(w, m, "output_length", expected));
    if (const auto* p = m.find("hash_ids")) r.prefix_blocks = json_hashes(w, "hash_ids", *p);
    return r;
  });
}

bool looks_like_jsonl(const std::string& text) {
  for (char c : text) {
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') continue;
    return c == '{' || c == '[';
  }
  return false;
}

}  // namespace

namespace {

const char* const kTraceFormats = "auto, canonical, azure, mooncake, vidur, burstgpt";

std::string detect_format(const std::string& path, const std::string& text) {
  LineReader lines(text);
  std::string_view first;
  if (!lines.next(first)) fail(path, 1, "empty file", "a trace with a header or JSON lines");
  if (trim(first).front() == '[')  // JSON, but not an object: the JSONL reader says so at its line
    return "canonical";
  if (trim(first).front() == '{')
    return first.find("\"input_length\"") != std::string_view::npos ? "mooncake" : "canonical";
  const CsvTable h{split_csv(first)};
  if (h.find("TIMESTAMP") >= 0 && h.find("ContextTokens") >= 0) return "azure";
  if (h.find("arrived_at") >= 0) return "vidur";
  if (h.find("Request tokens") >= 0) return "burstgpt";
  if (h.find("arrival_s") >= 0) return "canonical";
  if (h.find("num_prefill_tokens") >= 0 || h.find("prompt_tokens") >= 0)
    fail(path, lines.number(), "a length-only file (no arrival column)",
         "it as [workload] lengths_file with prompt_len/output_len dist = \"trace\" and synthetic arrivals, "
         "or a trace header");
  fail(path, lines.number(), "unrecognised header '" + quote_input(trim(first)) + "'",
       "one of: arrival_s,prompt_tokens,output_tokens (canonical); TIMESTAMP,ContextTokens,GeneratedTokens "
       "(azure); arrived_at,num_prefill_tokens,num_decode_tokens (vidur); Timestamp,Model,Request tokens,"
       "Response tokens (burstgpt); JSON lines (canonical or mooncake)");
}

}  // namespace

std::string detect_trace_format(const std::string& path) { return detect_format(path, read_whole_file(path)); }

std::vector<TraceRow> read_trace(const std::string& path, const std::string& format, const TraceFilter& filter) {
  if (format != "auto" && format != "canonical" && format != "azure" && format != "mooncake" && format != "vidur" &&
      format != "burstgpt")
    throw Error(path + ": unknown trace format '" + format + "'; expected " + kTraceFormats);
  const std::string text = read_whole_file(path);
  const std::string f = format == "auto" ? detect_format(path, text) : format;
  if (f == "azure") return read_azure(path, text);
  if (f == "mooncake") return read_mooncake(path, text);
  if (f == "vidur") return read_vidur(path, text);
  if (f == "burstgpt") return read_burstgpt(path, text, filter);
  return looks_like_jsonl(text) ? read_canonical_jsonl(path, text) : read_canonical_csv(path, text);
}


std::vector<TraceRow> read_lengths_file(const std::string& path) {
  const std::string text = read_whole_file(path);
  std::vector<TraceRow> rows;
  LineReader probe(text);
  std::string_view first;
  const bool canonical = probe.next(first) && CsvTable{split_csv(first)}.find("prompt_tokens") >= 0;
  const std::string p = canonical ? "prompt_tokens" : "num_prefill_tokens";
  const std::string o = canonical ? "output_tokens" : "num_decode_tokens";
  read_csv(path, text, {p, o}, "num_prefill_tokens,num_decode_tokens (or prompt_tokens,output_tokens)",
           [&](const CsvTable& t, const std::vector<std::string_view>& f, const Where& w) {
             TraceRow r;
             r.prompt_tokens = count_field(w, p, f[t.find(p)]);
             r.output_tokens = count_field(w, o, f[t.find(o)]);
             rows.push_back(std::move(r));
           });
  return rows;
}

}  // namespace inferlab
