// libFuzzer target: an experiment file and its --set overrides, through load_experiment and
// plan_experiment (the registry resolves and checks every plugin choice, as `inferlab validate`
// does). Input: the TOML text, then zero or more overrides, each after a NUL byte.
// Only inferlab::Error may leave; anything else (another exception, a crash, a sanitizer
// report, a hang, an allocation past -rss_limit_mb) is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "input_files.h"
#include "inferlab/error.h"
#include "inferlab/experiment/experiment.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/run/runner.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace inferlab;
  static const Registry registry(Registry::default_search_path());
  const std::string_view in = fuzz::as_text(data, size);
  const std::size_t nul = in.find('\0');
  const std::string path = fuzz::write_input("exp.toml", in.substr(0, nul));
  std::vector<std::string> overrides;
  for (std::size_t at = nul; at != std::string_view::npos && at < in.size();) {
    const std::size_t next = in.find('\0', at + 1);
    overrides.emplace_back(in.substr(at + 1, next == std::string_view::npos ? std::string_view::npos : next - at - 1));
    at = next;
  }
  try {
    const ExperimentSpec spec = load_experiment(path, overrides);
    if (!spec.model.preset.empty()) plan_experiment(spec, registry, experiment_model_config(spec.model));
  } catch (const Error&) {
  }
  return 0;
}
