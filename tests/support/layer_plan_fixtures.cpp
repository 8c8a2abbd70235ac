#include "layer_plan_fixtures.h"

#include <gtest/gtest.h>

#include <cmath>

#include "attention_fixtures.h"
#include "inferlab/plugin/layer_plan.h"
#include "inferlab/model/model.h"
#include "inferlab/plugin/registry.h"
#include "model_fixtures.h"
#include "plugins/common/scheduling/continuous_scheduler.h"
#include "test_support.h"

namespace inferlab::testing {

std::vector<Request> story_requests(const Tokenizer& tok, int max_output) {
  std::vector<Request> reqs;
  const char* prompts[] = {"Once upon a time", "The cat sat on the", "Lily and Tom went to the park and"};
  for (int i = 0; i < 3; ++i) {
    Request r;
    r.id = i;
    r.prompt = tok.encode(prompts[i], true);
    r.max_output = max_output;
    reqs.push_back(std::move(r));
  }
  return reqs;
}

DecoderRun run_decoder_plugin(const ModelWeights& w, const std::vector<Request>& reqs, const std::string& decoder,
                              const std::map<std::string, ParamValue>& params) {
  CpuDevice device(2);
  FloatQuantization quant;
  RefAttention attention;
  Model model(w, quant, device);
  ContinuousScheduler sched(64, 8, true);
  Registry reg({plugin_dir()});
  auto dec = reg.create_decoder(decoder, reg.resolve(PluginKind::kDecoding, decoder, params, "t"), device, &w, &attention);
  EngineOptions eo;
  eo.kv.block_size = 8;
  DecoderRun run;
  run.result = Engine(model, attention, sched, *dec, eo).run(reqs);
  if (LayerPlan* plan = dec->layer_plan()) add_layer_plan_metrics(*plan, w.config.n_layers, run.plan_metrics);
  return run;
}

double metric_value(const MetricRow& row, const std::string& name) {
  for (const auto& [k, v] : row)
    if (k == name) return v;
  ADD_FAILURE() << "no metric " << name;
  return std::nan("");
}

}  // namespace inferlab::testing
