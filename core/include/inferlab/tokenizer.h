// Text <-> token ids. One abstract interface; SentencePiece-style (llama2.c tokenizer.bin,
// GGUF "llama") is built in, byte-level BPE lives beside it.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace inferlab {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Token ids for text, with BOS prepended when add_bos.
  virtual std::vector<int> encode(std::string_view text, bool add_bos) const = 0;
  // Bytes that `token` adds when it follows `prev` (for streaming output).
  virtual std::string decode_token(int prev, int token) const = 0;
  virtual int vocab_size() const = 0;
  virtual int bos_id() const = 0;
  virtual int eos_id() const = 0;
  // decode_token over a sequence.
  std::string decode(const std::vector<int>& tokens) const;
};

// SentencePiece-style tokenizer with scores and <0xXX> byte fallback, as in llama2.c's run.c:
// a leading space is added to the text ("dummy prefix"), pieces are merged greedily by score.
class SentencePieceTokenizer final : public Tokenizer {
 public:
  SentencePieceTokenizer(std::vector<std::string> pieces, std::vector<float> scores, int bos_id,
                         int eos_id);
  std::vector<int> encode(std::string_view text, bool add_bos) const override;
  std::string decode_token(int prev, int token) const override;
  int vocab_size() const override { return static_cast<int>(pieces_.size()); }
  int bos_id() const override { return bos_; }
  int eos_id() const override { return eos_; }
  const std::string& piece(int id) const { return pieces_.at(static_cast<std::size_t>(id)); }

 private:
  int lookup(std::string_view piece) const;
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::vector<int> sorted_;  // ids sorted by piece, for lookup
  int byte_base_ = -1;       // id of <0x00>, or -1 without byte fallback
  int bos_, eos_;
};

// llama2.c tokenizer.bin: int32 max_token_length, then per token float score, int32 len, bytes.
std::unique_ptr<Tokenizer> load_llama2c_tokenizer(const std::string& path, int vocab_size);

}  // namespace inferlab
