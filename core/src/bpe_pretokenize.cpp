// The GPT-2 pre-tokenizer, written by hand over UTF-8 code points:
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// Unicode letter/number classes are approximated by code point ranges that cover the scripts
// real text uses; combining marks and symbols (emoji) fall in the "other" class, as in Unicode.
#include <algorithm>
#include <cstdint>

#include "inferlab/bpe_tokenizer.h"

namespace inferlab {

namespace {

struct Range {
  char32_t lo, hi;
};

// \p{N}: decimal digits, letter-like numbers, other numbers.
constexpr Range kNumbers[] = {
    {0x30, 0x39},       {0xB2, 0xB3},       {0xB9, 0xB9},       {0xBC, 0xBE},
    {0x660, 0x669},     {0x6F0, 0x6F9},     {0x7C0, 0x7C9},     {0x966, 0x96F},
    {0x9E6, 0x9EF},     {0x9F4, 0x9F9},     {0xA66, 0xA6F},     {0xAE6, 0xAEF},
    {0xB66, 0xB6F},     {0xB72, 0xB77},     {0xBE6, 0xBF2},     {0xC66, 0xC6F},
    {0xCE6, 0xCEF},     {0xD66, 0xD78},     {0xDE6, 0xDEF},     {0xE50, 0xE59},
    {0xED0, 0xED9},     {0xF20, 0xF33},     {0x1040, 0x1049},   {0x1090, 0x1099},
    {0x1369, 0x137C},   {0x16EE, 0x16F0},   {0x17E0, 0x17E9},   {0x1810, 0x1819},
    {0x1946, 0x194F},   {0x2070, 0x2070},   {0x2074, 0x2079},   {0x2080, 0x2089},
    {0x2150, 0x2182},   {0x2185, 0x2189},   {0x2460, 0x249B},   {0x24EA, 0x24FF},
    {0x2776, 0x2793},   {0x2CFD, 0x2CFD},   {0x3007, 0x3007},   {0x3021, 0x3029},
    {0x3038, 0x303A},   {0x3192, 0x3195},   {0x3220, 0x3229},   {0x3248, 0x324F},
    {0x3251, 0x325F},   {0x3280, 0x3289},   {0x32B1, 0x32BF},   {0xA620, 0xA629},
    {0xA6E6, 0xA6EF},   {0xA830, 0xA835},   {0xFF10, 0xFF19},   {0x1D7CE, 0x1D7FF},
    {0x1F100, 0x1F10C},
};

// \p{L}, approximately: whole blocks of letters with the punctuation inside them cut out.
constexpr Range kLetters[] = {
    {0x41, 0x5A},       {0x61, 0x7A},       {0xAA, 0xAA},       {0xB5, 0xB5},
    {0xBA, 0xBA},       {0xC0, 0xD6},       {0xD8, 0xF6},       {0xF8, 0x2C1},
    {0x2C6, 0x2D1},     {0x2E0, 0x2E4},     {0x2EC, 0x2EC},     {0x2EE, 0x2EE},
    {0x370, 0x374},     {0x376, 0x377},     {0x37A, 0x37D},     {0x37F, 0x37F},
    {0x386, 0x386},     {0x388, 0x38A},     {0x38C, 0x38C},     {0x38E, 0x3A1},
    {0x3A3, 0x3F5},     {0x3F7, 0x481},     {0x48A, 0x52F},     {0x531, 0x556},
    {0x560, 0x588},     {0x5D0, 0x5EA},     {0x5EF, 0x5F2},     {0x620, 0x64A},
    {0x66E, 0x66F},     {0x671, 0x6D3},     {0x6D5, 0x6D5},     {0x6E5, 0x6E6},
    {0x6EE, 0x6EF},     {0x6FA, 0x6FC},     {0x6FF, 0x6FF},     {0x710, 0x72F},
    {0x780, 0x7A5},     {0x904, 0x939},     {0x93D, 0x93D},     {0x950, 0x950},
    {0x958, 0x961},     {0x971, 0x980},     {0x985, 0x9B9},     {0xA05, 0xA39},
    {0xA85, 0xAB9},     {0xB05, 0xB39},     {0xB85, 0xBB9},     {0xC05, 0xC39},
    {0xC85, 0xCB9},     {0xD05, 0xD3A},     {0xD85, 0xDC6},     {0xE01, 0xE30},
    {0xE32, 0xE33},     {0xE40, 0xE46},     {0xE81, 0xEB0},     {0xEB2, 0xEB3},
    {0xF00, 0xF00},     {0xF40, 0xF6C},     {0x1000, 0x102A},   {0x10A0, 0x10FF},
    {0x1100, 0x1248},   {0x1250, 0x135A},   {0x13A0, 0x13FD},   {0x1401, 0x166C},
    {0x166F, 0x167F},   {0x1681, 0x169A},   {0x16A0, 0x16EA},   {0x1780, 0x17B3},
    {0x1820, 0x1878},   {0x1D00, 0x1DBF},   {0x1E00, 0x1FBC},   {0x1FC2, 0x1FCC},
    {0x1FD0, 0x1FDB},   {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FFC},   {0x2071, 0x2071},
    {0x207F, 0x207F},   {0x2090, 0x209C},   {0x2102, 0x2102},   {0x2107, 0x2107},
    {0x210A, 0x2113},   {0x2115, 0x2115},   {0x2119, 0x211D},   {0x2124, 0x2124},
    {0x2126, 0x2126},   {0x2128, 0x2128},   {0x212A, 0x212D},   {0x212F, 0x2139},
    {0x2C00, 0x2CE4},   {0x2D00, 0x2D25},   {0x2D30, 0x2D67},   {0x3005, 0x3006},
    {0x3031, 0x3035},   {0x303B, 0x303C},   {0x3041, 0x3096},   {0x309D, 0x309F},
    {0x30A1, 0x30FA},   {0x30FC, 0x30FF},   {0x3105, 0x312F},   {0x3131, 0x318E},
    {0x31A0, 0x31BF},   {0x31F0, 0x31FF},   {0x3400, 0x4DBF},   {0x4E00, 0x9FFF},
    {0xA000, 0xA48C},   {0xA4D0, 0xA4FD},   {0xA500, 0xA60C},   {0xA610, 0xA61F},
    {0xA62A, 0xA62B},   {0xA640, 0xA66E},   {0xA680, 0xA69D},   {0xA6A0, 0xA6E5},
    {0xA717, 0xA71F},   {0xA722, 0xA788},   {0xA78B, 0xA7FF},   {0xAC00, 0xD7A3},
    {0xF900, 0xFAFF},   {0xFB00, 0xFB06},   {0xFB13, 0xFB17},   {0xFB1D, 0xFB28},
    {0xFB2A, 0xFBB1},   {0xFBD3, 0xFD3D},   {0xFD50, 0xFDC7},   {0xFDF0, 0xFDFB},
    {0xFE70, 0xFEFC},   {0xFF21, 0xFF3A},   {0xFF41, 0xFF5A},   {0xFF66, 0xFFDC},
    {0x10000, 0x100FA}, {0x10300, 0x1034A}, {0x10400, 0x1049D}, {0x1D400, 0x1D7CB},
    {0x20000, 0x2FA1F}, {0x30000, 0x3134A},
};

bool in_ranges(char32_t c, const Range* begin, const Range* end) {
  const Range* it = std::upper_bound(begin, end, c, [](char32_t v, const Range& r) { return v < r.lo; });
  return it != begin && c <= (it - 1)->hi;
}

enum class Cls { kLetter, kNumber, kSpace, kOther };

Cls classify(char32_t c) {
  if (c < 0x80) {
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return Cls::kLetter;
    if (c >= '0' && c <= '9') return Cls::kNumber;
    if (c == ' ' || (c >= 0x09 && c <= 0x0D)) return Cls::kSpace;
    return Cls::kOther;
  }
  if (c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
      c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000)
    return Cls::kSpace;
  if (in_ranges(c, std::begin(kNumbers), std::end(kNumbers))) return Cls::kNumber;
  if (in_ranges(c, std::begin(kLetters), std::end(kLetters))) return Cls::kLetter;
  return Cls::kOther;
}

// One code point of s at byte i: its length in bytes (1 for an invalid byte) and class.
struct Cp {
  std::size_t len;
  Cls cls;
};

Cp decode_at(std::string_view s, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return {1, classify(b0)};
  std::size_t len = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : b0 >= 0xC0 ? 2 : 0;
  if (len == 0 || b0 > 0xF4 || i + len > s.size()) return {1, Cls::kOther};
  char32_t c = b0 & (0x7F >> len);
  for (std::size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return {1, Cls::kOther};
    c = (c << 6) | (b & 0x3F);
  }
  return {len, classify(c)};
}

// The GPT-2 pattern over one segment (the segment's end counts as the text's end).
void split_gpt2(std::string_view s, std::vector<std::string_view>& out) {
  std::size_t i = 0;
  const std::size_t n = s.size();
  auto run_end = [&](std::size_t j, Cls cls) {  // end of the run of `cls` starting at j
    while (j < n) {
      const Cp cp = decode_at(s, j);
      if (cp.cls != cls) break;
      j += cp.len;
    }
    return j;
  };
  while (i < n) {
    // Contractions: 's 't 're 've 'm 'll 'd (case-sensitive, as in GPT-2).
    if (s[i] == '\'' && i + 1 < n) {
      const char a = s[i + 1];
      const char b = i + 2 < n ? s[i + 2] : '\0';
      std::size_t len = 0;
      if (a == 's' || a == 't' || a == 'm' || a == 'd') len = 2;
      else if ((a == 'r' || a == 'v') && b == 'e') len = 3;
      else if (a == 'l' && b == 'l') len = 3;
      if (len > 0) {
        out.push_back(s.substr(i, len));
        i += len;
        continue;
      }
    }
    const Cp cp = decode_at(s, i);
    std::size_t start = i, j = i;
    Cls cls = cp.cls;
    if (s[i] == ' ' && i + 1 < n) {  // " ?" prefix for letters, numbers, other
      const Cp next = decode_at(s, i + 1);
      if (next.cls != Cls::kSpace) {
        cls = next.cls;
        j = i + 1;
      }
    }
    if (cls != Cls::kSpace) {
      const std::size_t e = run_end(j, cls);
      out.push_back(s.substr(start, e - start));
      i = e;
      continue;
    }
    // Whitespace: \s+(?!\S) leaves the last space for a following word; \s+ otherwise.
    const std::size_t e = run_end(i, Cls::kSpace);
    if (e < n) {
      std::size_t last = i;  // start of the run's last code point
      for (std::size_t k = i; k < e; k += decode_at(s, k).len) last = k;
      if (last > i) {
        out.push_back(s.substr(i, last - i));
        i = last;
        continue;
      }
    }
    out.push_back(s.substr(i, e - i));
    i = e;
  }
}

}  // namespace

std::vector<std::string_view> ByteLevelBpeTokenizer::pre_tokenize(std::string_view text,
                                                                  bool split_digits) {
  std::vector<std::string_view> out;
  if (!split_digits) {
    split_gpt2(text, out);
    return out;
  }
  // Every \p{N} code point is its own pre-token; the runs between go through the pattern.
  std::size_t seg = 0, i = 0;
  while (i < text.size()) {
    const Cp cp = decode_at(text, i);
    if (cp.cls == Cls::kNumber) {
      if (i > seg) split_gpt2(text.substr(seg, i - seg), out);
      out.push_back(text.substr(i, cp.len));
      seg = i + cp.len;
    }
    i += cp.len;
  }
  if (seg < text.size()) split_gpt2(text.substr(seg), out);
  return out;
}

}  // namespace inferlab
