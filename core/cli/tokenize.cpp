// inferlab tokenize: a text's token ids and pieces under a model's tokenizer, as llama.cpp's
// llama-tokenize prints them. Reads only the tokenizer (no tensor data), so vocabulary-only
// GGUF files work too.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <boost/program_options.hpp>

#include "commands.h"
#include "inferlab/formats/checkpoint.h"
#include "inferlab/error.h"
#include "inferlab/experiment/input_checks.h"
#include "inferlab/support/log.h"

namespace po = boost::program_options;

namespace inferlab::cli {

namespace {

// A piece's bytes, quoted: printable ASCII and valid UTF-8 as they are, the rest escaped.
std::string quoted(const std::string& bytes) {
  std::string out = "'";
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    char buf[8];
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c == '\\' || c == '\'') out += std::string("\\") + static_cast<char>(c);
    else if (c >= 0x20 && c < 0x7F) out += static_cast<char>(c);
    else if (c >= 0xC2 && c <= 0xF4) {
      const std::size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
      bool ok = i + len <= bytes.size();
      for (std::size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(bytes[i + k]) & 0xC0) == 0x80;
      if (ok) {
        out.append(bytes, i, len);
        i += len - 1;
      } else {
        std::snprintf(buf, sizeof(buf), "\\x%02X", c);
        out += buf;
      }
    } else {
      std::snprintf(buf, sizeof(buf), "\\x%02X", c);
      out += buf;
    }
  }
  return out + "'";
}

// Prints text's tokens (ids only, pieces only, or both with the count); with check, decodes
// them and returns whether the text came back.
bool print_tokens(const Tokenizer& tok, const std::string& text, const EncodeOptions& eo, bool ids_only,
                  bool pieces_only, bool check) {
  const std::vector<int> ids = tok.encode(text, eo);
  if (ids_only) {
    for (std::size_t i = 0; i < ids.size(); ++i) std::cout << (i ? " " : "") << ids[i];
    std::cout << "\n";
  } else {
    int prev = tok.bos_id();
    for (int id : ids) {
      const std::string piece = quoted(tok.decode_token(prev, id));
      if (pieces_only) std::cout << piece << "\n";
      else std::cout << id << " -> " << piece << "\n";
      prev = id;
    }
  }
  if (!ids_only && !pieces_only) std::cout << "tokens: " << ids.size() << "\n";
  else log::info("tokens: " + std::to_string(ids.size()));
  if (!check) return true;
  std::vector<int> body = ids;  // BOS/EOS the encoder added are not the text's
  if (eo.add_bos && !body.empty() && body.front() == tok.bos_id()) body.erase(body.begin());
  if (eo.add_eos && !body.empty() && body.back() == tok.eos_id()) body.pop_back();
  const std::string back = tok.decode(body);
  if (back != text) {
    std::size_t at = 0;
    while (at < back.size() && at < text.size() && back[at] == text[at]) ++at;
    std::cerr << "tokenize: round trip differs at byte " << at << " (text " << text.size() << " bytes, decoded "
              << back.size() << ")\n";
    return false;
  }
  std::cerr << "tokenize: round trip ok (" << text.size() << " bytes)\n";
  return true;
}

}  // namespace

int cmd_tokenize(const std::vector<std::string>& args) {
  po::options_description o("tokenize options");
  o.add_options()("model", po::value<std::string>()->required(),
                  "checkpoint or vocabulary: .gguf, a Hugging Face folder, or llama2.c .bin")(
      "tokenizer", po::value<std::string>()->default_value(""), "tokenizer file replacing the model's")(
      "format", po::value<std::string>()->default_value("auto"), "auto, llama2c, gguf or hf")(
      "prompt", po::value<std::string>(), "text to tokenise")(
      "file", po::value<std::vector<std::string>>()->composing(),
      "file whose bytes to tokenise (repeatable: each file is tokenised on its own, in order)")(
      "ids", "print only the ids, space-separated on one line")("pieces", "print only the pieces, one per line")(
      "no-bos", "no BOS, whatever the model file says")(
      "no-parse-special", "control tokens written in the text are plain text (as llama.cpp's tests)")(
      "check", "decode the ids and require the text back (exit 1 otherwise)")(
      "pre-fallback", po::value<std::string>()->default_value(""),
      "pre-tokenizer to use, with a warning, when the file names one inferlab does not know");
  po::variables_map vm;
  if (!parse_options(args,
                     "usage: inferlab tokenize --model M (--prompt TEXT | --file F...) [--ids | --pieces] [--no-bos] "
                     "[--no-parse-special] [--check]",
                     o, nullptr, vm))
    return 0;
  if (vm.count("prompt") == vm.count("file")) throw Error("tokenize: give exactly one of --prompt TEXT or --file F");
  if (vm.count("ids") && vm.count("pieces")) throw Error("tokenize: --ids and --pieces exclude each other");
  std::vector<std::string> texts;
  if (vm.count("prompt")) {
    texts.push_back(vm["prompt"].as<std::string>());
  } else {
    for (const std::string& path : vm["file"].as<std::vector<std::string>>()) {
      texts.push_back(read_text_file(path, "--file"));
    }
  }
  const std::string model = vm["model"].as<std::string>();
  auto tok = load_model_tokenizer(model, parse_model_format(vm["format"].as<std::string>()), vm["tokenizer"].as<std::string>(),
                                  vm["pre-fallback"].as<std::string>());
  EncodeOptions eo;
  eo.add_bos = vm.count("no-bos") ? false : tok->conventions().add_bos;
  eo.add_eos = tok->conventions().add_eos;
  eo.parse_special = vm.count("no-parse-special") == 0;
  int status = 0;
  for (const std::string& text : texts)
    if (!print_tokens(*tok, text, eo, vm.count("ids") > 0, vm.count("pieces") > 0, vm.count("check") > 0)) status = 1;
  return status;
}

}  // namespace inferlab::cli
