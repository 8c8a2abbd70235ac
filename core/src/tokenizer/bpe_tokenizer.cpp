// Byte-level BPE: GPT-2's byte <-> printable code point alphabet, merges by rank with a heap
// over merge candidates, special tokens matched verbatim. Pre-tokenisation is a PreTokenizer.
#include <algorithm>
#include <array>
#include <limits>
#include <queue>

#include "inferlab/tokenizer/bpe_tokenizer.h"
#include "inferlab/error.h"
#include "tokenizer/utf8.h"

namespace inferlab {

namespace {

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68 bytes
// are given code points 256, 257, ... in byte order.
const std::array<char32_t, 256>& byte_to_cp() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      t[static_cast<std::size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
    }
    return t;
  }();
  return table;
}


// Maps a token in the byte alphabet back to bytes; code points outside the alphabet (possible
// in added tokens) are kept as their UTF-8.
std::string alphabet_to_bytes(const std::string& token) {
  static const std::array<int, 512> inverse = [] {
    std::array<int, 512> inv{};
    inv.fill(-1);
    for (int b = 0; b < 256; ++b) inv[byte_to_cp()[static_cast<std::size_t>(b)]] = b;
    return inv;
  }();
  std::string out;
  std::size_t i = 0;
  while (i < token.size()) {
    const auto b0 = static_cast<unsigned char>(token[i]);
    std::size_t len = b0 < 0x80 ? 1 : b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : b0 >= 0xC0 ? 2 : 1;
    if (i + len > token.size()) len = 1;
    char32_t c = len == 1 ? b0 : (b0 & (0x7F >> len));
    for (std::size_t k = 1; k < len; ++k) c = (c << 6) | (static_cast<unsigned char>(token[i + k]) & 0x3F);
    if (c < inverse.size() && inverse[c] >= 0) out += static_cast<char>(inverse[c]);
    else out.append(token, i, len);
    i += len;
  }
  return out;
}

std::uint64_t pair_key(int a, int b) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
}

}  // namespace

ByteLevelBpeTokenizer::ByteLevelBpeTokenizer(
    std::vector<std::string> tokens, const std::vector<std::pair<std::string, std::string>>& merges,
    int bos_id, int eos_id, BpeOptions options)
    : tokens_(std::move(tokens)), options_(std::move(options)), bos_(bos_id), eos_(eos_id) {
  check(!tokens_.empty(), "byte-level BPE tokenizer: empty vocabulary");
  check(tokens_.size() < static_cast<std::size_t>(std::numeric_limits<int>::max()),
        "byte-level BPE tokenizer: vocabulary too large");
  const int n = static_cast<int>(tokens_.size());
  check(bos_ >= -1 && bos_ < n && eos_ >= -1 && eos_ < n,
        "byte-level BPE tokenizer: bos/eos id out of range of the " + std::to_string(n) + " tokens");
  ids_.reserve(tokens_.size());
  for (int id = 0; id < n; ++id) ids_.emplace(tokens_[static_cast<std::size_t>(id)], id);  // first wins

  conventions_ = {false, false, false};  // llama.cpp's defaults for a BPE vocabulary
  if (!options_.pre_tokenizer) options_.pre_tokenizer = std::make_shared<const PreTokenizer>("gpt-2", std::vector<std::string>{kGpt2Pattern});
  std::vector<bool> special(tokens_.size(), false);
  is_control_.assign(tokens_.size(), false);
  auto add_special = [&](int id, bool control) {
    check(id >= 0 && id < n, "byte-level BPE tokenizer: special token id " + std::to_string(id) + " out of range");
    const std::string& text = tokens_[static_cast<std::size_t>(id)];
    if (text.empty() || special[static_cast<std::size_t>(id)]) return;
    special[static_cast<std::size_t>(id)] = true;
    is_control_[static_cast<std::size_t>(id)] = control;
    specials_by_byte_[static_cast<unsigned char>(text[0])].push_back(id);
  };
  for (int id : options_.special_ids) add_special(id, true);
  for (int id : options_.user_defined_ids) add_special(id, false);
  for (auto& bucket : specials_by_byte_)
    std::stable_sort(bucket.begin(), bucket.end(), [&](int a, int b) {
      return tokens_[static_cast<std::size_t>(a)].size() > tokens_[static_cast<std::size_t>(b)].size();
    });

  bytes_.reserve(tokens_.size());
  for (std::size_t id = 0; id < tokens_.size(); ++id)
    bytes_.push_back(special[id] ? tokens_[id] : alphabet_to_bytes(tokens_[id]));

  for (int b = 0; b < 256; ++b) {
    std::string cp;
    utf8::append(cp, byte_to_cp()[static_cast<std::size_t>(b)]);
    byte_ids_[b] = find(cp);
  }

  merges_.reserve(merges.size());
  int rank = 0;
  for (const auto& [left, right] : merges) {
    const int a = find(left), b = find(right), m = find(left + right);
    if (a >= 0 && b >= 0 && m >= 0) merges_.emplace(pair_key(a, b), std::make_pair(rank, m));
    ++rank;
  }
}

