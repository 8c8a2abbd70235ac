// How a rotary embedding pairs the values of a head: the one piece of model shape the kernels
// need (kernels/*/ops.h), in the base library so they need not include the model's config.
#pragma once

namespace inferlab {

enum class RopeStyle {
  kInterleaved,  // rotate pairs (2i, 2i+1): llama2.c and GGUF "llama"
  kHalf,         // rotate (i, i + head_dim/2): Hugging Face / NeoX layout
};

}  // namespace inferlab
