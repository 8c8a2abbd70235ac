// The model side of a run: the config an experiment asks for, its weights, and a [[variant]]'s
// substituted model checked against the baseline's (see inferlab/run/runner.h, runner_models.h).
#include "run/runner_models.h"

#include <unistd.h>

#include "inferlab/error.h"
#include "inferlab/tokenizer/tokenizer.h"

namespace inferlab {

namespace {

// [model] n_layers may cut a checkpoint's depth, never add layers.
void check_checkpoint_layers(const ModelSpec& spec, int file_layers) {
  if (spec.n_layers > file_layers)
    throw Error("[model] n_layers = " + std::to_string(spec.n_layers) + ", but " + spec.path + " has " +
                std::to_string(file_layers) + " layers; allowed: 1.." + std::to_string(file_layers));
}

}  // namespace

ModelConfig experiment_model_config(const ModelSpec& spec) {
  if (!spec.preset.empty()) {
    ModelConfig c = preset_config(spec.preset);
    if (spec.n_layers > 0) c.n_layers = spec.n_layers;
    return c;
  }
  ModelConfig c = read_model_config(spec.path, parse_model_format(spec.format));
  check_checkpoint_layers(spec, c.n_layers);
  if (spec.n_layers > 0) c.n_layers = spec.n_layers;
  return c;
}

// A substituted preset's model, built at most in fp32 (its variant's strategy is not asked), must
// fit in memory. The preset's seeded weights themselves hold only norms.
void check_preset_fits(const ModelSpec& spec, const ModelConfig& c) {
  const double bytes = static_cast<double>(c.parameter_count()) * 4.0;
  const double avail = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (bytes * 1.1 > avail)
    throw Error("model preset '" + spec.preset + "' needs about " + std::to_string(static_cast<long long>(bytes * 1.1 / (1 << 20))) +
                " MiB for an fp32 model, this machine has " + std::to_string(static_cast<long long>(avail / (1 << 20))) +
                " MiB; set [model] n_layers to a smaller depth");
}

LoadedModel load_experiment_model(const ModelSpec& spec) {
  if (!spec.preset.empty()) {
    // Matrices drawn when a model is built (seeded_weights): the load holds norms only, and
    // run/validate's memory estimate or bench's check sizes what the strategies then build.
    LoadedModel m;
    m.weights = seeded_weights(experiment_model_config(spec), spec.seed);
    return m;
  }
  LoadedModel m = load_model(spec.path, parse_model_format(spec.format), spec.tokenizer);
  check_checkpoint_layers(spec, m.weights.config.n_layers);
  if (spec.n_layers > 0 && spec.n_layers < m.weights.config.n_layers) {
    m.weights.layers.resize(static_cast<std::size_t>(spec.n_layers));
    m.weights.config.n_layers = spec.n_layers;
  }
  return m;
}

// A [[variant]] model's config, checked against the baseline's: same vocabulary, real weights.
ModelConfig substituted_model_config(const ExperimentSpec& spec, const Variant& v, const ModelConfig& baseline) {
  const std::string at = v.model_where + ": variant '" + v.name + "': model ";
  if (spec.device.kind == DeviceKind::kSim)
    throw Error(at + "substitution runs real weights; a simulated run (device kind \"sim\") has none");
  ModelConfig c;
  try {
    c = experiment_model_config(*v.model);
    if (!v.model->preset.empty()) check_preset_fits(*v.model, c);
  } catch (const Error& e) {
    throw Error(at + e.what());
  }
  if (c.vocab_size != baseline.vocab_size)
    throw Error(at + "'" + c.name + "' has a vocabulary of " + std::to_string(c.vocab_size) + " tokens, the baseline '" +
                baseline.name + "' " + std::to_string(baseline.vocab_size) +
                "; allowed: a model with the baseline's tokenizer (quality compares their next-token distributions)");
  return c;
}

void check_same_tokenizer(const LoadedModel& baseline, const LoadedModel& variant, const std::string& where) {
  const ModelConfig &a = baseline.weights.config, &b = variant.weights.config;
  if (a.vocab_size != b.vocab_size)
    throw Error(where + ": model '" + b.name + "' has a vocabulary of " + std::to_string(b.vocab_size) +
                " tokens, the baseline " + std::to_string(a.vocab_size) + "; allowed: the baseline's tokenizer");
  const Tokenizer *ta = baseline.tokenizer.get(), *tb = variant.tokenizer.get();
  if (ta == nullptr || tb == nullptr) return;  // ids only: the vocabulary size is all there is to compare
  if (ta->vocab_size() != tb->vocab_size() || ta->bos_id() != tb->bos_id() || ta->eos_id() != tb->eos_id())
    throw Error(where + ": model '" + b.name + "' has another tokenizer (vocabulary, BOS or EOS differ); allowed: the "
                "baseline's tokenizer");
  for (int id = 0; id < ta->vocab_size(); ++id)
    if (ta->decode_token(0, id) != tb->decode_token(0, id))
      throw Error(where + ": model '" + b.name + "' has another tokenizer (token " + std::to_string(id) + " is '" +
                  tb->decode_token(0, id) + "', the baseline's '" + ta->decode_token(0, id) +
                  "'); allowed: the baseline's tokenizer");
}

}  // namespace inferlab
