// SentencePiece tokenizer: llama2.c run.c semantics on the real tok512.bin and on small
// hand-made vocabularies, and the tokenizer.bin reader's error handling.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "inferlab/error.h"
#include "inferlab/support/rng.h"
#include "inferlab/tokenizer/tokenizer.h"
#include "test_support.h"

namespace inferlab {
namespace {

// run.c's merge loop verbatim in spirit: scan all adjacent pairs, merge the best (strictly
// greater score, so leftmost on ties), repeat. O(n^2); the reference for the heap version.
std::vector<int> naive_encode(const SentencePieceTokenizer& tok, const std::vector<float>& scores,
                              const std::string& text, bool bos) {
  auto find = [&](const std::string& s) {
    for (int i = 0; i < tok.vocab_size(); ++i)
      if (tok.piece(i) == s) return i;
    return -1;
  };
  std::vector<int> ids;
  if (bos) ids.push_back(tok.bos_id());
  if (text.empty()) return ids;
  std::vector<int> sym;
  auto add = [&](const std::string& piece) {
    const int id = find(piece);
    if (id >= 0) {
      sym.push_back(id);
    } else {
      for (unsigned char b : piece) sym.push_back(find("<0x" + std::string(1, "0123456789ABCDEF"[b >> 4]) +
                                                       std::string(1, "0123456789ABCDEF"[b & 15]) + ">"));
    }
  };
  add(" ");
  for (std::size_t i = 0; i < text.size();) {
    std::size_t len = 1;
    while (i + len < text.size() && len < 4 && (static_cast<unsigned char>(text[i + len]) & 0xC0) == 0x80) ++len;
    add(text.substr(i, len));
    i += len;
  }
  for (;;) {
    float best = -1e10f;
    int best_id = -1, best_i = -1;
    for (std::size_t i = 0; i + 1 < sym.size(); ++i) {
      const int id = find(tok.piece(sym[i]) + tok.piece(sym[i + 1]));
      if (id >= 0 && scores[static_cast<std::size_t>(id)] > best) {
        best = scores[static_cast<std::size_t>(id)];
        best_id = id;
        best_i = static_cast<int>(i);
      }
    }
    if (best_i < 0) break;
    sym[static_cast<std::size_t>(best_i)] = best_id;
    sym.erase(sym.begin() + best_i + 1);
  }
  ids.insert(ids.end(), sym.begin(), sym.end());
  return ids;
}

// The scores of tok512.bin, read independently of the library.
std::vector<float> read_scores(const std::string& path, int vocab) {
  std::ifstream in(path, std::ios::binary);
  std::int32_t max_len = 0, len = 0;
  in.read(reinterpret_cast<char*>(&max_len), 4);
  std::vector<float> scores(static_cast<std::size_t>(vocab));
  for (int i = 0; i < vocab; ++i) {
    in.read(reinterpret_cast<char*>(&scores[static_cast<std::size_t>(i)]), 4);
    in.read(reinterpret_cast<char*>(&len), 4);
    in.seekg(len, std::ios::cur);
  }
  return scores;
}

std::string tok512_path() { return testing::data_path("models/stories260K/tok512.bin"); }

TEST(Tokenizer, RealVocabularyRoundTripsAsciiText) {
  INFERLAB_REQUIRE_FILE(tok512_path());
  auto tok = load_llama2c_tokenizer(tok512_path(), 512);
  ASSERT_EQ(tok->vocab_size(), 512);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  const std::string texts[] = {"Once upon a time, there was a little girl named Lily.",
                               "Hello world!", "  two leading spaces", "tabs\tand\nnewlines\n",
                               "x", "The quick brown fox jumps over the lazy dog 0123456789 ~`{}|"};
  for (const auto& t : texts) {
    const auto ids = tok->encode(t, true);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids.front(), 1);
    EXPECT_EQ(tok->decode(ids), t);
    EXPECT_EQ(tok->decode(tok->encode(t, false)), t);
  }
}

TEST(Tokenizer, RealVocabularyMatchesRunCMergeLoop) {
  INFERLAB_REQUIRE_FILE(tok512_path());
  auto base = load_llama2c_tokenizer(tok512_path(), 512);
  const auto& tok = dynamic_cast<const SentencePieceTokenizer&>(*base);
  const auto scores = read_scores(tok512_path(), 512);
  std::vector<std::string> texts = {"Once upon a time", "She wanted to play with it, but it was too high.",
                                    "caf\xC3\xA9 \xE2\x82\xAC 10 \xF0\x9F\x98\x80!", "aaaaaaaaaaaaaaaa",
                                    "\xFF\xFE broken utf8 \x80"};
  // Random strings over letters, spaces and punctuation exercise many merge orders.
  Rng rng(7);
  const std::string alphabet = "abcdehilnorst ,.'";
  for (int i = 0; i < 30; ++i) {
    std::string s;
    const int len = static_cast<int>(rng.uniform_int(1, 60));
    for (int k = 0; k < len; ++k) s += alphabet[static_cast<std::size_t>(rng.uniform_int(0, static_cast<std::int64_t>(alphabet.size())))];
    texts.push_back(s);
  }
  for (const auto& t : texts) {
    SCOPED_TRACE(t);
    EXPECT_EQ(tok.encode(t, true), naive_encode(tok, scores, t, true));
  }
}

TEST(Tokenizer, ByteFallbackAndSpecialCases) {
  INFERLAB_REQUIRE_FILE(tok512_path());
  auto tok = load_llama2c_tokenizer(tok512_path(), 512);
  EXPECT_EQ(tok->encode("", true), std::vector<int>{1});
  EXPECT_TRUE(tok->encode("", false).empty());
  // U+00F6 is not a piece of the 512-token vocabulary: its two UTF-8 bytes fall back to
  // <0xC3> and <0xB6>, ids byte + 3 as in llama2.c; U+00E9 is a whole piece (485).
  const int space = tok->encode(" ", false).front();
  EXPECT_EQ(tok->encode("\xC3\xB6", false), (std::vector<int>{space, 0xC3 + 3, 0xB6 + 3}));
  EXPECT_EQ(tok->encode("\xC3\xA9", false), (std::vector<int>{space, 485}));
  EXPECT_EQ(tok->decode(tok->encode("\xC3\xB6", false)), "\xC3\xB6");
  EXPECT_EQ(tok->decode_token(5, 0x0A + 3), "\n");  // <0x0A>
  EXPECT_EQ(tok->decode_token(5, 1), "");            // control tokens print nothing
  EXPECT_THROW(tok->decode_token(1, 512), Error);
  EXPECT_THROW(tok->decode_token(1, -1), Error);
}

// A hand-made vocabulary: merges by score, leftmost on ties, and the BOS space rule.
SentencePieceTokenizer toy() {
  std::vector<std::string> pieces = {"<unk>", "<s>", "</s>", " ", "a", "b", "ab", " a", "ba", " ab"};
  std::vector<float> scores = {0, 0, 0, 0, 0, 0, 1.0f, 2.0f, 1.0f, 3.0f};
  return SentencePieceTokenizer(pieces, scores, 1, 2);
}

TEST(Tokenizer, MergesHighestScoreFirstLeftmostOnTies) {
  const auto tok = toy();
  // " ab": symbols [" ", a, b]; " a" (2) beats "ab" (1), then " ab" (3).
  EXPECT_EQ(tok.encode("ab", false), (std::vector<int>{9}));
  // " bab": [" ", b, a, b]: "ba" (1) and "ab" (1) tie -> leftmost "ba": [" ", ba, b].
  EXPECT_EQ(tok.encode("bab", false), (std::vector<int>{3, 8, 5}));
  EXPECT_EQ(tok.decode_token(1, 9), "ab");   // after BOS the dummy space goes
  EXPECT_EQ(tok.decode_token(4, 9), " ab");  // elsewhere it stays
  EXPECT_EQ(tok.decode({9, 9}), "ab ab");
}

TEST(Tokenizer, WithoutByteFallbackUnknownTextIsAnError) {
  const auto tok = toy();
  EXPECT_THROW(tok.encode("c", false), Error);
}

TEST(Tokenizer, ReaderRejectsTruncatedAndBadFiles) {
  INFERLAB_REQUIRE_FILE(tok512_path());
  const auto dir = std::filesystem::temp_directory_path() / "inferlab_test_tokenizer";
  std::filesystem::create_directories(dir);
  std::ifstream in(tok512_path(), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (std::size_t cut : {std::size_t{0}, std::size_t{3}, std::size_t{100}, bytes.size() - 1}) {
    const std::string path = (dir / ("cut" + std::to_string(cut) + ".bin")).string();
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(cut));
    try {
      load_llama2c_tokenizer(path, 512);
      ADD_FAILURE() << "no error for a file cut at " << cut;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(load_llama2c_tokenizer((dir / "missing.bin").string(), 512), Error);
  // Asking for more tokens than the file holds is a truncation too.
  EXPECT_THROW(load_llama2c_tokenizer(tok512_path(), 600), Error);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace inferlab
