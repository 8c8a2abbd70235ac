// A model table of an experiment file (internal to core/src/experiment*.cpp): [model], and a
// [[variant]]'s `model = { preset = ... }` / `{ path = ... }` that substitutes another model.
#pragma once
#include <cstdint>
#include <string>

#include "inferlab/experiment/tomlpp.h"

#include "experiment/experiment_parse.h"
#include "inferlab/experiment/experiment.h"

namespace inferlab {

// preset | path (exactly one), tokenizer, format, n_layers, seed (default `seed`), add_bos.
// `section` names the table in errors ("[model]", "[[variant]] model").
ModelSpec parse_model_table(const experiment_parse::Ctx& c, const toml::node& node, const std::string& section,
                            const std::string& base_dir, std::uint64_t seed);

}  // namespace inferlab
