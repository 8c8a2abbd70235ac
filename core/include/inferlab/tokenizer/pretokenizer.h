// Pre-tokenizers as data: a pre-tokenizer is a sequence of regular expressions, each splitting
// every piece left by the previous one into its matches and the gaps between them (both kept,
// as llama.cpp's unicode_regex_split and Hugging Face's Split{behavior: Isolated} do). The
// patterns are the published ones (llama.cpp's llama-vocab.cpp per `tokenizer.ggml.pre` name,
// the `pre_tokenizer` section of a tokenizer.json), run by PCRE2 with UTF and Unicode
// properties (\p{L}, \p{N}, \s are Unicode's), JIT-compiled where available.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace inferlab {

class PreTokenizer {
 public:
  // Compiles the patterns; a pattern PCRE2 rejects is an Error naming it and the offset.
  PreTokenizer(std::string name, std::vector<std::string> patterns);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  // The pieces of text (views into it), in order; their concatenation is text. Invalid UTF-8
  // never matches a pattern, so it stays in the gaps and round-trips.
  std::vector<std::string_view> split(std::string_view text) const;
  const std::string& name() const { return name_; }
  const std::vector<std::string>& patterns() const { return patterns_; }

  // The pre-tokenizer a GGUF `tokenizer.ggml.pre` value names ("gpt-2", "llama-bpe", "qwen2",
  // ...); an unknown name is an Error listing the known ones.
  static PreTokenizer named(const std::string& name);
  // Whether `name` is known, and every known name (aliases included), sorted.
  static bool is_known(const std::string& name);
  static std::vector<std::string> known_names();

 private:
  struct Compiled;
  std::string name_;
  std::vector<std::string> patterns_;
  std::vector<std::unique_ptr<Compiled>> compiled_;
};

// The GPT-2 pattern (Hugging Face ByteLevel{use_regex: true}).
extern const char* const kGpt2Pattern;

}  // namespace inferlab
