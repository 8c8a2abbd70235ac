// SentencePiece-style tokenizer with byte fallback, behaving as llama2.c's run.c, and the
// llama2.c tokenizer.bin reader.
#include "inferlab/tokenizer/tokenizer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <queue>
#include <string>

#include "inferlab/error.h"
#include "inferlab/experiment/input_checks.h"

namespace inferlab {
namespace {

// "<0xAB>" -> 0xAB, or -1 when the piece is not a byte-fallback piece.
int byte_piece_value(const std::string& piece) {
  if (piece.size() != 6 || piece.compare(0, 3, "<0x") != 0 || piece[5] != '>') return -1;
  auto hex = [](char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    return -1;
  };
  const int hi = hex(piece[3]), lo = hex(piece[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

}  // namespace

std::string Tokenizer::decode(const std::vector<int>& tokens) const {
  // Starts as if after BOS, so the dummy-prefix space of the first piece is dropped and
  // decode(encode(text)) == text.
  std::string out;
  int prev = bos_id();
  for (int t : tokens) {
    out += decode_token(prev, t);
    prev = t;
  }
  return out;
}

SentencePieceTokenizer::SentencePieceTokenizer(std::vector<std::string> pieces, std::vector<float> scores,
                                               int bos_id, int eos_id)
    : pieces_(std::move(pieces)), scores_(std::move(scores)), bos_(bos_id), eos_(eos_id) {
  const int n = static_cast<int>(pieces_.size());
  check(n > 0, "tokenizer: empty vocabulary");
  check(scores_.size() == pieces_.size(), "tokenizer: " + std::to_string(scores_.size()) + " scores for " +
                                              std::to_string(n) + " pieces");
  check(bos_ >= 0 && bos_ < n && eos_ >= 0 && eos_ < n,
        "tokenizer: bos/eos ids (" + std::to_string(bos_) + ", " + std::to_string(eos_) +
            ") outside the vocabulary of " + std::to_string(n));
  sorted_.resize(pieces_.size());
  for (int i = 0; i < n; ++i) sorted_[static_cast<std::size_t>(i)] = i;
  // Stable on ties so a duplicated piece resolves to its lowest id.
  std::stable_sort(sorted_.begin(), sorted_.end(),
                   [&](int a, int b) { return pieces_[static_cast<std::size_t>(a)] < pieces_[static_cast<std::size_t>(b)]; });
  // Byte fallback needs <0x00>..<0xFF> at consecutive ids (llama2.c: id = byte + 3).
  const int base = lookup("<0x00>");
  if (base >= 0 && base + 255 < n) {
    bool consecutive = true;
    for (int b = 0; b < 256 && consecutive; ++b)
      consecutive = byte_piece_value(pieces_[static_cast<std::size_t>(base + b)]) == b;
    if (consecutive) byte_base_ = base;
  }
}

int SentencePieceTokenizer::lookup(std::string_view piece) const {
  auto it = std::lower_bound(sorted_.begin(), sorted_.end(), piece, [&](int id, std::string_view p) {
    return std::string_view(pieces_[static_cast<std::size_t>(id)]) < p;
  });
  if (it != sorted_.end() && pieces_[static_cast<std::size_t>(*it)] == piece) return *it;
  return -1;
}

void SentencePieceTokenizer::set_special_tokens(const std::vector<int>& control, const std::vector<int>& user_defined) {
  specials_.clear();
  is_control_.assign(pieces_.size(), false);
  auto add = [&](int id, bool is_control) {
    check(id >= 0 && id < vocab_size(), "tokenizer: special token id " + std::to_string(id) + " out of range");
    if (pieces_[static_cast<std::size_t>(id)].empty()) return;
    specials_.push_back(id);
    is_control_[static_cast<std::size_t>(id)] = is_control;
  };
  for (int id : control) add(id, true);
  for (int id : user_defined) add(id, false);
  std::stable_sort(specials_.begin(), specials_.end(), [&](int a, int b) {
    return pieces_[static_cast<std::size_t>(a)].size() > pieces_[static_cast<std::size_t>(b)].size();
  });
}

std::vector<int> SentencePieceTokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<int> out;
  if (options.add_bos) out.push_back(bos_);
  // Special tokens split the text (leftmost, longest first); each raw segment is merged on its
  // own, with the dummy prefix at the start and after every special token (llama.cpp).
  bool prefix = conventions_.add_space_prefix;
  std::size_t seg = 0;
  for (std::size_t i = 0; i < text.size() && !specials_.empty();) {
    int matched = -1;
    for (int id : specials_) {
      if (!options.parse_special && is_control_[static_cast<std::size_t>(id)]) continue;
      const std::string& s = pieces_[static_cast<std::size_t>(id)];
      if (text.compare(i, s.size(), s) == 0) {
        matched = id;
        break;
      }
    }
    if (matched < 0) {
      ++i;
      continue;
    }
    encode_segment(text.substr(seg, i - seg), prefix, out);
    out.push_back(matched);
    prefix = conventions_.add_space_prefix;
    i += pieces_[static_cast<std::size_t>(matched)].size();
    seg = i;
  }
  encode_segment(text.substr(seg), prefix, out);
  if (options.add_eos) out.push_back(eos_);
  return out;
}

void SentencePieceTokenizer::encode_segment(std::string_view text, bool prefix, std::vector<int>& out) const {
  if (text.empty()) return;
  // Initial symbols: the dummy-prefix space, then one per UTF-8 code point (run.c groups a
  // lead byte with up to 3 continuation bytes), falling back to one symbol per byte.
  std::vector<int> sym;
  auto add_piece = [&](std::string_view piece) {
    const int id = lookup(piece);
    if (id >= 0) {
      sym.push_back(id);
      return;
    }
    for (unsigned char byte : piece) {
      check(byte_base_ >= 0, "tokenizer: no piece for input and no byte fallback");
      sym.push_back(byte_base_ + byte);
    }
  };
  if (prefix) add_piece(" ");
  for (std::size_t i = 0; i < text.size();) {
    std::size_t len = 1;
    while (i + len < text.size() && len < 4 &&
           (static_cast<unsigned char>(text[i + len]) & 0xC0) == 0x80)
      ++len;
    add_piece(text.substr(i, len));
    i += len;
  }

  // Merge the adjacent pair with the highest score, leftmost on ties, until none merges —
  // run.c's loop, done with a heap over a linked list (O(n log n) instead of O(n^2)).
  // Symbol i's original index orders the list, so "leftmost" is "smallest left index".
  const int n = static_cast<int>(sym.size());
  std::vector<int> prev(static_cast<std::size_t>(n)), next(static_cast<std::size_t>(n));
  std::vector<bool> alive(static_cast<std::size_t>(n), true);
  for (int i = 0; i < n; ++i) {
    prev[static_cast<std::size_t>(i)] = i - 1;
    next[static_cast<std::size_t>(i)] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    float score;
    int left, right, left_id, right_id, merged;
  };
  auto worse = [](const Candidate& a, const Candidate& b) {
    if (a.score != b.score) return a.score < b.score;
    return a.left > b.left;
  };
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(worse)> heap(worse);
  auto consider = [&](int left) {
    if (left < 0) return;
    const int right = next[static_cast<std::size_t>(left)];
    if (right < 0) return;
    const int a = sym[static_cast<std::size_t>(left)], b = sym[static_cast<std::size_t>(right)];
    const int merged = lookup(pieces_[static_cast<std::size_t>(a)] + pieces_[static_cast<std::size_t>(b)]);
    if (merged >= 0) heap.push({scores_[static_cast<std::size_t>(merged)], left, right, a, b, merged});
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    const auto l = static_cast<std::size_t>(c.left), r = static_cast<std::size_t>(c.right);
    // Stale entries: a side was merged away or changed since the candidate was pushed.
    if (!alive[l] || !alive[r] || next[l] != c.right || sym[l] != c.left_id || sym[r] != c.right_id) continue;
    sym[l] = c.merged;
    alive[r] = false;
    next[l] = next[r];
    if (next[r] >= 0) prev[static_cast<std::size_t>(next[r])] = c.left;
    consider(prev[l]);
    consider(c.left);
  }
  for (int i = 0; i >= 0; i = next[static_cast<std::size_t>(i)]) out.push_back(sym[static_cast<std::size_t>(i)]);
}

std::string SentencePieceTokenizer::decode_token(int prev, int token) const {
  check(token >= 0 && token < vocab_size(),
        "tokenizer: token id " + std::to_string(token) + " outside [0, " + std::to_string(vocab_size()) + ")");
  if (token == bos_ || token == eos_) return "";  // control tokens print nothing
  const std::string& piece = pieces_[static_cast<std::size_t>(token)];
  const int byte = byte_piece_value(piece);
  if (byte >= 0) return std::string(1, static_cast<char>(byte));
  // After BOS the SentencePiece decoder strips the leading (dummy-prefix) space.
  if (prev == bos_ && conventions_.add_space_prefix && !piece.empty() && piece[0] == ' ') return piece.substr(1);
  return piece;
}

std::unique_ptr<Tokenizer> load_llama2c_tokenizer(const std::string& path, int vocab_size) {
  check(vocab_size > 0, path + ": tokenizer vocab_size must be > 0");
  require_regular_file(path, "a tokenizer file (llama2.c tokenizer.bin, tokenizer.json or .gguf)");
  std::ifstream in(path, std::ios::binary);
  check(in.good(), path + ": cannot open tokenizer");
  std::int32_t max_len = 0;
  in.read(reinterpret_cast<char*>(&max_len), sizeof(max_len));
  check(in.good() && max_len > 0 && max_len <= (1 << 16),
        path + ": not a llama2.c tokenizer (bad max_token_length)");
  std::vector<std::string> pieces(static_cast<std::size_t>(vocab_size));
  std::vector<float> scores(static_cast<std::size_t>(vocab_size));
  for (int i = 0; i < vocab_size; ++i) {
    std::int32_t len = 0;
    in.read(reinterpret_cast<char*>(&scores[static_cast<std::size_t>(i)]), sizeof(float));
    in.read(reinterpret_cast<char*>(&len), sizeof(len));
    check(in.good(), path + ": truncated at token " + std::to_string(i) + " of " + std::to_string(vocab_size));
    // A NaN score would make the merge order undefined (every comparison false).
    check(std::isfinite(scores[static_cast<std::size_t>(i)]),
          path + ": token " + std::to_string(i) + " has score " + std::to_string(scores[static_cast<std::size_t>(i)]) +
              "; allowed: a finite number");
    check(len >= 0 && len <= max_len, path + ": token " + std::to_string(i) + " has length " +
                                          std::to_string(len) + " (max " + std::to_string(max_len) + ")");
    std::string& piece = pieces[static_cast<std::size_t>(i)];
    piece.resize(static_cast<std::size_t>(len));
    in.read(piece.data(), len);
    check(in.good() || (in.eof() && in.gcount() == len && i + 1 == vocab_size),
          path + ": truncated in token " + std::to_string(i));
  }
  check(vocab_size > 2, path + ": vocabulary too small for <unk>, BOS, EOS");
  return std::make_unique<SentencePieceTokenizer>(std::move(pieces), std::move(scores), 1, 2);
}

}  // namespace inferlab
