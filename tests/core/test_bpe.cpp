// Byte-level BPE: the GPT-2 pre-tokenizer's splits, merges by rank, special tokens, exact round
// trips over awkward text, and SmolLM2's encodings against ids from Hugging Face `tokenizers`.
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "inferlab/tokenizer/bpe_tokenizer.h"
#include "inferlab/error.h"
#include "inferlab/tokenizer/pretokenizer.h"
#include "inferlab/formats/formats.h"
#include "test_support.h"

namespace inferlab {
namespace {

using Pieces = std::vector<std::string>;

Pieces split(const std::string& text, bool digits = false) {
  static const PreTokenizer gpt2 = PreTokenizer::named("gpt-2"), smollm = PreTokenizer::named("smollm");
  Pieces out;
  for (auto p : (digits ? smollm : gpt2).split(text)) out.emplace_back(p);
  return out;
}

Pieces split_by(const std::string& name, const std::string& text) {
  Pieces out;
  for (auto p : PreTokenizer::named(name).split(text)) out.emplace_back(p);
  return out;
}

TEST(BpePreTokenize, Llama3GroupsDigitsInThreesAndKeepsPunctuationWithNewlines) {
  EXPECT_EQ(split_by("llama-bpe", "333333 33333333"), (Pieces{"333", "333", " ", "333", "333", "33"}));
  EXPECT_EQ(split_by("llama-bpe", "Hello World's!\n\n x"), (Pieces{"Hello", " World", "'s", "!\n\n", " x"}));
  EXPECT_EQ(split_by("llama-bpe", "I'LL"), (Pieces{"I", "'LL"}));  // contractions ignore case
  EXPECT_EQ(split_by("qwen2", "ab 12"), (Pieces{"ab", " ", "1", "2"}));
  EXPECT_EQ(split_by("deepseek-coder", "ab\ncd"), (Pieces{"ab", "\n", "cd"}));
}

TEST(BpePreTokenize, UnknownNameListsTheKnownOnes) {
  try {
    PreTokenizer::named("no-such-pre");
    FAIL() << "expected Error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("no-such-pre"), std::string::npos) << what;
    EXPECT_NE(what.find("llama-bpe"), std::string::npos) << what;
    EXPECT_NE(what.find("qwen2"), std::string::npos) << what;
  }
  EXPECT_THROW(PreTokenizer("bad", {"(unclosed"}), Error);
}

TEST(BpePreTokenize, InvalidUtf8StaysInThePiecesAndRoundTrips) {
  const std::string text = "ab\xff\xfe cd \xc3";
  std::string joined;
  for (const auto& p : split(text)) joined += p;
  EXPECT_EQ(joined, text);
}

TEST(BpePreTokenize, FollowsTheGpt2Pattern) {
  EXPECT_EQ(split("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split("I'm here, they'll go"), (Pieces{"I", "'m", " here", ",", " they", "'ll", " go"}));
  EXPECT_EQ(split("a  b"), (Pieces{"a", " ", " b"}));          // \s+(?!\S) leaves one space
  EXPECT_EQ(split("x\n\ny"), (Pieces{"x", "\n", "\n", "y"}));
  EXPECT_EQ(split("end   "), (Pieces{"end", "   "}));           // trailing run kept whole
  EXPECT_EQ(split("abc 123 4x"), (Pieces{"abc", " 123", " 4", "x"}));
  EXPECT_EQ(split("f(x)!= y;"), (Pieces{"f", "(", "x", ")!=", " y", ";"}));
  EXPECT_EQ(split(" 's"), (Pieces{" '", "s"}));
  EXPECT_EQ(split("caf\xc3\xa9 na\xc3\xafve"), (Pieces{"caf\xc3\xa9", " na\xc3\xafve"}));   // accents are letters
  EXPECT_EQ(split("\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96"),                        // CJK letters, fullwidth comma
            (Pieces{"\xe4\xbd\xa0\xe5\xa5\xbd", "\xef\xbc\x8c", "\xe4\xb8\x96"}));
  EXPECT_EQ(split("hi \xf0\x9f\x98\x80\xf0\x9f\x91\x8d!"), (Pieces{"hi", " \xf0\x9f\x98\x80\xf0\x9f\x91\x8d!"}));  // emoji: other
  EXPECT_EQ(split("\xc2\xa0x"), (Pieces{"\xc2\xa0", "x"}));    // NBSP is whitespace
  EXPECT_EQ(split(""), Pieces{});
}

TEST(BpePreTokenize, SplitsDigitsIndividuallyLikeSmolLM2) {
  EXPECT_EQ(split("abc 123 4x", true), (Pieces{"abc", " ", "1", "2", "3", " ", "4", "x"}));
  EXPECT_EQ(split("v2.0", true), (Pieces{"v", "2", ".", "0"}));
  EXPECT_EQ(split("a  1", true), (Pieces{"a", "  ", "1"}));  // the run before a digit ends its segment
}

// GPT-2's byte alphabet, written out independently of the library.
std::string byte_token(int b) {
  int cp = b;
  if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) {
    int n = 0;
    for (int k = 0; k < b; ++k)
      if (!((k >= 0x21 && k <= 0x7E) || (k >= 0xA1 && k <= 0xAC) || k >= 0xAE)) ++n;
    cp = 256 + n;
  }
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// All 256 bytes, then merged tokens; ids: byte b -> b, merges in order from 256.
ByteLevelBpeTokenizer small_tokenizer() {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(byte_token(b));
  const std::string sp = byte_token(' ');
  std::vector<std::pair<std::string, std::string>> merges = {
      {"h", "e"}, {sp, "t"}, {sp + "t", "he"}, {"l", "l"}, {"ll", "o"}, {sp, sp}, {"e", "r"}};
  for (const auto& [a, b] : merges) tokens.push_back(a + b);
  tokens.push_back("<|end|>");
  BpeOptions opt;
  opt.special_ids = {263};
  return ByteLevelBpeTokenizer(tokens, merges, -1, 263, opt);
}

TEST(Bpe, MergesByRankAndMatchesSpecials) {
  const ByteLevelBpeTokenizer t = small_tokenizer();
  EXPECT_EQ(t.vocab_size(), 264);
  EXPECT_EQ(t.encode(" the hello", false), (std::vector<int>{258, 32, 256, 260}));
  EXPECT_EQ(t.encode("her", false), (std::vector<int>{256, 'r'}));  // "h e" outranks "e r"
  EXPECT_EQ(t.encode("   x", false), (std::vector<int>{261, 32, 'x'}));
  EXPECT_EQ(t.encode("a<|end|>b<|end", false), (std::vector<int>{'a', 263, 'b', '<', '|', 'e', 'n', 'd'}));
  EXPECT_EQ(t.decode_token(0, 258), " the");
  EXPECT_EQ(t.decode_token(0, 263), "<|end|>");
  EXPECT_EQ(t.decode_token(0, 10), "\n");
  EXPECT_EQ(t.decode_token(0, 0xE9), "\xe9");  // a lone byte, not its code point
  EXPECT_EQ(t.decode_token(0, 9999), "");
  EXPECT_EQ(t.find(byte_token(' ') + "the"), 258);
}

// Text classes the issue names: whitespace runs, newlines, digits, punctuation, accents, CJK,
// emoji, code; plus invalid UTF-8, which must still round-trip byte for byte.
const std::vector<std::string>& round_trip_texts() {
  static const std::vector<std::string> texts = {
      "", " ", "   ", "\t\t  \t", "trailing   ", "   leading", "a  b   c    d",
      "\n", "\n\n\n", "line\r\nbreaks\n\n  indented\n\ttabbed\n",
      "0", "1234567890", "3.14159 2,000,000 1e-9 0x1F",
      "!!! ??? ... --- ((( ))) [] {} <> @#$%^&*_+=|\\/~`", "\"quoted\" 'single' \xe2\x80\x9c" "curly\xe2\x80\x9d",
      "I'm you're we've he'd they'll it's DON'T",
      "Caf\xc3\xa9 na\xc3\xafve r\xc3\xa9sum\xc3\xa9 \xc3\x85ngstr\xc3\xb6m Stra\xc3\x9f" "e e\xcc\x81",
      "\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96\xe7\x95\x8c\xef\xbc\x81 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e "
      "\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4",
      "\xf0\x9f\x98\x80\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd \xf0\x9f\x87\xba\xf0\x9f\x87\xb8 \xe2\x9d\xa4\xef\xb8\x8f",
      "def f(x):\n    return {'a': [1, 2]}  # \xce\xbb\n\nint main() { return 0; }\n",
      std::string("nul\0byte", 8),
  };
  return texts;
}

// Invalid UTF-8: bytes like 0xFF have no token in real vocabularies (they never occur in text),
// but a tokenizer holding all 256 byte tokens round-trips them too.
const std::string kInvalidUtf8 = "\xff\xfe invalid \xc3 utf8 \xe4\xbd \x80\x80";

TEST(Bpe, RoundTripsEveryTextClass) {
  const ByteLevelBpeTokenizer t = small_tokenizer();
  for (const std::string& text : round_trip_texts()) EXPECT_EQ(t.decode(t.encode(text, false)), text) << text;
  EXPECT_EQ(t.decode(t.encode(kInvalidUtf8, false)), kInvalidUtf8);
}

// ---- SmolLM2 (optional: scripts/fetch_smollm2.sh) -----------------------------------------------

struct Reference {
  const char* text;
  std::vector<int> ids;
};

// Ids from Hugging Face tokenizers (see scripts/make_bpe_reference.py).
const std::vector<Reference>& smollm2_references() {
  static const std::vector<Reference> refs = {
#include "data/smollm2_bpe_reference.inc"
  };
  return refs;
}

TEST(Bpe, SmolLM2MatchesHuggingFaceTokenizers) {
  const std::string path = testing::smollm2_path();
  INFERLAB_REQUIRE_FILE(path);
  const auto tok = load_gguf_tokenizer(GgufFile::open(path));
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 49152);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  ASSERT_EQ(smollm2_references().size(), 20u);
  for (const Reference& r : smollm2_references()) {
    EXPECT_EQ(tok->encode(r.text, false), r.ids) << r.text;
    EXPECT_EQ(tok->decode(r.ids), r.text);
  }
  EXPECT_EQ(tok->encode("The capital of France is", true).front(), 1);
  for (const std::string& text : round_trip_texts()) EXPECT_EQ(tok->decode(tok->encode(text, false)), text) << text;
}

}  // namespace
}  // namespace inferlab
