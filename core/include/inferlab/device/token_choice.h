// A token choice that a device can make from one row of logits alone, so that a step downloads
// one token id per sequence instead of a [vocab] row of floats. A Decoder describes its choice
// (Decoder::device_choice), a ComputeDevice runs it (ComputeDevice::choose_tokens), the engine
// decides per step which path runs (docs/architecture.md, "Token choice on the device").
#pragma once

namespace inferlab {

struct TokenChoice {
  enum class Kind {
    kNone,    // the choice needs more than one row's argmax or tempered draw: host logits
    kArgmax,  // the largest logit, the lowest index on ties, a NaN never winning (NaN at 0: 0)
    kSample,  // a draw from softmax(logits / temperature) by one uniform from the sequence's Rng
              // (the chunked draw of kernels/ref/token_choice.h, no top-k / top-p)
  };
  Kind kind = Kind::kNone;
  double temperature = 0;  // kSample: > 0
  bool operator==(const TokenChoice&) const = default;
};

// "none", "argmax", "sample".
const char* token_choice_name(TokenChoice::Kind kind);

}  // namespace inferlab
