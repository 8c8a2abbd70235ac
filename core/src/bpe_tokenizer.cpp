// Byte-level BPE: GPT-2's byte <-> printable code point alphabet, merges by rank, special
// tokens matched verbatim. See bpe_pretokenize.cpp for the pre-tokenizer.
#include <algorithm>
#include <array>
#include <limits>

#include "inferlab/bpe_tokenizer.h"
#include "inferlab/error.h"
#include "utf8.h"

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

  std::vector<bool> special(tokens_.size(), false);
  for (int id : options_.special_ids) {
    check(id >= 0 && id < n, "byte-level BPE tokenizer: special token id " + std::to_string(id) +
                                 " out of range");
    if (!tokens_[static_cast<std::size_t>(id)].empty() && !special[static_cast<std::size_t>(id)]) {
      special[static_cast<std::size_t>(id)] = true;
      specials_.push_back(id);
    }
  }
  std::stable_sort(specials_.begin(), specials_.end(), [&](int a, int b) {
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
  auto it = ids_.find(std::string(token));
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
  std::vector<int> syms;
  syms.reserve(piece.size());
  for (unsigned char c : piece) {
    const int id = byte_ids_[c];
    if (id >= 0) syms.push_back(id);
    else if (options_.unk_id >= 0) syms.push_back(options_.unk_id);
  }
  // Merge the lowest-ranked adjacent pair (leftmost on ties) until none is left.
  while (syms.size() > 1) {
    int best_rank = std::numeric_limits<int>::max(), best_at = -1, best_id = -1;
    for (std::size_t i = 0; i + 1 < syms.size(); ++i) {
      auto it = merges_.find(pair_key(syms[i], syms[i + 1]));
      if (it != merges_.end() && it->second.first < best_rank) {
        best_rank = it->second.first;
        best_at = static_cast<int>(i);
        best_id = it->second.second;
      }
    }
    if (best_at < 0) break;
    syms[static_cast<std::size_t>(best_at)] = best_id;
    syms.erase(syms.begin() + best_at + 1);
  }
  out.insert(out.end(), syms.begin(), syms.end());
}

std::vector<int> ByteLevelBpeTokenizer::encode(std::string_view text, bool add_bos) const {
  std::vector<int> out;
  if (add_bos && bos_ >= 0) out.push_back(bos_);
  auto encode_plain = [&](std::string_view segment) {
    for (std::string_view piece : pre_tokenize(segment, options_.split_digits)) encode_piece(piece, out);
  };
  std::size_t seg = 0, i = 0;
  while (i < text.size() && !specials_.empty()) {
    int matched = -1;
    for (int id : specials_) {
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
    encode_plain(text.substr(seg, i - seg));
    out.push_back(matched);
    i += tokens_[static_cast<std::size_t>(matched)].size();
    seg = i;
  }
  encode_plain(text.substr(seg));
  return out;
}

std::string ByteLevelBpeTokenizer::decode_token(int /*prev*/, int token) const {
  if (token < 0 || static_cast<std::size_t>(token) >= bytes_.size()) return {};
  return bytes_[static_cast<std::size_t>(token)];
}

}  // namespace inferlab
