// libFuzzer target: llama2.c files, the tokenizer.bin loader (scores, lengths, byte pieces) and
// the checkpoint loader (28-byte header, then fp32 tensors). Input: one byte choosing the file
// kind and the vocabulary size the tokenizer is asked for, then the file's bytes. A tokenizer
// that loads also encodes a short text and decodes its ids. Only inferlab::Error may leave.
#include <cstddef>
#include <cstdint>
#include <string>

#include "input_files.h"
#include "inferlab/formats/checkpoint.h"
#include "inferlab/error.h"
#include "inferlab/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace inferlab;
  if (size < 1) return 0;
  const std::string path = fuzz::write_input("llama2c.bin", fuzz::as_text(data + 1, size - 1));
  try {
    if (data[0] & 1) {
      read_model_config(path, ModelFormat::kLlama2c);
      load_model(path, ModelFormat::kLlama2c);
    } else {
      const int vocab = 1 + (data[0] >> 1);  // 1 .. 128
      const auto tok = load_llama2c_tokenizer(path, vocab);
      const std::vector<int> ids = tok->encode("Once upon a time \xe2\x80\x94 42", true);
      for (int id : ids)
        if (id < 0 || id >= tok->vocab_size()) __builtin_trap();
      tok->decode(ids);
    }
  } catch (const Error&) {
  }
  return 0;
}
