// llama.cpp's tokenizer test vectors (models/ggml-vocab-*.gguf with .inp/.out, fetched from the
// llama-cpp-python sdist by scripts/fetch_vocab_tests.sh; skipped with a message when absent):
// every case of every vocabulary whose tokenizer model inferlab supports (llama, gpt2) must
// give llama.cpp's ids exactly, as test-tokenizer-0 encodes them (no BOS/EOS, control tokens
// not parsed). Prints each vocabulary's pass count.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "inferlab/formats/formats.h"
#include "inferlab/tokenizer/tokenizer.h"
#include "test_support.h"

namespace inferlab {
namespace {

namespace fs = std::filesystem;

using testing::slurp;

// $INFERLAB_VOCAB_DIR, else where fetch_vocab_tests.sh unpacks ($INFERLAB_CACHE or ~/.cache/inferlab).
fs::path vocab_dir() {
  if (const char* env = std::getenv("INFERLAB_VOCAB_DIR")) return env;
  const char* cache = std::getenv("INFERLAB_CACHE");
  const char* home = std::getenv("HOME");
  const fs::path root = cache ? fs::path(cache) : fs::path(home ? home : ".") / ".cache" / "inferlab";
  return root / "llama-cpp-python-0.3.16" / "vendor" / "llama.cpp" / "models";
}


struct Case {
  std::string text;
  std::vector<int> ids;
};

// .inp: cases separated by "\n__ggml_vocab_test__\n" (the file ends with one); .out: one line of
// space-separated ids per case.
std::vector<Case> read_cases(const fs::path& inp, const fs::path& out) {
  const std::string raw = slurp(inp);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (std::size_t pos = 0; pos < raw.size();) {
    const std::size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      texts.push_back(raw.substr(pos));
      break;
    }
    texts.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::vector<Case> cases;
  std::istringstream lines(slurp(out));
  std::string line;
  for (const std::string& t : texts) {
    if (!std::getline(lines, line)) break;
    Case c{t, {}};
    std::istringstream ids(line);
    for (int id; ids >> id;) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  EXPECT_EQ(cases.size(), texts.size()) << out << ": fewer lines than " << inp << " has cases";
  return cases;
}

TEST(VocabVectors, EveryCaseOfEverySupportedVocabularyMatchesLlamaCpp) {
  const fs::path dir = vocab_dir();
  if (!fs::is_directory(dir))
    GTEST_SKIP() << "llama.cpp vocabulary test files missing at " << dir
                 << " (run scripts/fetch_vocab_tests.sh; it needs PyPI once)";
  int vocabularies = 0;
  std::vector<std::string> report;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const fs::path gguf = entry.path();
    if (gguf.extension() != ".gguf" || !fs::exists(gguf.string() + ".inp")) continue;
    const GgufFile f = GgufFile::open(gguf.string());
    const GgufValue* model = f.find("tokenizer.ggml.model");
    const std::string kind = model ? model->as_string("tokenizer.ggml.model") : "";
    if (kind != "llama" && kind != "gpt2") {
      report.push_back(gguf.filename().string() + ": tokenizer model '" + kind + "' not supported, not run");
      continue;
    }
    const auto tok = load_gguf_tokenizer(f);
    ASSERT_NE(tok, nullptr) << gguf;
    const auto cases = read_cases(gguf.string() + ".inp", gguf.string() + ".out");
    int passed = 0;
    for (const Case& c : cases) {
      const std::vector<int> ids = tok->encode(c.text, EncodeOptions{false, false, false});
      if (ids == c.ids) ++passed;
      EXPECT_EQ(ids, c.ids) << gguf.filename().string() << ": '" << c.text << "'";
    }
    ++vocabularies;
    report.push_back(gguf.filename().string() + " (" + kind + "): " + std::to_string(passed) + "/" +
                     std::to_string(cases.size()) + " cases identical");
  }
  std::sort(report.begin(), report.end());
  for (const std::string& r : report) std::printf("  %s\n", r.c_str());
  EXPECT_GE(vocabularies, 12) << "expected the 12 llama/gpt2 vocabularies of llama.cpp's models/";
}

}  // namespace
}  // namespace inferlab
