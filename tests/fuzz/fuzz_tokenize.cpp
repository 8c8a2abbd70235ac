// libFuzzer target: prompt tokenisation. Text is encoded (with and without BOS and special-token
// parsing) by real vocabularies and decoded again: the SentencePiece tokenizer of stories260K
// ($INFERLAB_DATA/models/stories260K/tok512.bin) and every vocabulary file named in
// INFERLAB_FUZZ_VOCABS (colon-separated GGUF vocabularies; scripts/fuzz.sh names llama.cpp's
// byte-level BPE and SentencePiece test vocabularies when they are fetched). Input: one byte of
// options (which tokenizer, add_bos, parse_special), then the text. Every id must lie in the
// vocabulary; the time limit catches super-linear encoding (issue 15: 16k characters took > 60 s).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "input_files.h"
#include "inferlab/formats/checkpoint.h"
#include "inferlab/experiment/experiment.h"
#include "inferlab/tokenizer/tokenizer.h"

namespace {

std::vector<std::unique_ptr<inferlab::Tokenizer>> load_tokenizers() {
  using namespace inferlab;
  fuzz::scratch_dir();  // quiets the logs
  std::vector<std::unique_ptr<Tokenizer>> out;
  out.push_back(load_llama2c_tokenizer(data_root() + "/models/stories260K/tok512.bin", 512));
  if (const char* vocabs = std::getenv("INFERLAB_FUZZ_VOCABS")) {
    std::stringstream list(vocabs);
    for (std::string path; std::getline(list, path, ':');)
      if (!path.empty()) out.push_back(load_model_tokenizer(path, ModelFormat::kGguf));
  }
  std::fprintf(stderr, "fuzz_tokenize: %zu tokenizer(s)\n", out.size());
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace inferlab;
  static const std::vector<std::unique_ptr<Tokenizer>> tokenizers = load_tokenizers();
  if (size < 1) return 0;
  const Tokenizer& tok = *tokenizers[data[0] % tokenizers.size()];
  const EncodeOptions options{(data[0] & 0x80) != 0, (data[0] & 0x40) != 0, (data[0] & 0x20) != 0};
  const std::vector<int> ids = tok.encode(fuzz::as_text(data + 1, size - 1), options);
  for (int id : ids)
    if (id < 0 || id >= tok.vocab_size()) __builtin_trap();
  tok.decode(ids);
  return 0;
}
