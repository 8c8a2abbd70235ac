// libFuzzer target: a GGUF file through load_model (header, metadata, tensor infos, every
// tensor's dequantisation, the config checks and the embedded vocabulary: SentencePiece or
// byte-level BPE with its merges and pre-tokenizer) and read_model_config. A vocabulary that
// loads also encodes a short text. Only inferlab::Error may leave.
#include <cstddef>
#include <cstdint>
#include <string>

#include "input_files.h"
#include "inferlab/formats/checkpoint.h"
#include "inferlab/error.h"
#include "inferlab/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace inferlab;
  const std::string path = fuzz::write_input("model.gguf", fuzz::as_text(data, size));
  try {
    read_model_config(path, ModelFormat::kGguf);
  } catch (const Error&) {
  }
  try {
    const auto tok = load_model_tokenizer(path, ModelFormat::kGguf);
    for (int id : tok->encode("Hello world <s> 123 \xc3\xa9!", true))
      if (id < 0 || id >= tok->vocab_size()) __builtin_trap();
  } catch (const Error&) {
  }
  try {
    load_model(path, ModelFormat::kGguf);
  } catch (const Error&) {
  }
  return 0;
}