int ByteLevelBpeTokenizer::find(std::string_view token) const {
  auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

std::vector<std::pair<std::string, std::string>> ByteLevelBpeTokenizer::split_merges(
    const std::vector<std::string>& lines) {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(lines.size());
  for (const std::string& line : lines) {
    const std::size_t sp = line.size() > 1 ? line.find(' ', 1) : std::string::npos;
    if (sp == std::string::npos) continue;  // malformed: ignored like an unknown merge
    out.emplace_back(line.substr(0, sp), line.substr(sp + 1));
  }
  return out;
}

void ByteLevelBpeTokenizer::encode_piece(std::string_view piece, std::vector<int>& out) const {
  if (options_.ignore_merges) {
    std::string whole;
    for (unsigned char c : piece) utf8::append(whole, byte_to_cp()[c]);
    if (const int id = find(whole); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<int> sym;
  sym.reserve(piece.size());
  for (unsigned char c : piece) {
    const int id = byte_ids_[c];
    if (id >= 0) sym.push_back(id);
    else if (options_.unk_id >= 0) sym.push_back(options_.unk_id);
  }
  const int n = static_cast<int>(sym.size());
  if (n <= 1) {
    out.insert(out.end(), sym.begin(), sym.end());
    return;
  }
  // Merge the lowest-ranked adjacent pair, leftmost on ties, until none merges: a linked list of
  // symbols (original index orders it, so "leftmost" is "smallest left index") and a heap of
  // candidates; entries whose sides changed since they were pushed are skipped when popped.
  std::vector<int> prev(static_cast<std::size_t>(n)), next(static_cast<std::size_t>(n));
  std::vector<char> alive(static_cast<std::size_t>(n), 1);
  for (int i = 0; i < n; ++i) {
    prev[static_cast<std::size_t>(i)] = i - 1;
    next[static_cast<std::size_t>(i)] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    int rank, left, right, left_id, right_id, merged;
  };
  auto worse = [](const Candidate& a, const Candidate& b) { return a.rank != b.rank ? a.rank > b.rank : a.left > b.left; };
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(worse)> heap(worse);
  auto consider = [&](int left) {
    if (left < 0) return;
    const int right = next[static_cast<std::size_t>(left)];
    if (right < 0) return;
    const int a = sym[static_cast<std::size_t>(left)], b = sym[static_cast<std::size_t>(right)];
    auto it = merges_.find(pair_key(a, b));
    if (it != merges_.end()) heap.push({it->second.first, left, right, a, b, it->second.second});
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    const auto l = static_cast<std::size_t>(c.left), r = static_cast<std::size_t>(c.right);
    if (!alive[l] || !alive[r] || next[l] != c.right || sym[l] != c.left_id || sym[r] != c.right_id) continue;
    sym[l] = c.merged;
    alive[r] = 0;
    next[l] = next[r];
    if (next[r] >= 0) prev[static_cast<std::size_t>(next[r])] = c.left;
    consider(prev[l]);
    consider(c.left);
  }
  for (int i = 0; i >= 0; i = next[static_cast<std::size_t>(i)]) out.push_back(sym[static_cast<std::size_t>(i)]);
}

void ByteLevelBpeTokenizer::encode_plain(std::string_view text, std::vector<int>& out) const {
  for (std::string_view piece : options_.pre_tokenizer->split(text)) encode_piece(piece, out);
}

std::vector<int> ByteLevelBpeTokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<int> out;
  if (options.add_bos && bos_ >= 0) out.push_back(bos_);
  // Special tokens split the text; the pieces between them are pre-tokenised on their own.
  std::size_t seg = 0, i = 0;
  while (i < text.size()) {
    int matched = -1;
    for (int id : specials_by_byte_[static_cast<unsigned char>(text[i])]) {
      if (!options.parse_special && is_control_[static_cast<std::size_t>(id)]) continue;
      const std::string& s = tokens_[static_cast<std::size_t>(id)];
      if (text.compare(i, s.size(), s) == 0) {
        matched = id;
        break;
      }
    }
    if (matched < 0) {
      ++i;
      continue;
    }
    encode_plain(text.substr(seg, i - seg), out);
    out.push_back(matched);
    i += tokens_[static_cast<std::size_t>(matched)].size();
    seg = i;
  }
  encode_plain(text.substr(seg), out);
  if (options.add_eos && eos_ >= 0) out.push_back(eos_);
  return out;
}

std::string ByteLevelBpeTokenizer::decode_token(int /*prev*/, int token) const {
  if (token < 0 || static_cast<std::size_t>(token) >= bytes_.size()) return {};
  return bytes_[static_cast<std::size_t>(token)];
}

}  // namespace inferlab
