// The loader's dequantisation of llama.cpp-made GGUFs (tests/data/gguf, see its README) equals,
// bit for bit, the reference values the gguf Python package's dequantisers give for the same
// tensors (Q4_K, Q5_K, Q6_K, Q8_0, Q4_0, Q4_1 as the files hold them); and the loader keeps each
// block-quantized linear's raw blocks and every linear's type for quantization/gguf.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "inferlab/formats/checkpoint.h"
#include "inferlab/error.h"
#include "inferlab/formats/formats.h"
#include "test_support.h"

namespace inferlab {
namespace {

std::string fixture(const std::string& name) { return testing::source_dir() + "/tests/data/gguf/" + name; }

// Checks every reference run of `reference` (lines "tensor type offset count" then count hex
// float bits) against GgufFile::read_f32; returns the types checked.
std::set<std::string> check_reference(const std::string& gguf, const std::string& reference) {
  const GgufFile f = GgufFile::open(gguf);
  std::ifstream in(reference);
  EXPECT_TRUE(in.good()) << reference;
  std::set<std::string> types;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream head(line);
    std::string name, type;
    std::size_t offset = 0, count = 0;
    head >> name >> type >> offset >> count;
    std::string values;
    std::getline(in, values);
    const GgufTensorInfo* t = f.find_tensor(name);
    if (t == nullptr) {
      ADD_FAILURE() << "no tensor " << name;
      continue;
    }
    EXPECT_EQ(ggml_type_name(t->type), type) << name;
    const std::vector<float> got = f.read_f32(*t);
    std::istringstream vals(values);
    for (std::size_t i = 0; i < count; ++i) {
      std::uint32_t bits = 0;
      vals >> std::hex >> bits;
      std::uint32_t have = 0;
      std::memcpy(&have, &got.at(offset + i), 4);
      if (have != bits) {
        ADD_FAILURE() << name << " (" << type << ") element " << offset + i << ": bits " << std::hex << have
                      << ", reference " << bits;
        break;
      }
    }
    types.insert(type);
  }
  return types;
}

TEST(GgufKQuants, DequantizationEqualsTheReferenceBitForBit) {
  const std::string q4k = fixture("kq256-Q4_K.gguf"), q5k = fixture("kq256-Q5_K.gguf");
  INFERLAB_REQUIRE_FILE(q4k);
  std::set<std::string> types = check_reference(q4k, fixture("kq256-Q4_K.reference.txt"));
  for (const auto& t : check_reference(q5k, fixture("kq256-Q5_K.reference.txt"))) types.insert(t);
  for (const char* want : {"Q4_K", "Q5_K", "Q6_K"}) EXPECT_TRUE(types.count(want)) << want << " was not checked";
}

TEST(GgufKQuants, LegacyBlockTypesEqualTheReferenceBitForBit) {
  for (const char* type : {"Q8_0", "Q4_0", "Q4_1"}) {
    const std::string path = fixture(std::string("stories260K-") + type + ".gguf");
    INFERLAB_REQUIRE_FILE(path);
    const auto types = check_reference(path, fixture(std::string("stories260K-") + type + ".reference.txt"));
    EXPECT_TRUE(types.count(type)) << type << " was not checked";
  }
}

TEST(GgufKQuants, LoaderKeepsRawBlocksOfQuantizedLinearsAndEveryLinearsType) {
  const std::string path = fixture("kq256-Q4_K.gguf");
  INFERLAB_REQUIRE_FILE(path);
  const LoadedModel m = load_model(path);
  const GgufFile f = GgufFile::open(path);
  const ModelConfig header = read_gguf_config(path);
  EXPECT_EQ(m.weights.config.source_linear_types, header.source_linear_types);
  // 7 per layer, 1 layer, the classifier, and (untied: a separate output.weight) the embedding table
  ASSERT_FALSE(header.tied_classifier);
  ASSERT_EQ(header.source_linear_types.size(), 9u);
  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(header.source_linear_types.at("embedding"), embd->type);
  const GgufTensorInfo* down = f.find_tensor("blk.0.ffn_down.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(header.source_linear_types.at("layers.0.w2"), down->type);
  for (const auto& [name, type] : header.source_linear_types) {
    const SourceBlocks* blocks = m.weights.source_blocks(name);
    if (!ggml_type_is_quantized(static_cast<GgmlType>(type))) {
      EXPECT_EQ(blocks, nullptr) << name;
      continue;
    }
    ASSERT_NE(blocks, nullptr) << name;
    EXPECT_EQ(blocks->ggml_type, type);
  }
  // The blocks are the file's bytes: ffn_down's equal a direct read.
  ASSERT_NE(m.weights.source_blocks("layers.0.w2"), nullptr);
  EXPECT_EQ(m.weights.source_blocks("layers.0.w2")->bytes, f.read_bytes(*down));
  if (ggml_type_is_quantized(static_cast<GgmlType>(embd->type))) {
    ASSERT_NE(m.weights.source_blocks("embedding"), nullptr);
    EXPECT_EQ(m.weights.source_blocks("embedding")->bytes, f.read_bytes(*embd));
  }
}

// A block-quantized matrix is held only as its blocks: its fp32 field stays empty, matrix()
// dequantises it exactly as the file's reader does, and materialize() fills the field with the
// same values. Without the lazy loader every field would hold values already.
TEST(GgufKQuants, QuantizedMatricesAreHeldOnlyAsBlocksAndDequantisedOnDemand) {
  const std::string path = fixture("kq256-Q4_K.gguf");
  INFERLAB_REQUIRE_FILE(path);
  const LoadedModel m = load_model(path);
  const GgufFile f = GgufFile::open(path);
  const GgufTensorInfo* down = f.find_tensor("blk.0.ffn_down.weight");
  ASSERT_NE(down, nullptr);
  ASSERT_TRUE(ggml_type_is_quantized(static_cast<GgmlType>(down->type)));
  EXPECT_TRUE(m.weights.has_lazy_matrices());
  EXPECT_TRUE(m.weights.layers[0].w2.empty());
  EXPECT_EQ(m.weights.matrix("layers.0.w2"), f.read_f32(*down));
  ModelWeights dense = m.weights;
  dense.materialize();
  EXPECT_FALSE(dense.has_lazy_matrices());
  EXPECT_EQ(dense.layers[0].w2, f.read_f32(*down));
  EXPECT_NO_THROW(dense.validate());
}

// Erasing a layer (layer skipping's "removed" model, a draft's truncation) keeps every matrix
// with its own blocks: the blocks travel with their layer, not with a name.
TEST(GgufKQuants, ErasingALayerKeepsEachMatrixWithItsBlocks) {
  const std::string path = fixture("stories260K-Q4_0.gguf");
  INFERLAB_REQUIRE_FILE(path);
  const LoadedModel m = load_model(path);
  ASSERT_GE(m.weights.layers.size(), 2u);
  ASSERT_NE(m.weights.source_blocks("layers.1.wq"), nullptr);
  ModelWeights cut = m.weights;
  cut.layers.erase(cut.layers.begin());
  cut.config.n_layers -= 1;
  EXPECT_NO_THROW(cut.validate());
  ASSERT_NE(cut.source_blocks("layers.0.wq"), nullptr);
  EXPECT_EQ(cut.source_blocks("layers.0.wq")->bytes, m.weights.source_blocks("layers.1.wq")->bytes);
  EXPECT_EQ(cut.matrix("layers.0.wq"), m.weights.matrix("layers.1.wq"));
  EXPECT_THROW((void)cut.matrix("layers." + std::to_string(cut.layers.size()) + ".wq"), Error);
}

TEST(GgufKQuants, NonGgufModelsHaveNoSourceTypes) {
  const std::string bin = testing::data_path("models/stories260K/stories260K.bin");
  INFERLAB_REQUIRE_FILE(bin);
  const LoadedModel m = load_model(bin);
  EXPECT_TRUE(m.weights.config.source_linear_types.empty());
  EXPECT_FALSE(m.weights.has_lazy_matrices());
  EXPECT_EQ(m.weights.source_blocks("layers.0.wq"), nullptr);
  EXPECT_EQ(m.weights.source_blocks("classifier"), nullptr);
}

}  // namespace
}  // namespace inferlab
