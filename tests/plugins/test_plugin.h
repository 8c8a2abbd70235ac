// What the deliberately broken or odd test plugins of this folder share: their descriptor's
// common fields, an attention that computes nothing, and a greedy decoder with a hook before
// each token (where a plugin fails, crashes or waits).
#pragma once
#include <memory>
#include <span>
#include <vector>

#include "inferlab/plugin/plugin.h"
#include "plugins/common/decoding/sampling.h"

namespace inferlab::test_plugins {

// A descriptor of `kind` named `name`, version 0.0.1; the plugin adds its factory and params.
inline PluginDescriptor descriptor(PluginKind kind, const char* name, const char* summary) {
  PluginDescriptor d;
  d.kind = kind;
  d.name = name;
  d.version = "0.0.1";
  d.summary = summary;
  return d;
}

// Writes nothing: for plugins tested only by how the registry or the planner treats them.
class NoAttention final : public Attention {
 public:
  void forward(const AttentionBatch&, const KvLayerView&, const float*, float*, Device&) override {}
};

// Greedy decoding that calls before_token() first, each time it picks a token.
class HookedGreedyDecoder : public Decoder {
 public:
  void accept(std::span<const int>, std::span<const int>, const float* logits, int vocab, Rng&,
              std::vector<int>& out) override {
    before_token();
    out.push_back(argmax(logits, vocab));
  }

 protected:
  virtual void before_token() = 0;
};

}  // namespace inferlab::test_plugins
