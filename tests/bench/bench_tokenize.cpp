// Tokenisation time against text length: 1k..64k characters of English prose, C++ code and CJK
// text, through SmolLM2's byte-level BPE (smollm pre-tokenizer), Llama 3's (llama-bpe) and
// Llama 2's SentencePiece vocabulary. Linear-time merging shows as a flat chars_per_s counter.
//   ./inferlab_bench --benchmark_filter=tokenize
// Needs models/SmolLM2-135M-Instruct.Q4_1.gguf (scripts/fetch_smollm2.sh) and, for the llama
// vocabularies, scripts/fetch_vocab_tests.sh; a missing file skips its benchmarks.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "inferlab/formats/formats.h"
#include "inferlab/tokenizer/tokenizer.h"

namespace {

namespace fs = std::filesystem;
using inferlab::Tokenizer;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void append_utf8(std::string& s, char32_t c) {
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
}

// The first `chars` code points of `source` repeated.
std::string take_chars(const std::string& source, std::size_t chars) {
  std::string out;
  std::size_t n = 0;
  for (std::size_t i = 0; n < chars; i = (i + 1) % source.size()) {
    if ((static_cast<unsigned char>(source[i]) & 0xC0) != 0x80) {
      if (n == chars) break;
      ++n;
    }
    out += source[i];
  }
  while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80 && n > chars) out.pop_back();
  return out;
}

std::string text(const std::string& kind, std::size_t chars) {
  const fs::path src = INFERLAB_BENCH_SOURCE_DIR;
  if (kind == "english") return take_chars(slurp(src / "experiments/data/eval.txt"), chars);
  if (kind == "code") return take_chars(slurp(src / "core/src/tokenizer/bpe_tokenizer.cpp") + slurp(src / "core/src/tokenizer/tokenizer.cpp"), chars);
  // CJK: han, kana and CJK punctuation from a fixed LCG, so every run sees the same text.
  std::string s;
  std::uint32_t x = 12345;
  for (std::size_t i = 0; i < chars; ++i) {
    x = x * 1664525u + 1013904223u;
    const std::uint32_t r = x >> 8;
    const char32_t c = r % 10 == 0 ? 0x3002 : r % 10 == 1 ? 0xFF0C : r % 10 < 4 ? 0x3041 + r % 86 : 0x4E00 + r % 20000;
    append_utf8(s, c);
  }
  return s;
}

fs::path vocab_dir() {
  const char* home = std::getenv("HOME");
  return fs::path(home ? home : ".") / ".cache/inferlab/llama-cpp-python-0.3.16/vendor/llama.cpp/models";
}

const Tokenizer* tokenizer(const std::string& which) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto it = cache.find(which);
  if (it != cache.end()) return it->second.get();
  const char* models = std::getenv("INFERLAB_MODELS");
  const fs::path path = which == "smollm2"
                            ? fs::path(models ? models : INFERLAB_BENCH_SOURCE_DIR "/models") / "SmolLM2-135M-Instruct.Q4_1.gguf"
                            : vocab_dir() / ("ggml-vocab-" + which + ".gguf");
  std::unique_ptr<Tokenizer> t;
  if (fs::exists(path)) t = inferlab::load_gguf_tokenizer(inferlab::GgufFile::open(path.string()));
  return (cache[which] = std::move(t)).get();
}

void BM_tokenize(benchmark::State& state, const std::string& which, const std::string& kind) {
  const Tokenizer* tok = tokenizer(which);
  if (!tok) {
    state.SkipWithError("vocabulary missing (scripts/fetch_smollm2.sh, scripts/fetch_vocab_tests.sh)");
    return;
  }
  const std::string s = text(kind, static_cast<std::size_t>(state.range(0)));
  benchmark::DoNotOptimize(tok->encode(s, false));  // warm-up
  std::size_t tokens = 0;
  for (auto _ : state) {
    auto ids = tok->encode(s, false);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.counters["tokens"] = static_cast<double>(tokens);
  state.counters["chars_per_s"] =
      benchmark::Counter(static_cast<double>(state.range(0)), benchmark::Counter::kIsIterationInvariantRate);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(s.size()));
}

void sizes(benchmark::internal::Benchmark* b) {
  b->RangeMultiplier(4)->Range(1 << 10, 1 << 16)->Unit(benchmark::kMillisecond);
}

BENCHMARK_CAPTURE(BM_tokenize, smollm2_english, "smollm2", "english")->Apply(sizes);
BENCHMARK_CAPTURE(BM_tokenize, smollm2_code, "smollm2", "code")->Apply(sizes);
BENCHMARK_CAPTURE(BM_tokenize, smollm2_cjk, "smollm2", "cjk")->Apply(sizes);
BENCHMARK_CAPTURE(BM_tokenize, llama3_english, "llama-bpe", "english")->Apply(sizes);
BENCHMARK_CAPTURE(BM_tokenize, llama3_code, "llama-bpe", "code")->Apply(sizes);
BENCHMARK_CAPTURE(BM_tokenize, llama3_cjk, "llama-bpe", "cjk")->Apply(sizes);
BENCHMARK_CAPTURE(BM_tokenize, llama_spm_english, "llama-spm", "english")->Apply(sizes);
BENCHMARK_CAPTURE(BM_tokenize, llama_spm_code, "llama-spm", "code")->Apply(sizes);
BENCHMARK_CAPTURE(BM_tokenize, llama_spm_cjk, "llama-spm", "cjk")->Apply(sizes);

}  // namespace
