// Byte-level BPE (GPT-2 style), as used by GGUF "gpt2" tokenizers and Hugging Face
// tokenizer.json files with a ByteLevel pre-tokenizer (SmolLM2, Qwen2, Llama 3, ...).
//
// Encoding: special tokens are matched verbatim first (control tokens only when parse_special;
// user-defined ones always, as llama.cpp does); the rest is split into pre-tokens by the file's
// PreTokenizer (regex sequence); each pre-token's bytes are mapped to GPT-2's printable byte
// alphabet and merged pairwise, lowest merge rank first (leftmost on ties), with a heap over
// merge candidates: O(n log n) in the pre-token's length. Decoding maps the alphabet back to
// bytes, so decode(encode(x)) == x for any bytes.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "inferlab/tokenizer/pretokenizer.h"
#include "inferlab/tokenizer/tokenizer.h"

namespace inferlab {

struct BpeOptions {
  // The pre-tokenizer; null: GPT-2's pattern.
  std::shared_ptr<const PreTokenizer> pre_tokenizer;
  std::vector<int> special_ids;       // control tokens, matched verbatim when parse_special
  std::vector<int> user_defined_ids;  // tokens always matched verbatim before pre-tokenisation
  int unk_id = -1;                    // used for a byte missing from the vocabulary; -1: drop it
  bool ignore_merges = false;         // a pre-token that is itself a token is emitted whole (Llama 3)
};

class ByteLevelBpeTokenizer final : public Tokenizer {
 public:
  // tokens: the vocabulary in GPT-2's byte alphabet (e.g. "Ġthe"); merges: (left, right) pairs
  // in rank order. Merges naming unknown tokens are ignored.
  ByteLevelBpeTokenizer(std::vector<std::string> tokens,
                        const std::vector<std::pair<std::string, std::string>>& merges, int bos_id,
                        int eos_id, BpeOptions options = {});
  ByteLevelBpeTokenizer(const ByteLevelBpeTokenizer&) = delete;
  ByteLevelBpeTokenizer& operator=(const ByteLevelBpeTokenizer&) = delete;
  ByteLevelBpeTokenizer(ByteLevelBpeTokenizer&&) = default;  // the strings' storage moves with the vector

  using Tokenizer::encode;
  std::vector<int> encode(std::string_view text, const EncodeOptions& options) const override;
  std::string decode_token(int prev, int token) const override;
  int vocab_size() const override { return static_cast<int>(tokens_.size()); }
  int bos_id() const override { return bos_; }
  int eos_id() const override { return eos_; }
  const std::string& token(int id) const { return tokens_.at(static_cast<std::size_t>(id)); }
  // Id of a token string (in the byte alphabet), or -1.
  int find(std::string_view token) const;

  const PreTokenizer& pre_tokenizer() const { return *options_.pre_tokenizer; }
  // "a b" merge lines (GGUF tokenizer.ggml.merges) as pairs; splits at the first space after
  // the first character.
  static std::vector<std::pair<std::string, std::string>> split_merges(
      const std::vector<std::string>& lines);

 private:
  void encode_piece(std::string_view piece, std::vector<int>& out) const;
  void encode_plain(std::string_view text, std::vector<int>& out) const;

  std::vector<std::string> tokens_;
  std::vector<std::string> bytes_;  // decoded bytes of each token
  // Token text -> id; the keys view tokens_' strings (never modified after construction), so
  // lookups allocate nothing. Hence no copies: a copy's keys would view the original's strings.
  std::unordered_map<std::string_view, int> ids_;
  // (left id << 32 | right id) -> (rank, merged id)
  std::unordered_map<std::uint64_t, std::pair<int, int>> merges_;
  int byte_ids_[256];               // token id of each single byte, or -1
  BpeOptions options_;
  // Special and user-defined ids by their text's first byte, longest text first; a flag per id
  // says whether it is a control token (matched only when parse_special).
  std::array<std::vector<int>, 256> specials_by_byte_;
  std::vector<bool> is_control_;
  int bos_, eos_;
};

}  // namespace inferlab
