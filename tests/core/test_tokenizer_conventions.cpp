// A model file's tokenisation conventions (GGUF add_bos_token / add_eos_token /
// add_space_prefix, llama.cpp's defaults per tokenizer model), the pre-tokenizer chosen by
// tokenizer.ggml.pre (unknown names are an error listing the known ones), vocabulary-only
// files through load_model_tokenizer, and the [model] add_bos experiment key.
#include <filesystem>
#include <fstream>
#include <optional>

#include <gtest/gtest.h>

#include "format_writers.h"
#include "inferlab/formats/checkpoint.h"
#include "inferlab/error.h"
#include "inferlab/experiment/experiment.h"
#include "inferlab/formats/formats.h"
#include "test_support.h"

namespace inferlab {
namespace {

namespace fs = std::filesystem;

struct Flags {
  std::optional<bool> bos, eos, space_prefix;
};

// A vocabulary-only GGUF: `kind` "gpt2" (a..z, "Ġ", "ab", <s>, </s>) or "llama" (pieces with
// scores), with the given pre-tokenizer name and flags.
std::string vocab_gguf(const std::string& name, const std::string& kind, const std::string& pre, Flags flags) {
  testing::GgufBuilder g;
  std::vector<std::string> tokens;
  std::vector<std::int32_t> types;
  if (kind == "gpt2") {
    for (char ch = 'a'; ch <= 'z'; ++ch) tokens.emplace_back(1, ch);
    for (const char* s : {"\xc4\xa0", "ab", "<s>", "</s>", "0", "1", "2", "3", "33", "333"}) tokens.emplace_back(s);
    types.assign(tokens.size(), 1);
    types[28] = types[29] = 3;
    g.strings("tokenizer.ggml.merges", {"a b", "3 3", "33 3"});
    g.u32("tokenizer.ggml.bos_token_id", 28);
    g.u32("tokenizer.ggml.eos_token_id", 29);
    if (!pre.empty()) g.string("tokenizer.ggml.pre", pre);
  } else {
    tokens = {"<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "b", "\xe2\x96\x81" "a", "ab"};
    std::vector<float> scores = {0, 0, 0, -1, -2, -3, -0.5f, -0.75f};
    types = {2, 3, 3, 1, 1, 1, 1, 1};
    g.floats("tokenizer.ggml.scores", scores);
    g.u32("tokenizer.ggml.bos_token_id", 1);
    g.u32("tokenizer.ggml.eos_token_id", 2);
  }
  g.string("tokenizer.ggml.model", kind);
  g.strings("tokenizer.ggml.tokens", tokens);
  g.ints("tokenizer.ggml.token_type", types);
  if (flags.bos) g.boolean("tokenizer.ggml.add_bos_token", *flags.bos);
  if (flags.eos) g.boolean("tokenizer.ggml.add_eos_token", *flags.eos);
  if (flags.space_prefix) g.boolean("tokenizer.ggml.add_space_prefix", *flags.space_prefix);
  const fs::path dir = fs::temp_directory_path() / "inferlab_tokenizer_conventions";
  fs::create_directories(dir);
  const std::string path = (dir / name).string();
  testing::write_file(path, g.build());
  return path;
}

TEST(TokenizerConventions, BpeDefaultsToNoBosAndHonoursTheFileFlags) {
  auto plain = load_model_tokenizer(vocab_gguf("bpe.gguf", "gpt2", "gpt-2", {}));
  EXPECT_FALSE(plain->conventions().add_bos);  // llama.cpp's default for a BPE vocabulary
  EXPECT_EQ(plain->encode_document("ab"), (std::vector<int>{27}));
  EXPECT_EQ(plain->encode_document("ab", true), (std::vector<int>{28, 27}));  // an explicit override

  auto both = load_model_tokenizer(vocab_gguf("bpe_bos_eos.gguf", "gpt2", "gpt-2", {true, true, {}}));
  EXPECT_TRUE(both->conventions().add_bos);
  EXPECT_TRUE(both->conventions().add_eos);
  EXPECT_EQ(both->encode_document("ab"), (std::vector<int>{28, 27, 29}));
  EXPECT_EQ(both->encode_document("ab", false), (std::vector<int>{27, 29}));  // --no-bos keeps EOS
}

TEST(TokenizerConventions, SentencePieceDefaultsToBosAndTheDummyPrefix) {
  auto spm = load_model_tokenizer(vocab_gguf("spm.gguf", "llama", "", {}));
  EXPECT_TRUE(spm->conventions().add_bos);
  EXPECT_TRUE(spm->conventions().add_space_prefix);
  EXPECT_EQ(spm->encode_document("ab"), (std::vector<int>{1, 6, 5}));  // <s> "▁a" "b"
  EXPECT_EQ(spm->decode(spm->encode_document("ab")), "ab");

  // A control token written in the text is its id (when parsing specials), and the raw text
  // after it gets the dummy prefix again, as in llama.cpp.
  EXPECT_EQ(spm->encode("a<s>b", EncodeOptions{false, false, true}), (std::vector<int>{6, 1, 3, 5}));

  auto bare = load_model_tokenizer(vocab_gguf("spm_bare.gguf", "llama", "", {false, {}, false}));
  EXPECT_FALSE(bare->conventions().add_bos);
  EXPECT_EQ(bare->encode_document("ab"), (std::vector<int>{7}));  // no dummy prefix: "ab"
  EXPECT_EQ(bare->decode({7}), "ab");
}

TEST(TokenizerConventions, PreTokenizerComesFromTheFile) {
  // llama-bpe cuts digit runs in threes ("333" is a token, kept whole); gpt-2 keeps the run
  // whole, where "3 3" merges pairwise first and no merge joins "33 33".
  auto llama3 = load_model_tokenizer(vocab_gguf("llama3.gguf", "gpt2", "llama-bpe", {}));
  auto gpt2 = load_model_tokenizer(vocab_gguf("gpt2.gguf", "gpt2", "gpt-2", {}));
  EXPECT_EQ(llama3->encode("333333", false), (std::vector<int>{35, 35}));
  EXPECT_EQ(gpt2->encode("333333", false), (std::vector<int>{34, 34, 34}));
  EXPECT_EQ(llama3->encode("3333", false), (std::vector<int>{35, 33}));
  EXPECT_EQ(gpt2->encode("3333", false), (std::vector<int>{34, 34}));
  auto smollm = load_model_tokenizer(vocab_gguf("smollm.gguf", "gpt2", "smollm", {}));
  EXPECT_EQ(smollm->encode("333", false), (std::vector<int>{33, 33, 33}));  // digits one by one

  const std::string bad = vocab_gguf("unknown_pre.gguf", "gpt2", "no-such-pre", {});
  try {
    load_model_tokenizer(bad);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("unknown pre-tokenizer 'no-such-pre'"), std::string::npos) << what;
    EXPECT_NE(what.find("llama-bpe"), std::string::npos) << what;
    EXPECT_NE(what.find(bad), std::string::npos) << what;
  }
  // A fallback asked for is used (with a warning), and must itself be known.
  EXPECT_EQ(load_model_tokenizer(bad, ModelFormat::kAuto, "", "smollm")->encode("333", false), (std::vector<int>{33, 33, 33}));
  EXPECT_THROW(load_model_tokenizer(bad, ModelFormat::kAuto, "", "also-unknown"), Error);
}

TEST(TokenizerConventions, ExperimentKeyOverridesBos) {
  const fs::path dir = fs::temp_directory_path() / "inferlab_tokenizer_conventions";
  fs::create_directories(dir);
  std::ofstream(dir / "text.txt") << "some text\n";
  // add_bos decides how [quality]'s text is tokenized: without [quality] it does nothing and is refused.
  const std::string quality = "[quality]\ntext = \"" + (dir / "text.txt").string() + "\"\n";
  const std::string base = quality + "[experiment]\nname = \"t\"\n[model]\npreset = \"stories260k\"\n";
  std::ofstream(dir / "noquality.toml") << "[model]\npreset = \"stories260k\"\nadd_bos = false\n";
  EXPECT_THROW(load_experiment((dir / "noquality.toml").string(), {}), Error);
  std::ofstream(dir / "bos.toml") << base << "add_bos = false\n";
  EXPECT_EQ(load_experiment((dir / "bos.toml").string(), {}).model.add_bos, std::optional<bool>(false));
  std::ofstream(dir / "nobos.toml") << base;
  EXPECT_FALSE(load_experiment((dir / "nobos.toml").string(), {}).model.add_bos.has_value());
  EXPECT_EQ(load_experiment((dir / "nobos.toml").string(), {"model.add_bos=true"}).model.add_bos, std::optional<bool>(true));
  std::ofstream(dir / "badbos.toml") << base << "add_bos = 1\n";
  EXPECT_THROW(load_experiment((dir / "badbos.toml").string(), {}), Error);
}

}  // namespace
}  // namespace inferlab
