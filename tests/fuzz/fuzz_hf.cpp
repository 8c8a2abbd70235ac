// libFuzzer target: a Hugging Face snapshot folder (config.json, model.safetensors and
// tokenizer.json, the byte-level BPE vocabulary loader) through read_model_config, load_model
// and load_hf_tokenizer. Input: the three files' bytes separated by the marker kSplit (a part
// that is absent leaves its file out). Only inferlab::Error may leave.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "input_files.h"
#include "inferlab/formats/checkpoint.h"
#include "inferlab/error.h"
#include "inferlab/formats/formats.h"
#include "inferlab/tokenizer/tokenizer.h"

namespace {
constexpr std::string_view kSplit = "#@#FILE#@#";
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace inferlab;
  namespace fs = std::filesystem;
  static const std::string dir = [] {
    const std::string d = fuzz::scratch_dir() + "/hf";
    fs::create_directories(d);
    return d;
  }();
  const char* const names[] = {"config.json", "model.safetensors", "tokenizer.json"};
  std::string_view in = fuzz::as_text(data, size);
  for (const char* name : names) {
    std::error_code ec;
    fs::remove(dir + "/" + name, ec);
    if (in.data() == nullptr) continue;
    const std::size_t cut = in.find(kSplit);
    fuzz::write_input(std::string("hf/") + name, in.substr(0, cut));
    in = cut == std::string_view::npos ? std::string_view() : in.substr(cut + kSplit.size());
  }
  try {
    read_model_config(dir, ModelFormat::kHuggingFace);
  } catch (const Error&) {
  }
  try {
    const auto tok = load_hf_tokenizer(dir + "/tokenizer.json");
    for (int id : tok->encode("Hello world <|endoftext|> 123 \xc3\xa9!", true))
      if (id < 0 || id >= tok->vocab_size()) __builtin_trap();
  } catch (const Error&) {
  }
  try {
    load_model(dir, ModelFormat::kHuggingFace);
  } catch (const Error&) {
  }
  return 0;
}
