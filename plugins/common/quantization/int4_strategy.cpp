// CalibratedInt4Quantization and the descriptor parts of the int4 group strategies.
#include "plugins/common/quantization/int4_strategy.h"

#include "plugins/common/quantization/float_linear.h"

namespace inferlab {

CalibratedInt4Quantization::CalibratedInt4Quantization(int group_size, Int4Activations activations,
                                                       bool skip_classifier, const std::string& who)
    : group_size_(group_size), activations_(activations), skip_classifier_(skip_classifier) {
  check_int4_group_size(group_size, who);
}

std::unique_ptr<Linear> CalibratedInt4Quantization::make_linear(const std::string& name, std::vector<float> weight,
                                                                int out, int in) {
  return make_linear(name, std::move(weight), out, in, nullptr);
}

std::unique_ptr<Linear> CalibratedInt4Quantization::make_linear(const std::string& name, std::vector<float> weight,
                                                                int out, int in, const LinearCalibration* calib) {
  if (skip_classifier_ && name == "classifier") return place_float(std::move(weight), out, in);
  if (calib != nullptr && calibrated(*calib)) return make_calibrated(name, weight, out, in, *calib);
  auto plain = std::make_unique<Int4Linear>(weight, out, in, group_size_, false);
  plain->set_activations(activations_);
  return place(std::move(plain));
}

std::unique_ptr<Linear> CalibratedInt4Quantization::place_float(std::vector<float> weight, int out, int in) {
  return std::make_unique<FloatLinear>(std::move(weight), out, in);
}

std::vector<std::string> int4_group_reasons(const SupportQuery& q) {
  std::vector<std::string> reasons;
  if (q.params.get_int("group_size") % 8 != 0)
    reasons.push_back("group_size must be a multiple of 8, got " + std::to_string(q.params.get_int("group_size")));
  const std::string acts = q.params.get_string("activations");
  if ((acts == "int8" || acts == "int16") && q.params.get_int("group_size") % 32 != 0)
    reasons.push_back("activations = \"" + acts + "\" needs group_size a multiple of 32, got " +
                      std::to_string(q.params.get_int("group_size")));
  return reasons;
}

std::vector<std::string> int4_cuda_reasons(const SupportQuery& q) {
  std::vector<std::string> reasons;
  if (q.params.get_string("activations") == "int16")
    reasons.push_back("activations = \"int16\" is a CPU kernel (allowed on cuda: auto, fp32, int8)");
  return reasons;
}

ParamSpec skip_classifier_param() {
  return {"skip_classifier", ParamType::kBool, false, std::nullopt, std::nullopt, {},
          "Keep the 'classifier' (LM head) in fp32"};
}

ParamSpec calibrated_int4_activations_param() {
  return {"activations", ParamType::kString, std::string("auto"), std::nullopt, std::nullopt,
          {"auto", "fp32", "int16", "int8"},
          "auto (default): int8 where group_size is a multiple of 32, else fp32; fp32: weight-only, exact fp32 "
          "activations; int16: 16-bit activations, int16 per 32-block (W4A16 in integers, error below fp16's; "
          "CPU; group_size a multiple of 32); int8: activations quantised per 32-block (W4A8, quantization/int4's "
          "kernels; group_size a multiple of 32)"};
}

}  // namespace inferlab
