// What the simulator charges a strategy (docs/simulation.md, "What a strategy costs"): a
// quantization's bytes and arithmetic per linear, an attention's memory traffic. A strategy that
// does not declare them cannot be simulated and is refused with the reason.
#include <map>
#include <tuple>

#include "inferlab/plugin/attention.h"
#include "inferlab/error.h"
#include "inferlab/plugin/quantization.h"
#include "inferlab/experiment/quantization_rules.h"
#include "inferlab/sim/sim.h"

namespace inferlab {

SimLinears sim_linears(Quantization& quant, const ModelConfig& model, double native_bytes) {
  SimLinears s;
  // Linears of one shape under one strategy and arithmetic store the same bytes: asked once
  // (a 7B model has 224 layer linears of 4 shapes).
  const auto* ruled = dynamic_cast<const RuledQuantization*>(&quant);
  std::map<std::tuple<const Quantization*, int, int, std::string>, double> asked;
  for (const LinearSlot& l : model_linears(model)) {
    Quantization& q = ruled ? ruled->strategy_for(l.name) : quant;
    const LinearArithmetic a = q.arithmetic(l.name, model);
    if (!a.declared)
      throw Error("the simulator cannot charge linear " + l.name +
                  ": its quantization strategy declares no arithmetic (Quantization::arithmetic; "
                  "docs/simulation.md); run it on cpu or cuda");
    const double params = static_cast<double>(l.out) * static_cast<double>(l.in);
    double bytes = params * native_bytes;
    if (!a.native) {
      const auto key = std::make_tuple(&q, l.out, l.in, l.layer < 0 ? l.name : std::string());
      auto it = asked.find(key);
      if (it == asked.end())
        it = asked.emplace(key, static_cast<double>(q.planned_bytes(l.name, l.out, l.in, model))).first;
      bytes = it->second;
    }
    const double int8 = a.int8_mma ? params : 0, dequant = a.native ? 0 : params * a.dequant_ops;
    if (l.name == "embedding") {
      s.embedding_bytes += bytes;
    } else if (l.layer < 0) {
      s.classifier_bytes += bytes;
      s.classifier_int8_params += int8;
      s.classifier_dequant_ops += dequant;
    } else {
      s.layer_bytes += bytes;
      s.layer_int8_params += int8;
      s.layer_dequant_ops += dequant;
    }
  }
  return s;
}

AttentionTraffic sim_attention_traffic(const Attention& attention, const ModelConfig& model, const std::string& name) {
  const AttentionTraffic t = attention.traffic(model.head_dim());
  if (!t.declared)
    throw Error("the simulator cannot charge attention '" + name +
                "': it declares no memory traffic (Attention::traffic; docs/simulation.md); run it on cpu or cuda");
  return t;
}

}  // namespace inferlab
