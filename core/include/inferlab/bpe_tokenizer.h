// Byte-level BPE (GPT-2 style), as used by GGUF "gpt2" tokenizers and Hugging Face
// tokenizer.json files with a ByteLevel pre-tokenizer (SmolLM2, Qwen2, Llama 3, ...).
//
// Encoding: special tokens are matched verbatim first; the rest is split into pre-tokens by the
// GPT-2 pattern (optionally with every digit on its own first, as SmolLM2/StarCoder do); each
// pre-token's bytes are mapped to GPT-2's printable byte alphabet and merged pairwise by merge
// rank. Decoding maps the alphabet back to bytes, so decode(encode(x)) == x for any bytes.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "inferlab/tokenizer.h"

namespace inferlab {

struct BpeOptions {
  bool split_digits = false;     // each digit is its own pre-token (\p{N} isolated first)
  std::vector<int> special_ids;  // tokens matched verbatim in the text before pre-tokenisation
  int unk_id = -1;               // used for a byte missing from the vocabulary; -1: drop it
  bool ignore_merges = false;    // a pre-token that is itself a token is emitted whole (Llama 3)
};

class ByteLevelBpeTokenizer final : public Tokenizer {
 public:
  // tokens: the vocabulary in GPT-2's byte alphabet (e.g. "Ġthe"); merges: (left, right) pairs
  // in rank order. Merges naming unknown tokens are ignored.
  ByteLevelBpeTokenizer(std::vector<std::string> tokens,
                        const std::vector<std::pair<std::string, std::string>>& merges, int bos_id,
                        int eos_id, BpeOptions options = {});

  std::vector<int> encode(std::string_view text, bool add_bos) const override;
  std::string decode_token(int prev, int token) const override;
  int vocab_size() const override { return static_cast<int>(tokens_.size()); }
  int bos_id() const override { return bos_; }
  int eos_id() const override { return eos_; }
  const std::string& token(int id) const { return tokens_.at(static_cast<std::size_t>(id)); }
  // Id of a token string (in the byte alphabet), or -1.
  int find(std::string_view token) const;

  // The pre-tokens of text (views into it), by the GPT-2 pattern
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  // with Unicode classes approximated by code point ranges (Latin, Greek, Cyrillic, Hebrew,
  // Arabic, Indic, CJK, kana, Hangul letters; decimal and other digits; Unicode White_Space).
  static std::vector<std::string_view> pre_tokenize(std::string_view text, bool split_digits);
  // "a b" merge lines (GGUF tokenizer.ggml.merges) as pairs; splits at the first space after
  // the first character.
  static std::vector<std::pair<std::string, std::string>> split_merges(
      const std::vector<std::string>& lines);

 private:
  void encode_piece(std::string_view piece, std::vector<int>& out) const;

  std::vector<std::string> tokens_;
  std::vector<std::string> bytes_;  // decoded bytes of each token
  std::unordered_map<std::string, int> ids_;
  // (left id << 32 | right id) -> (rank, merged id)
  std::unordered_map<std::uint64_t, std::pair<int, int>> merges_;
  int byte_ids_[256];               // token id of each single byte, or -1
  BpeOptions options_;
  std::vector<int> specials_;       // special ids, longest text first
  int bos_, eos_;
};

}  // namespace inferlab
