// PreTokenizer: a sequence of PCRE2 patterns (UTF, Unicode properties, invalid UTF-8 tolerated),
// each isolating its matches inside every piece the previous one left. Every pattern runs over
// a piece as its own subject, so `$` and lookaheads see the piece's end, as in llama.cpp.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>

#include "inferlab/error.h"
#include "inferlab/tokenizer/pretokenizer.h"
#include "tokenizer/pretokenizer_patterns.h"

namespace inferlab {

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

// Match data sized for the pattern, reused by one split() call.
struct MatchData {
  explicit MatchData(const pcre2_code* code) : md(pcre2_match_data_create_from_pattern(code, nullptr)) {
    check(md != nullptr, "pre-tokenizer: out of memory for PCRE2 match data");
  }
  ~MatchData() { pcre2_match_data_free(md); }
  MatchData(const MatchData&) = delete;
  MatchData& operator=(const MatchData&) = delete;
  pcre2_match_data* md;
};

// Appends to `out` the matches of `code` in `piece` and the non-empty gaps between them.
void split_piece(const pcre2_code* code, pcre2_match_data* md, std::string_view piece, const std::string& pattern,
                 std::vector<std::string_view>& out) {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
  std::size_t pos = 0, gap = 0;
  while (pos < piece.size()) {
    const int rc = pcre2_match(code, subject, piece.size(), pos, 0, md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) throw Error("pre-tokenizer pattern '" + pattern + "': " + pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const std::size_t b = ov[0], e = ov[1];
    if (e == b) {  // an empty match isolates nothing: step over one code point (or invalid byte)
      std::size_t next = b + 1;
      while (next < piece.size() && (static_cast<unsigned char>(piece[next]) & 0xC0) == 0x80) ++next;
      pos = next;
      continue;
    }
    if (b > gap) out.push_back(piece.substr(gap, b - gap));
    out.push_back(piece.substr(b, e - b));
    pos = gap = e;
  }
  if (gap < piece.size()) out.push_back(piece.substr(gap));
}

}  // namespace

PreTokenizer::PreTokenizer(std::string name, std::vector<std::string> patterns)
    : name_(std::move(name)), patterns_(std::move(patterns)) {
  for (const std::string& p : patterns_) {
    int err = 0;
    PCRE2_SIZE offset = 0;
    auto c = std::make_unique<Compiled>();
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(),
                            PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &offset, nullptr);
    if (!c->code)
      throw Error("pre-tokenizer '" + name_ + "': pattern '" + p + "' does not compile at offset " +
                  std::to_string(offset) + ": " + pcre2_message(err));
    pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter when unavailable
    compiled_.push_back(std::move(c));
  }
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  pieces.push_back(text);
  std::vector<std::string_view> next;
  for (std::size_t k = 0; k < compiled_.size(); ++k) {
    MatchData md(compiled_[k]->code);
    next.clear();
    next.reserve(pieces.size() * 2);
    for (std::string_view piece : pieces) split_piece(compiled_[k]->code, md.md, piece, patterns_[k], next);
    pieces.swap(next);
  }
  return pieces;
}

PreTokenizer PreTokenizer::named(const std::string& name) {
  const PreTokenizerSpec* spec = find_pre_tokenizer_spec(name);
  if (!spec) {
    std::string known;
    for (const std::string& n : known_names()) known += (known.empty() ? "" : ", ") + n;
    throw Error("unknown pre-tokenizer '" + name + "'; known: " + known);
  }
  return PreTokenizer(name, spec->patterns);
}

bool PreTokenizer::is_known(const std::string& name) { return find_pre_tokenizer_spec(name) != nullptr; }

std::vector<std::string> PreTokenizer::known_names() {
  std::vector<std::string> names;
  for (const PreTokenizerSpec& s : pre_tokenizer_specs()) names.insert(names.end(), s.names.begin(), s.names.end());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace inferlab
