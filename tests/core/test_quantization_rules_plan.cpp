// Per-layer quantization rules in an experiment file: parsed and planned against the model
// (first/last layers, what a variant inherits), the model they build and its weight bytes
// against the memory estimate, the manifest and config.toml, and every refusal at its line.
#include <functional>

#include <gtest/gtest.h>

#include "format_writers.h"
#include "inferlab/error.h"
#include "inferlab/experiment/experiment.h"
#include "inferlab/experiment/experiment_toml.h"
#include "inferlab/results/manifest.h"
#include "inferlab/model/model.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/run/runner.h"
#include "inferlab/sim/sim_cost_model.h"
#include "inferlab/experiment/quantization_rules.h"
#include "test_support.h"

namespace inferlab {
namespace {

#define EXPECT_HAS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << "in: " << (text)

const std::string kHead = "[model]\npreset = \"stories260k\"\n[baseline]\n";  // the stack's line is 4

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

Plan plan_of(const std::string& path, const Registry& reg) {
  const ExperimentSpec spec = load_experiment(path, {});
  return plan_experiment(spec, reg, experiment_model_config(spec.model));
}

std::vector<std::string> layer_names(int l) {
  std::vector<std::string> out;
  for (const char* w : {"wq", "wk", "wv", "wo", "w1", "w2", "w3"}) out.push_back("layers." + std::to_string(l) + "." + w);
  return out;
}

TEST(QuantizationRulesPlan, FirstAndLastLayersBuildTheModelTheEstimateAndManifestDescribe) {
  testing::TempDir dir("quant_rules_plan");
  const std::string path = dir.file("exp.toml");
  testing::write_file(path, kHead + R"(quantization = { name = "int4", group_size = 32, rules = [
  { layers = "first:1", method = "none" },
  { layers = "last:1", method = { name = "int8" } },
  { match = "*.w2", layers = [1, 2], method = { name = "int4", group_size = 16 } } ] }
[[variant]]
name = "same-plugin"
quantization = { group_size = 64 }
[[variant]]
name = "other-plugin"
quantization = "int8"
)");
  Registry reg({testing::plugin_dir()});
  const Plan plan = plan_of(path, reg);
  const ResolvedVariant& b = plan.variants[0];
  ASSERT_EQ(b.rule_assignment.by_rule.size(), 3u);
  EXPECT_EQ(b.rule_assignment.by_rule[0], layer_names(0));
  EXPECT_EQ(b.rule_assignment.by_rule[1], layer_names(4));
  EXPECT_EQ(b.rule_assignment.by_rule[2], (std::vector<std::string>{"layers.1.w2", "layers.2.w2"}));
  EXPECT_EQ(b.rule_assignment.unruled, 36 - 16);
  EXPECT_EQ(b.rule_params[2].get_int("group_size"), 16);
  EXPECT_EQ(b.stack.quantization_rules[0].where, path + ":5:3");
  // A table of parameters for the same plugin keeps the rules; another plugin drops them.
  EXPECT_EQ(plan.variants[1].stack.quantization_rules.size(), 3u);
  EXPECT_TRUE(plan.variants[2].stack.quantization_rules.empty());

  // The model the cell builds, and the estimate made before it (the largest variant's model).
  CpuDevice device(1);
  const ModelWeights weights = random_weights(experiment_model_config(plan.spec.model), 3);
  auto model_bytes = [&](const ResolvedVariant& v) {
    auto quant = make_variant_quantization(reg, v, device);
    return Model(weights, *quant, device).weight_bytes();
  };
  const std::uint64_t mixed = model_bytes(b), all_int4 = model_bytes(plan.variants[1]);
  const std::uint64_t none = Model(weights, *reg.create_quantization("none", {}, device), device).weight_bytes();
  EXPECT_GT(mixed, all_int4);  // layers 0 and 4 wider than int4 g64
  EXPECT_LT(mixed, none);
  Plan only_mixed = plan;
  only_mixed.variants.resize(1);
  EXPECT_EQ(estimate_run_memory(only_mixed, reg, weights.config).variant_weights, mixed);

