// The pre-tokenizer patterns by `tokenizer.ggml.pre` name: the regex sequences llama.cpp's
// llama-vocab.cpp uses for each pre-tokenizer type (public data; the GPT-2 pattern without its
// final `|\s+` is equivalent, since an unmatched gap is kept as its own piece).
#include "tokenizer/pretokenizer_patterns.h"

namespace inferlab {

const char* const kGpt2Pattern = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re";

namespace {

#define INFERLAB_GPT2 R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re"
#define INFERLAB_CONTRACTIONS_CI R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]))re"

const std::vector<PreTokenizerSpec>& build_specs() {
  static const std::vector<PreTokenizerSpec> specs = {
      {{"default"},
       {R"re([\p{P}\$\+<=>\^~\|]+)re", INFERLAB_GPT2, R"re(\p{N}+)re", R"re([0-9][0-9][0-9])re"},
       false},
      {{"gpt-2", "gpt2", "phi-2", "mpt", "olmo", "jais", "trillion", "exaone4", "jina-es", "jina-de",
        "jina-v1-en", "jina-v2-es", "jina-v2-de", "jina-v2-code", "roberta-bpe", "gigachat", "a.x-4.0",
        "mellum"},
       {INFERLAB_GPT2},
       false},
      {{"llama-bpe", "llama3", "llama-v3", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "dbrx",
        "smaug-bpe"},
       {INFERLAB_CONTRACTIONS_CI
        R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
       true},
      {{"glm4", "chatglm-bpe"},
       {INFERLAB_CONTRACTIONS_CI
        R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
       false},
      {{"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez", "hunyuan"},
       {INFERLAB_CONTRACTIONS_CI
        R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
       false},
      {{"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"},
       {R"re(\p{N})re", INFERLAB_GPT2},
       false},
      {{"deepseek-llm"},
       {R"re([\r\n])re",
        R"re(\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+)re",
        R"re(\s?[!-/:-~！-／：-～‘-‟　-。]+)re", R"re(\s+$)re", R"re([一-龥ࠀ-一가-퟿]+)re", R"re(\p{N}+)re"},
       false},
      {{"deepseek-coder"},
       {R"re([\r\n])re", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re", R"re([一-龥ࠀ-一가-퟿]+)re", R"re(\p{N})re"},
       false},
      {{"deepseek-v3", "hunyuan-dense"},
       {R"re(\p{N}{1,3})re", R"re([一-龥぀-ゟ゠-ヿ]+)re",
        R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
       false},
      {{"falcon"}, {R"re([\p{P}\$\+<=>\^~\|`]+)re", INFERLAB_GPT2, R"re([0-9][0-9][0-9])re"}, false},
      {{"poro-chat", "bloom", "gpt3-finnish"}, {R"re( ?[^(\s|.,!?…。，、।۔،)]+)re"}, false},
      {{"viking"}, {R"re( ?[^(\s|.,!?…。，、।۔،)]+)re", R"re(\p{N})re"}, false},
      {{"tekken"},
       {R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
       true},
      {{"gpt-4o", "llama4"},
       {R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
       false},
      {{"bailingmoe"},
       {R"re('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)re"},
       false},
      {{"seed-coder"},
       {INFERLAB_CONTRACTIONS_CI
        R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)re"},
       false},
  };
  return specs;
}

#undef INFERLAB_GPT2
#undef INFERLAB_CONTRACTIONS_CI

}  // namespace

const std::vector<PreTokenizerSpec>& pre_tokenizer_specs() { return build_specs(); }

const PreTokenizerSpec* find_pre_tokenizer_spec(const std::string& name) {
  for (const PreTokenizerSpec& s : pre_tokenizer_specs())
    for (const std::string& n : s.names)
      if (n == name) return &s;
  return nullptr;
}

}  // namespace inferlab
