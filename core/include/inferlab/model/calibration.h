// Calibration: the float model run once over calibration tokens, recording what quantization
// strategies asked for (CalibrationNeeds) about every linear's input activations — the Hessian
// XᵀX, per-channel max and mean |x|, a seeded sample of input rows. The result is shared by
// every variant of an experiment (one pass per model and calibration text), and handed to
// Quantization::make_linear through the Model constructor.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "inferlab/plugin/attention.h"
#include "inferlab/plugin/quantization.h"
#include "inferlab/model/weights.h"

namespace inferlab {

class CalibrationSet {
 public:
  // The statistics of linear `name` ("layers.3.wq", "classifier"); nullptr when absent.
  const LinearCalibration* find(const std::string& name) const;
  void set(const std::string& name, std::shared_ptr<const LinearCalibration> stats) { linears_[name] = std::move(stats); }
  std::size_t size() const { return linears_.size(); }
  const CalibrationNeeds& needs() const { return needs_; }
  void set_needs(const CalibrationNeeds& needs) { needs_ = needs; }
  double perplexity = 0;  // of the float model on the calibration tokens (a sanity figure)
  long long tokens = 0;

 private:
  CalibrationNeeds needs_;
  std::map<std::string, std::shared_ptr<const LinearCalibration>> linears_;
};

// The union of two sets of needs (a sweep calibrates once for all its strategies).
CalibrationNeeds merge_needs(const CalibrationNeeds& a, const CalibrationNeeds& b);

// Runs the float model (weights in fp32, `attention` on a CPU device of `threads` threads)
// over `tokens` in consecutive windows of `seq_len` tokens, and returns the statistics of every
// linear's input. Linears that read the same activation share one record: wk and wv read wq's
// input, w3 reads w1's. Row samples are drawn by reservoir sampling seeded with `seed`.
CalibrationSet collect_calibration(const ModelWeights& weights, Attention& attention, const std::vector<int>& tokens,
                                   int seq_len, const CalibrationNeeds& needs, std::uint64_t seed, int threads);

}  // namespace inferlab