  const std::string manifest = manifest_json(plan, reg, weights.config, 1, 1, nullptr);
  EXPECT_HAS(manifest, "\"quantization_rules\": {\"method\": \"int4\", \"linears_per_method\": {\"int4\": 22, "
                       "\"int8\": 7, \"none\": 7}");
  EXPECT_HAS(manifest, "{\"match\": \"*.w2\", \"layers\": [1, 2], \"method\": \"int4\"");
  EXPECT_HAS(manifest, "\"linears\": [\"layers.1.w2\", \"layers.2.w2\"]");

  // config.toml reloads to the same rules, each method's parameters resolved.
  const std::string again = dir.file("resolved.toml");
  testing::write_file(again, resolved_config_toml(plan));
  const Plan replan = plan_of(again, reg);
  const auto& rules = replan.variants[0].stack.quantization_rules;
  ASSERT_EQ(rules.size(), 3u);
  EXPECT_EQ(rules[0].layers.toml(), "\"first:1\"");
  EXPECT_EQ(rules[1].method, "int8");
  EXPECT_EQ(rules[2].match, "*.w2");
  EXPECT_EQ(rules[2].layers.toml(), "[1, 2]");
  EXPECT_EQ(replan.variants[0].rule_params[2].values(), b.rule_params[2].values());
  EXPECT_EQ(replan.variants[0].rule_assignment.by_rule, b.rule_assignment.by_rule);
  EXPECT_EQ(replan.variants[1].stack.quantization_rules.size(), 3u);
  EXPECT_TRUE(replan.variants[2].stack.quantization_rules.empty());
}

struct BadRule {
  const char* name;
  std::string toml;  // after kHead
  std::vector<std::string> expect;
};

