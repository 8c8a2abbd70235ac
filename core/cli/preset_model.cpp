// The model options bench and export share: a checkpoint (--model) or a seeded random preset
// (--preset, --seed), cut to --n-layers, so `inferlab export` writes the weights `inferlab
// bench` runs for the same options.
#include <charconv>

#include <boost/program_options.hpp>

#include "commands.h"
#include "inferlab/error.h"
#include "inferlab/model/model_config.h"

namespace po = boost::program_options;

namespace inferlab::cli {

void add_preset_model_options(po::options_description& o) {
  o.add_options()("model", po::value<std::string>(), "checkpoint: llama2.c .bin, GGUF, Hugging Face folder (or use --preset)")(
      "preset", po::value<std::string>()->default_value("stories15m"), "random-weight preset when no --model")(
      "seed", po::value<std::string>()->default_value("1"), "weights seed of the preset (0 .. 2^64-1)")(
      "n-layers", po::value<int>()->default_value(0), "keep only the first N layers (0 = all)");
}

ModelSpec preset_model_spec(const po::variables_map& vm, const std::string& command, std::string& display_name) {
  ModelSpec spec;
  spec.n_layers = vm["n-layers"].as<int>();
  if (spec.n_layers < 0 || spec.n_layers > 1024)
    throw Error(command + ": --n-layers = " + std::to_string(spec.n_layers) + " is out of range; allowed: 0 (all) .. 1024");
  const std::string seed = vm["seed"].as<std::string>();
  const auto [end, ec] = std::from_chars(seed.data(), seed.data() + seed.size(), spec.seed);
  if (seed.empty() || ec != std::errc() || end != seed.data() + seed.size())
    throw Error(command + ": --seed = " + seed + " is not allowed; allowed: an integer 0 .. 18446744073709551615");
  if (vm.count("model")) {
    if (!vm["preset"].defaulted()) throw Error(command + ": --model and --preset exclude each other; give one");
    spec.path = vm["model"].as<std::string>();
    display_name = spec.path;
  } else {
    spec.preset = vm["preset"].as<std::string>();
    const ModelConfig preset = preset_config(spec.preset);
    // The limit a TOML's [model] n_layers has: a preset is not grown, only cut.
    if (spec.n_layers > preset.n_layers)
      throw Error(command + ": --n-layers = " + std::to_string(spec.n_layers) + ", but preset '" + spec.preset + "' has " +
                  std::to_string(preset.n_layers) + " layers; allowed: 0 (all) .. " + std::to_string(preset.n_layers));
    display_name = preset.name + " (random weights, seed " + seed + ")";
  }
  return spec;
}

}  // namespace inferlab::cli
