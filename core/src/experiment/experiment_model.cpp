// Model tables of an experiment file (see experiment_model.h).
#include "experiment/experiment_model.h"

#include "inferlab/experiment/experiment_keys.h"
#include "inferlab/model/model_config.h"

namespace inferlab {

using namespace experiment_parse;

ModelSpec parse_model_table(const Ctx& c, const toml::node& node, const std::string& section,
                            const std::string& base_dir, std::uint64_t seed) {
  ModelSpec m;
  m.seed = seed;
  const auto& t = get_table(c, node, section);
  check_keys(c, t, section, experiment_keys("model"));
  if (auto v = t.get("preset")) {
    m.preset = get_string(c, *v, "preset");
    try {
      preset_config(m.preset);
    } catch (const Error& e) {
      throw Error(c.at(*v) + ": " + e.what());
    }
  }
  if (auto v = t.get("path")) m.path = resolve_data_path(get_string(c, *v, "path"), base_dir, c.at(*v));
  if (auto v = t.get("tokenizer")) m.tokenizer = resolve_data_path(get_string(c, *v, "tokenizer"), base_dir, c.at(*v));
  if (auto v = t.get("format")) {
    m.format = get_string(c, *v, "format");
    if (m.format != "auto" && m.format != "llama2c" && m.format != "gguf" && m.format != "hf")
      throw Error(c.at(*v) + ": format = \"" + m.format + "\"; allowed: auto, llama2c, gguf, hf");
  }
  if (auto v = t.get("n_layers")) m.n_layers = static_cast<int>(get_int(c, *v, "n_layers", 1, 1024));
  if (auto v = t.get("seed")) m.seed = static_cast<std::uint64_t>(get_int(c, *v, "seed", 0, INT64_MAX));
  if (auto v = t.get("add_bos")) {
    auto b = v->as_boolean();
    if (!b) throw Error(c.at(*v) + ": 'add_bos' must be a boolean (true, false), got " + type_name(*v));
    m.add_bos = b->get();
  }
  if (m.preset.empty() == m.path.empty())
    throw Error(c.at(node) + ": " + section + " needs exactly one of 'preset' (random weights) or 'path' (a checkpoint)");
  if (!m.preset.empty()) {
    for (const char* k : {"tokenizer", "format"})
      if (auto v = t.get(k))
        throw Error(c.at(*v) + ": " + section + " " + k + " applies to a checkpoint 'path', not to a random-weight preset");
    if (auto v = t.get("n_layers")) {
      const int depth = preset_config(m.preset).n_layers;
      if (m.n_layers > depth)
        throw Error(c.at(*v) + ": n_layers = " + std::to_string(m.n_layers) + ", but preset '" + m.preset + "' has " +
                    std::to_string(depth) + " layers; allowed: 1.." + std::to_string(depth));
    }
  }
  return m;
}

}  // namespace inferlab
