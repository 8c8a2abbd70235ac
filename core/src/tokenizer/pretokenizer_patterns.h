// The table of named pre-tokenizers (see pretokenizer_patterns.cpp).
#pragma once
#include <string>
#include <vector>

#include "inferlab/tokenizer/pretokenizer.h"

namespace inferlab {

struct PreTokenizerSpec {
  std::vector<std::string> names;     // the tokenizer.ggml.pre values that select it
  std::vector<std::string> patterns;  // applied in order, each isolating its matches
  bool ignore_merges;                 // a pre-token that is itself a token is kept whole (Llama 3)
};

const std::vector<PreTokenizerSpec>& pre_tokenizer_specs();
// The spec `name` selects, or null.
const PreTokenizerSpec* find_pre_tokenizer_spec(const std::string& name);

}  // namespace inferlab
