// Text <-> token ids. One abstract interface; SentencePiece-style (llama2.c tokenizer.bin,
// GGUF "llama") is built in, byte-level BPE lives beside it.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace inferlab {

struct EncodeOptions {
  bool add_bos = false;
  bool add_eos = false;
  bool parse_special = true;  // control tokens written in the text (e.g. "<|im_start|>") are their ids
};

// A model file's tokenisation conventions: GGUF tokenizer.ggml.add_bos_token / add_eos_token /
// add_space_prefix, tokenizer_config.json's add_bos_token / add_eos_token. The defaults are
// llama.cpp's for a SentencePiece vocabulary; loaders set what the file says.
struct TokenizerConventions {
  bool add_bos = true;
  bool add_eos = false;
  bool add_space_prefix = true;  // SentencePiece's dummy prefix: a space before the text
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Token ids for text, with BOS/EOS around them as asked (none when the vocabulary has none).
  virtual std::vector<int> encode(std::string_view text, const EncodeOptions& options) const = 0;
  // encode with BOS prepended when add_bos (control tokens in the text parsed).
  std::vector<int> encode(std::string_view text, bool add_bos) const {
    return encode(text, EncodeOptions{add_bos, false, true});
  }
  // A document or prompt as the model file says to encode it: BOS/EOS per conventions(), with
  // add_bos overriding the file's BOS choice when set.
  std::vector<int> encode_document(std::string_view text, std::optional<bool> add_bos = std::nullopt) const {
    return encode(text, EncodeOptions{add_bos.value_or(conventions_.add_bos), conventions_.add_eos, true});
  }
  // Bytes that `token` adds when it follows `prev` (for streaming output).
  virtual std::string decode_token(int prev, int token) const = 0;
  virtual int vocab_size() const = 0;
  virtual int bos_id() const = 0;
  virtual int eos_id() const = 0;
  // decode_token over a sequence.
  std::string decode(const std::vector<int>& tokens) const;
  const TokenizerConventions& conventions() const { return conventions_; }
  void set_conventions(const TokenizerConventions& c) { conventions_ = c; }

 protected:
  TokenizerConventions conventions_;
};

// SentencePiece-style tokenizer with scores and <0xXX> byte fallback, as in llama2.c's run.c and
// llama.cpp: a leading space is added to the text (the "dummy prefix", when
// conventions().add_space_prefix), pieces are merged greedily by score, highest first, leftmost
// on ties, with a heap over merge candidates (O(n log n)).
class SentencePieceTokenizer final : public Tokenizer {
 public:
  SentencePieceTokenizer(std::vector<std::string> pieces, std::vector<float> scores, int bos_id,
                         int eos_id);
  using Tokenizer::encode;
  std::vector<int> encode(std::string_view text, const EncodeOptions& options) const override;
  std::string decode_token(int prev, int token) const override;
  int vocab_size() const override { return static_cast<int>(pieces_.size()); }
  int bos_id() const override { return bos_; }
  int eos_id() const override { return eos_; }
  const std::string& piece(int id) const { return pieces_.at(static_cast<std::size_t>(id)); }
  float score(int id) const { return scores_.at(static_cast<std::size_t>(id)); }
  // Tokens matched verbatim in the text before merging, as llama.cpp does for a GGUF's control
  // (only when parse_special) and user-defined token types; raw text after one gets the dummy
  // prefix again. None by default (llama2.c).
  void set_special_tokens(const std::vector<int>& control, const std::vector<int>& user_defined);

 private:
  int lookup(std::string_view piece) const;
  void encode_segment(std::string_view text, bool prefix, std::vector<int>& out) const;
  std::vector<int> specials_;      // control and user-defined ids, longest text first
  std::vector<bool> is_control_;   // per id
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::vector<int> sorted_;  // ids sorted by piece, for lookup
  int byte_base_ = -1;       // id of <0x00>, or -1 without byte fallback
  int bos_, eos_;
};

// llama2.c tokenizer.bin: int32 max_token_length, then per token float score, int32 len, bytes.
std::unique_ptr<Tokenizer> load_llama2c_tokenizer(const std::string& path, int vocab_size);

}  // namespace inferlab
