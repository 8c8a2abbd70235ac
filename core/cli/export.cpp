// inferlab export: writes the weights inferlab runs (a checkpoint, or a seeded random preset)
// as a GGUF file in F32, F16, Q8_0 or Q4_0, so llama.cpp runs exactly the same weights.
#include <iomanip>
#include <iostream>
#include <optional>

#include <boost/program_options.hpp>

#include "commands.h"
#include "inferlab/formats/checkpoint.h"
#include "inferlab/error.h"
#include "inferlab/formats/formats.h"
#include "inferlab/run/runner.h"

namespace po = boost::program_options;

namespace inferlab::cli {

namespace {

GgmlType export_type(const std::string& name) {
  if (name == "f32") return GgmlType::kF32;
  if (name == "f16") return GgmlType::kF16;
  if (name == "q8_0") return GgmlType::kQ8_0;
  if (name == "q4_0") return GgmlType::kQ4_0;
  throw Error("export: --type = " + name + "; allowed: f32, f16, q8_0, q4_0");
}

}  // namespace

int cmd_export(const std::vector<std::string>& args) {
  po::options_description o("export options");
  add_preset_model_options(o);
  o.add_options()("format", po::value<std::string>()->default_value("gguf"),
                  "output format: gguf (one file) or hf (a Hugging Face folder: config.json + model.safetensors)")(
      "type", po::value<std::string>()->default_value("f32"),
      "gguf: matrix type f32, f16, q8_0, q4_0 (norms stay f32; so do matrices whose rows are not a multiple of 32); "
      "hf: every tensor's dtype f32, f16, bf16")(
      "tokenizer", po::value<std::string>()->default_value("auto"),
      "auto: the model's own (copied from a GGUF, written from a llama2.c tokenizer; a placeholder vocabulary for a "
      "preset), synthetic: always the placeholder vocabulary")(
      "out,o", po::value<std::string>(), "output file (required)");
  po::variables_map vm;
  if (!parse_options(args,
                     "usage: inferlab export (--model M | --preset P [--seed S]) [--n-layers N] [--format gguf|hf] "
                     "--type f32|f16|q8_0|q4_0 (hf: f32|f16|bf16) [--tokenizer auto|synthetic] --out FILE|DIR",
                     o, nullptr, vm))
    return 0;
  const std::string format = vm["format"].as<std::string>();
  if (format != "gguf" && format != "hf") throw Error("export: --format = " + format + "; allowed: gguf, hf");
  if (format == "hf") {
    const std::string type = vm["type"].as<std::string>();
    HfExportOptions hf;
    if (type == "f32") hf.dtype = "F32";
    else if (type == "f16") hf.dtype = "F16";
    else if (type == "bf16") hf.dtype = "BF16";
    else throw Error("export: --type = " + type + " with --format hf; allowed: f32, f16, bf16");
    if (vm["tokenizer"].as<std::string>() != "auto")
      throw Error("export: --tokenizer " + vm["tokenizer"].as<std::string>() +
                  " with --format hf; allowed: auto (the hf export writes no tokenizer)");
    if (!vm.count("out")) throw Error("export: --out DIR is required");
    const std::string out = vm["out"].as<std::string>();
    std::string name;
    const ModelSpec spec = preset_model_spec(vm, "export", name);
    const LoadedModel loaded = load_experiment_model(spec);
    const HfExportSummary s = write_hf(out, loaded.weights, hf);
    std::cout << "wrote " << out << ": " << name << ", " << loaded.weights.config.n_layers << " layers, model_type "
              << s.model_type << ", " << type << ", " << std::fixed << std::setprecision(2)
              << static_cast<double>(s.tensor_bytes) / (1 << 20) << " MiB of tensors"
              << (s.permuted ? ", Q/K rows permuted to the half rotation" : "") << ", no tokenizer\n";
    return 0;
  }
  GgufExportOptions options;
  options.type = export_type(vm["type"].as<std::string>());
  const std::string tok = vm["tokenizer"].as<std::string>();
  if (tok != "auto" && tok != "synthetic") throw Error("export: --tokenizer = " + tok + "; allowed: auto, synthetic");
  options.synthetic_tokenizer = tok == "synthetic";
  if (!vm.count("out")) throw Error("export: --out FILE is required");
  const std::string out = vm["out"].as<std::string>();

  std::string name;
  const ModelSpec spec = preset_model_spec(vm, "export", name);
  LoadedModel loaded = load_experiment_model(spec);
  std::optional<GgufFile> source;
  if (!spec.path.empty() && loaded.format == ModelFormat::kGguf && loaded.tokenizer) {
    source.emplace(GgufFile::open(spec.path));
    options.tokenizer_source = &*source;
  }
  options.tokenizer = loaded.tokenizer.get();
  const GgufExportSummary s = write_gguf(out, loaded.weights, options);
  std::cout << "wrote " << out << ": " << name << ", " << loaded.weights.config.n_layers << " layers, architecture "
            << s.architecture << ", matrices " << vm["type"].as<std::string>() << ", " << std::fixed << std::setprecision(2)
            << static_cast<double>(s.tensor_bytes) / (1 << 20) << " MiB of tensors, tokenizer " << s.tokenizer << "\n";
  if (!s.kept_f32.empty()) {
    std::cout << "kept as f32 (rows not a multiple of 32): " << s.kept_f32.size() << " matrices, e.g. "
              << s.kept_f32.front() << "\n";
  }
  return 0;
}

}  // namespace inferlab::cli
