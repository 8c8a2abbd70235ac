// GGUF bad files: wrong magic or version, unsupported tensor types, shapes disagreeing with the
// config, data past the end, truncation at every header offset, and random mutations: each must
// be an inferlab::Error naming the file, never a crash or another exception.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>

#include <gtest/gtest.h>

#include "format_writers.h"
#include "inferlab/tokenizer/bpe_tokenizer.h"
#include "inferlab/formats/checkpoint.h"
#include "inferlab/error.h"
#include "inferlab/formats/formats.h"
#include "inferlab/support/log.h"
#include "gguf_fixtures.h"

namespace inferlab {
namespace {

using testing::error_of;
using testing::GgufBuilder;
using testing::QuietLogs;
using testing::TempDir;
using testing::TinyGguf;
using testing::tiny_llama_gguf;

TEST(Gguf, RejectsBadMagicVersionAndTypes) {
  TempDir dir("gguf_bad");
  const std::string path = dir.file("bad.gguf");
  std::string bytes = tiny_llama_gguf().bytes;

  std::string magic = bytes;
  magic[0] = 'X';
  testing::write_file(path, magic);
  EXPECT_NE(error_of([&] { load_gguf(path); }).find(path + ": not a GGUF file (bad magic)"), std::string::npos);

  for (std::uint32_t v : {1u, 4u}) {
    std::string ver = bytes;
    std::memcpy(ver.data() + 4, &v, 4);
    testing::write_file(path, ver);
    EXPECT_NE(error_of([&] { load_gguf(path); }).find("unsupported GGUF version " + std::to_string(v)),
              std::string::npos);
  }

  // An IQ2_XXS matrix (66 bytes per 256): named in the error, both when loading and when reading it.
  GgufBuilder g;
  g.string("general.architecture", "llama");
  g.tensor_raw_type("token_embd.weight", {256, 4}, 16, std::string(4 * 66, '\0'));
  testing::write_file(path, g.build());
  const GgufFile f = GgufFile::open(path);
  EXPECT_NE(error_of([&] { f.read_f32(f.tensors()[0]); }).find("unsupported type IQ2_XXS"), std::string::npos);
  GgufBuilder m;
  m.string("general.architecture", "mamba");
  testing::write_file(path, m.build());
  EXPECT_NE(error_of([&] { load_gguf(path); }).find("architecture 'mamba' is not supported"), std::string::npos);
  EXPECT_NE(error_of([&] { load_gguf(dir.file("absent.gguf")); }).find("absent.gguf: cannot open"),
            std::string::npos);
}

TEST(Gguf, RejectsUnsupportedTensorTypeInModel) {
  // Rewrite the type id of blk.0.attn_q.weight (Q4_0 = 2) to Q8_1 (9, an activation type) in place.
  TinyGguf t = tiny_llama_gguf();
  const std::string name = "blk.0.attn_q.weight";
  const std::size_t at = t.bytes.find(name);
  ASSERT_NE(at, std::string::npos);
  const std::size_t type_at = at + name.size() + 4 + 2 * 8;  // n_dims, two dims
  ASSERT_EQ(t.bytes[type_at], 2);
  t.bytes[type_at] = 9;
  TempDir dir("gguf_type");
  testing::write_file(dir.file("t.gguf"), t.bytes);
  const std::string err = error_of([&] { load_gguf(dir.file("t.gguf")); });
  EXPECT_NE(err.find("t.gguf"), std::string::npos) << err;
  EXPECT_NE(err.find("'blk.0.attn_q.weight' has unsupported type Q8_1"), std::string::npos) << err;
}

TEST(Gguf, RejectsShapeDisagreeingWithConfig) {
  TinyGguf t = tiny_llama_gguf();
  // Claim a feed-forward width of 96: ffn_gate [32, 64] no longer fits.
  const std::string key = "llama.feed_forward_length";
  const std::size_t at = t.bytes.find(key);
  ASSERT_NE(at, std::string::npos);
  const std::uint32_t wide = 96;
  std::memcpy(t.bytes.data() + at + key.size() + 4, &wide, 4);
  TempDir dir("gguf_shape");
  testing::write_file(dir.file("s.gguf"), t.bytes);
  const std::string err = error_of([&] { load_gguf(dir.file("s.gguf")); });
  EXPECT_NE(err.find("s.gguf: tensor 'blk.0.ffn_gate.weight' has shape [32, 64], the config needs [32, 96]"),
            std::string::npos)
      << err;
}

TEST(Gguf, RejectsTensorDataPastEndOfFile) {
  const TinyGguf t = tiny_llama_gguf();
  TempDir dir("gguf_eof");
  testing::write_file(dir.file("e.gguf"), t.bytes.substr(0, t.bytes.size() - 1));
  const std::string err = error_of([&] { GgufFile::open(dir.file("e.gguf")); });
  EXPECT_NE(err.find("'output_norm.weight': data"), std::string::npos) << err;
  EXPECT_NE(err.find("runs past the end of the file"), std::string::npos) << err;
}

TEST(Gguf, TruncationAtEveryOffsetIsAnError) {
  QuietLogs quiet;
  const TinyGguf t = tiny_llama_gguf();
  TempDir dir("gguf_trunc");
  const std::string path = dir.file("cut.gguf");
  ASSERT_GT(t.bytes.size(), 10000u);  // header, metadata, tokenizer and every tensor type
  for (std::size_t n = 0; n < t.bytes.size(); ++n) {
    testing::write_file(path, t.bytes.substr(0, n));
    const std::string err = error_of([&] { load_gguf(path); });
    ASSERT_EQ(err.rfind(path + ": ", 0), 0u) << "cut at " << n << ": '" << err << "'";
  }
}

// Random mutations of a valid file must load or throw Error: never crash, never another exception.
TEST(Gguf, RandomMutationsLoadOrThrowError) {
  QuietLogs quiet;
  const TinyGguf t = tiny_llama_gguf();
  const std::size_t header = GgufBuilder().build().size() + 2048;  // bias mutations to the header
  TempDir dir("gguf_fuzz");
  const std::string path = dir.file("fuzz.gguf");
  std::mt19937_64 rng(20240601);
  int loaded = 0, rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string b = t.bytes;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const std::size_t span = rng() % 4 == 0 ? b.size() : std::min(header, b.size());
      const std::size_t at = rng() % span;
      switch (rng() % 5) {
        case 0: b[at] = static_cast<char>(rng()); break;                      // random byte
        case 1: b[at] = static_cast<char>(b[at] ^ (1 << (rng() % 8))); break;  // bit flip
        case 2: b[at] = static_cast<char>(0xFF); break;                       // huge counts
        case 3: b.resize(at); break;                                          // truncate
        case 4: b.insert(at, 1 + rng() % 8, static_cast<char>(rng())); break;  // insert
      }
      if (b.empty()) break;
    }
    testing::write_file(path, b);
    try {
      load_gguf(path);
      ++loaded;
    } catch (const Error& e) {
      ++rejected;
      ASSERT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
    } catch (const std::exception& e) {
      FAIL() << "iteration " << iter << ": non-Error exception " << e.what();
    }
  }
  EXPECT_GT(rejected, 1000);
  EXPECT_GT(loaded, 0);  // mutations of tensor data still load
}
}  // namespace
}  // namespace inferlab