TEST(QuantizationRulesPlan, BadRulesAreRefusedAtTheirLine) {
  const std::string q = "quantization = { name = \"int4\", group_size = 32, rules = [";
  const std::vector<BadRule> cases = {
      {"pattern matching nothing", q + "{ match = \"*.wz\", method = \"none\" }] }\n",
       {"exp.toml:4:", "rule 1: selects no linear of the model", "layers.0.wq .. layers.4."}},
      {"the embedding", q + "{ match = \"token_embedding\", method = \"none\" }] }\n",
       {"exp.toml:4:", "selects no linear", "token embedding is a gather"}},
      {"unknown method", q + "{ match = \"*.wq\", method = \"int3\" }] }\n",
       {"exp.toml:4:", "rule 1", "unknown quantization plugin 'int3'"}},
      {"bad method parameter", q + "{ match = \"*.wq\", method = { name = \"int4\", group_sise = 8 } }] }\n",
       {"exp.toml:4:", "group_sise"}},
      {"first:N beyond the model", q + "{ layers = \"first:9\", method = \"none\" }] }\n",
       {"exp.toml:4:", "more layers than the model's 5"}},
      {"layer index beyond the model", q + "{ layers = [2, 7], method = \"none\" }] }\n",
       {"exp.toml:4:", "selects layer 7, but the model has 5 layers"}},
      {"shadowed rule", q + "{ match = \"layers.0.*\", method = \"none\" }, { match = \"*.wq\", layers = [0], method = \"int8\" }] }\n",
       {"exp.toml:4:", "rule 2: every linear it selects is taken by an earlier rule"}},
      {"group wider than the rows", q + "{ match = \"*.w1\", method = { name = \"int4\", group_size = 128 } }] }\n",
       {"exp.toml:4:", "group_size = 128 is wider than the rows of layers.0.w1 (64 input channels)"}},
      {"variant's group wider than the rows", "quantization = { name = \"int4\", group_size = 128 }\n",
       {"exp.toml:4:", "quantization 'int4': group_size = 128 is wider than the rows of layers.0.wq"}},
      {"calibrated method without [calibration]", q + "{ layers = \"last:1\", method = \"gptq\" }] }\n",
       {"exp.toml:4:", "quantization 'gptq' calibrates", "[calibration]"}},
      {"simulated run", q + "{ layers = \"last:1\", method = \"none\" }] }\n[device]\nkind = \"sim\"\n",
       {"exp.toml:4:", "simulated run"}},
  };
  Registry reg({testing::plugin_dir()});
  testing::TempDir dir("quant_rules_bad");
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.file("exp.toml");
    testing::write_file(path, kHead + c.toml);
    const std::string err = error_of([&] { plan_of(path, reg); });
    for (const auto& part : c.expect) EXPECT_HAS(err, part);
  }
  const std::vector<BadRule> parse_cases = {
      {"last:0", q + "{ layers = \"last:0\", method = \"none\" }] }\n", {"exp.toml:4:", "allowed: an index"}},
      {"selector text", q + "{ layers = \"middle\", method = \"none\" }] }\n", {"exp.toml:4:", "\"first:N\""}},
      {"negative index", q + "{ layers = [-1], method = \"none\" }] }\n", {"exp.toml:4:", "out of range"}},
      {"no method", q + "{ match = \"*.wq\" }] }\n", {"exp.toml:4:", "needs 'method'"}},
      {"no selection", q + "{ method = \"none\" }] }\n", {"exp.toml:4:", "has neither"}},
      {"bits instead of a method", q + "{ match = \"*.w2\", bits = 8 }] }\n",
       {"exp.toml:4:", "unknown key 'bits' in a quantization rule; allowed: match, layers, method"}},
      {"rules not an array", "quantization = { name = \"int4\", rules = \"x\" }\n",
       {"exp.toml:4:", "must be an array of tables"}},
  };
  for (const auto& c : parse_cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.file("exp.toml");
    testing::write_file(path, kHead + c.toml);
    const std::string err = error_of([&] { load_experiment(path, {}); });
    for (const auto& part : c.expect) EXPECT_HAS(err, part);
  }
}

// `inferlab calibrate` keys a fitted stack by plugin names, which cannot record rules: refused
// before any timing.
TEST(QuantizationRulesPlan, CalibrateRefusesVariantsWithRules) {
  testing::TempDir dir("quant_rules_calibrate");
  const std::string path = dir.file("exp.toml");
  testing::write_file(path, kHead + "quantization = { name = \"int8\", rules = [ { layers = \"first:1\", method = \"none\" } ] }\n");
  Registry reg({testing::plugin_dir()});
  const Plan plan = plan_of(path, reg);
  const std::string err = error_of([&] { calibrate_plan(plan, reg, CalibrationGrid{}, [] { return 0.0; }); });
  EXPECT_HAS(err, "exp.toml:4:");
  EXPECT_HAS(err, "per-layer quantization rules");
}

// A [sweep] axis over rule lists: each point gets its rules.
TEST(QuantizationRulesPlan, SweepOverRules) {
  testing::TempDir dir("quant_rules_sweep");
  const std::string path = dir.file("exp.toml");
  testing::write_file(path, kHead + R"(quantization = "int8"
[sweep]
"quantization.rules" = [ [ { layers = "first:1", method = "none" } ], [ { match = "classifier", method = "none" } ] ]
)");
  Registry reg({testing::plugin_dir()});
  const Plan plan = plan_of(path, reg);
  ASSERT_EQ(plan.variants.size(), 3u);
  EXPECT_TRUE(plan.variants[0].stack.quantization_rules.empty());
  EXPECT_EQ(plan.variants[1].rule_assignment.by_rule[0], layer_names(0));
  EXPECT_EQ(plan.variants[2].rule_assignment.by_rule[0], (std::vector<std::string>{"classifier"}));
}

}  // namespace
}  // namespace inferlab
