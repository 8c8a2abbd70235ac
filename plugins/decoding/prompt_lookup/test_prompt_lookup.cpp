#include <gtest/gtest.h>

#include <vector>

#include "inferlab/error.h"
#include "plugins/common/decoding/sampling.h"
#include "prompt_lookup.h"

namespace inferlab {
using namespace plugins;
namespace {

std::vector<int> propose(PromptLookupDecoder& dec, const std::vector<int>& tokens, int max_draft) {
  std::vector<int> drafts = {-1};  // propose must clear it
  dec.propose(tokens, max_draft, drafts);
  return drafts;
}

// Logits rows that peak at the given tokens: [targets.size(), vocab].
std::vector<float> peaked_rows(const std::vector<int>& targets, int vocab) {
  std::vector<float> logits(targets.size() * static_cast<std::size_t>(vocab));
  for (std::size_t r = 0; r < targets.size(); ++r)
    for (int v = 0; v < vocab; ++v)
      logits[r * vocab + v] = (v == targets[r]) ? 5.0f : 0.01f * static_cast<float>((v * 7 + r) % 5);
  return logits;
}

std::vector<int> accept(PromptLookupDecoder& dec, const std::vector<int>& drafts,
                        const std::vector<int>& targets, int vocab = 16) {
  std::vector<float> logits = peaked_rows(targets, vocab);
  Rng rng(1);
  std::vector<int> out;
  dec.accept({}, drafts, logits.data(), vocab, rng, out);
  return out;
}

TEST(PromptLookupDecoder, RejectsBadParams) {
  EXPECT_THROW(PromptLookupDecoder(0, 3, 1), Error);
  EXPECT_THROW(PromptLookupDecoder(4, 2, 3), Error);
  EXPECT_THROW(PromptLookupDecoder(4, 3, 0), Error);
  EXPECT_EQ(PromptLookupDecoder(5, 3, 1).max_draft_tokens(), 5);
}

TEST(PromptLookupDecoder, ProposesContinuationOfLongestMatch) {
  PromptLookupDecoder dec(4, 3, 1);
  // Suffix [7 8 9] occurred at the start, followed by 1 2 3 4 5.
  EXPECT_EQ(propose(dec, {7, 8, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 4), (std::vector<int>{1, 2, 3, 4}));
  // max_draft from the engine caps num_draft.
  EXPECT_EQ(propose(dec, {7, 8, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 2), (std::vector<int>{1, 2}));
}

TEST(PromptLookupDecoder, PrefersMostRecentOccurrence) {
  PromptLookupDecoder dec(3, 2, 1);
  // [4 5] occurs twice before the suffix; the later one is followed by 9 9.
  EXPECT_EQ(propose(dec, {4, 5, 1, 1, 4, 5, 9, 9, 0, 4, 5}, 3), (std::vector<int>{9, 9, 0}));
}

TEST(PromptLookupDecoder, FallsBackToShorterNgrams) {
  PromptLookupDecoder dec(4, 3, 1);
  // [2 3 6] and [3 6] never occurred before; [6] did, followed by 5.
  EXPECT_EQ(propose(dec, {1, 6, 5, 2, 3, 6}, 4), (std::vector<int>{5, 2, 3, 6}));
  PromptLookupDecoder strict(4, 3, 2);  // min_ngram 2: the unigram match is not allowed
  EXPECT_TRUE(propose(strict, {1, 6, 5, 2, 3, 6}, 4).empty());
}

TEST(PromptLookupDecoder, DraftsStopAtTheEndOfTheSequence) {
  PromptLookupDecoder dec(8, 1, 1);
  // Overlapping match: [3] at index 2 is followed by only the suffix itself.
  EXPECT_EQ(propose(dec, {1, 2, 3, 3}, 8), (std::vector<int>{3}));
}

TEST(PromptLookupDecoder, NoMatchNoDrafts) {
  PromptLookupDecoder dec(4, 3, 1);
  EXPECT_TRUE(propose(dec, {1, 2, 3, 4, 5}, 4).empty());
  EXPECT_TRUE(propose(dec, {9}, 4).empty());
  EXPECT_TRUE(propose(dec, {}, 4).empty());
}

TEST(PromptLookupDecoder, AcceptAllDraftsPlusBonus) {
  PromptLookupDecoder dec(3, 3, 1);
  EXPECT_EQ(accept(dec, {4, 5, 6}, {4, 5, 6, 11}), (std::vector<int>{4, 5, 6, 11}));
}

TEST(PromptLookupDecoder, FirstDraftRejectedGivesRowZeroArgmax) {
  PromptLookupDecoder dec(3, 3, 1);
  EXPECT_EQ(accept(dec, {4, 5, 6}, {9, 5, 6, 11}), (std::vector<int>{9}));
}

TEST(PromptLookupDecoder, PartialAcceptance) {
  PromptLookupDecoder dec(3, 3, 1);
  EXPECT_EQ(accept(dec, {4, 5, 6}, {4, 5, 2, 11}), (std::vector<int>{4, 5, 2}));
}

TEST(PromptLookupDecoder, NoDraftsIsGreedy) {
  PromptLookupDecoder dec(3, 3, 1);
  EXPECT_EQ(accept(dec, {}, {13}), (std::vector<int>{13}));
}

// A deterministic toy "model": the next token is a function of the last two, over a small
// vocabulary, so text falls into cycles and lookup drafts are often right, but not always
// (the same single token can be followed by different ones).
constexpr int kVocab = 13;
int toy_next(const std::vector<int>& t) {
  int a = t.size() >= 2 ? t[t.size() - 2] : 0, b = t.back();
  return (a * 5 + b * 3 + (a > b ? 1 : 0)) % kVocab;
}

std::vector<float> toy_logits(const std::vector<int>& t) {
  std::vector<float> row(kVocab);
  int next = toy_next(t);
  for (int v = 0; v < kVocab; ++v) row[v] = v == next ? 2.0f : -0.1f * static_cast<float>(v % 4);
  return row;
}

TEST(PromptLookupDecoder, OutputIdenticalToGreedy) {
  const std::vector<std::vector<int>> prompts = {
      {1, 2}, {3, 4, 5, 6, 3, 4}, {7, 7, 7}, {0, 12, 5, 9, 1, 0, 12}, {11, 2, 8}};
  const int n_out = 60;
  long long drafted = 0, accepted = 0, steps = 0;
  for (const auto& prompt : prompts) {
    std::vector<int> greedy = prompt;
    while (greedy.size() < prompt.size() + n_out) greedy.push_back(toy_next(greedy));

    PromptLookupDecoder dec(4, 3, 1);
    std::vector<int> seq = prompt, drafts, out;
    Rng rng(0);
    while (seq.size() < prompt.size() + n_out) {
      dec.propose(seq, dec.max_draft_tokens(), drafts);
      // Verification pass: row i scores the sequence extended by the first i drafts.
      std::vector<float> logits;
      std::vector<int> ctx = seq;
      for (std::size_t i = 0; i <= drafts.size(); ++i) {
        std::vector<float> row = toy_logits(ctx);
        logits.insert(logits.end(), row.begin(), row.end());
        if (i < drafts.size()) ctx.push_back(drafts[i]);
      }
      out.clear();
      dec.accept(seq, drafts, logits.data(), kVocab, rng, out);
      ASSERT_GE(out.size(), 1u);
      ASSERT_LE(out.size(), drafts.size() + 1);
      drafted += static_cast<long long>(drafts.size());
      accepted += static_cast<long long>(out.size()) - 1;
      ++steps;
      seq.insert(seq.end(), out.begin(), out.end());
    }
    seq.resize(prompt.size() + n_out);
    EXPECT_EQ(seq, greedy);
  }
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, drafted);  // not trivially always right
  EXPECT_LT(steps, static_cast<long long>(prompts.size()) * n_out);  // fewer steps than greedy
}

}  // namespace
}  // namespace inferlab
