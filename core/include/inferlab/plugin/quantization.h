// Quantization strategy interface: builds each linear layer from float weights with its own
// storage and kernel. (The KV cache format is the variant's [kv] dtype, kv_format.h.)
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "inferlab/device/device.h"
#include "inferlab/kv/kv_cache.h"

namespace inferlab {

class Linear;
struct ModelConfig;

// One member of a group of linears that read the same input (wq/wk/wv, w1/w3): its output
// y [n, linear->out_features()].
struct GroupMember {
  const Linear* linear;
  float* y;
};

class Linear {
 public:
  Linear(int out_features, int in_features) : out_(out_features), in_(in_features) {}
  virtual ~Linear() = default;
  // y[n, out] = x[n, in] · W^T, W being [out, in]; x and y are memory of `device`, the one
  // the strategy was created for. Bias, if any, is the model's business.
  virtual void forward(const float* x, float* y, int n, Device& device) const = 0;
  // Bytes of weight storage (including scales).
  virtual std::uint64_t weight_bytes() const = 0;
  // out[in] (host memory) = row `row` of W as stored, dequantised: the weights forward multiplies
  // by (for smoothing linears, W's row in the input's own basis). The model's embedding lookup
  // reads a tied classifier through it, so the table is stored once, in the linear's format.
  virtual void dequantize_row(int row, float* out) const = 0;
  // Linears whose CPU forward quantises x per 32-block (int8 activations, kernels/cpu/
  // matmul_int8_act.h) say so here and take the blocks ready-made in forward_act_blocks: with
  // [device] fuse = true the model quantises once, inside the RMSNorm or SwiGLU that produces x,
  // for every linear reading it. Same result as forward on the unquantised x.
  virtual bool reads_act_blocks() const { return false; }
  // xq [n, in], xs [n, act_blocks(in)] (memory of `device`); throws Error unless reads_act_blocks().
  virtual void forward_act_blocks(const std::int8_t* xq, const float* xs, float* y, int n, Device& device) const;
  // Group hooks, called by forward_group / forward_group_act_blocks (below) on the group's first
  // member: a family that can run a group of its own kind as ONE pool dispatch overrides them,
  // and either writes every member's y bit for bit as its forward / forward_act_blocks would and
  // returns true, or does nothing and returns false (a member of another kind or mode, a device
  // it does not dispatch on). The defaults return false: each member then runs on its own.
  virtual bool try_forward_group(std::span<const GroupMember> group, const float* x, int n, Device& device) const;
  virtual bool try_forward_group_act_blocks(std::span<const GroupMember> group, const std::int8_t* xq,
                                            const float* xs, int n, Device& device) const;
  // The name of the CPU kernel a forward of `rows` token rows runs (kernels/cpu/linear_plan.h's
  // cpu_kernel_info(k).name: the plan its forward follows), for the kernel column and the
  // arithmetic limit of `inferlab bench`; "" for a linear that does not run on the CPU's linear
  // kernels (a GPU's, a test's).
  virtual std::string cpu_kernel(int rows) const {
    (void)rows;
    return "";
  }
  int out_features() const { return out_; }
  int in_features() const { return in_; }

 private:
  int out_, in_;
};

// Every member's y = x · Wᵀ, x [n, in] shared (all members have the first one's in_features):
// one dispatch when the first member's family runs the group (Linear::try_forward_group), else
// each member's forward in turn. The results are the same either way. Throws Error for an empty
// group, a null member or members of different in_features.
void forward_group(std::span<const GroupMember> group, const float* x, int n, Device& device);
// As forward_group on int8 activation blocks xq [n, in], xs [n, act_blocks(in)] (memory of `device`);
// every member must reads_act_blocks().
void forward_group_act_blocks(std::span<const GroupMember> group, const std::int8_t* xq, const float* xs, int n,
                              Device& device);

// Throws Error naming `who` unless 0 <= row < linear.out_features() (dequantize_row's check).
void check_linear_row(const Linear& linear, int row, const char* who);

// What a strategy wants to know about each linear's input activations before it quantizes
// (collected once by running the float model over the experiment's [calibration] tokens).
struct CalibrationNeeds {
  bool hessian = false;  // H = XᵀX [in, in] (GPTQ)
  bool max_abs = false;  // per input channel max |x| and mean |x| (AWQ, SmoothQuant)
  int samples = 0;       // up to this many input rows X_s [rows, in], drawn with a fixed seed (AWQ)
  bool any() const { return hessian || max_abs || samples > 0; }
};

// Statistics of one linear's input x [tokens, in] over the calibration tokens. Fields the
// strategy did not ask for are empty. Linears that read the same activation (wq/wk/wv, w1/w3)
// get the same statistics.
struct LinearCalibration {
  int in = 0;
  long long tokens = 0;          // rows of X seen
  std::vector<double> hessian;   // [in, in] Σ_t x_t x_tᵀ (not divided by tokens)
  std::vector<float> max_abs;    // [in] max_t |x_t,i|
  std::vector<float> mean_abs;   // [in] mean_t |x_t,i|
  std::vector<float> samples;    // [sample_rows, in] a seeded sample of the rows of X
  int sample_rows = 0;
};

// How a strategy's linear multiplies, as the simulator charges it (docs/simulation.md, "What a
// strategy costs"); what the linear reads is planned_bytes. A strategy that does not declare it
// (the default) cannot be simulated: `validate` refuses it on [device] kind = "sim".
struct LinearArithmetic {
  bool declared = false;
  // Unquantised: the model's own weights, which a simulated GPU serves in bf16 (planned_bytes
  // is the CPU's fp32 then, and not what the simulator charges).
  bool native = false;
  // The multiply runs on int8 tensor cores (W8A8, W4A8: activations quantised per row); false:
  // at the float (bf16) tensor rate, weights unpacked to float first when quantized.
  bool int8_mma = false;
  // Scalar ops per weight to unpack it (shift, mask, subtract a zero point, scale) before the
  // multiply; done once per weight for every 128 rows of a step (a GEMM tile's rows).
  double dequant_ops = 0;
  // CPU only: the multiply runs as int16 dot products (activations in int16 blocks, vpdpwssd);
  // inferlab bench's arithmetic limit takes that peak. A simulated GPU reads such a linear as
  // int8_mma = false (16-bit activations at the bf16 tensor rate).
  bool int16_dot = false;
};

class Quantization {
 public:
  virtual ~Quantization() = default;
  // `name` identifies the tensor ("layers.3.wq", "classifier") for strategies that treat
  // some layers differently. weight: [out, in], consumed.
  virtual std::unique_ptr<Linear> make_linear(const std::string& name, std::vector<float> weight,
                                              int out, int in) = 0;
  // As above, with the calibration statistics of this linear's input when the strategy asked
  // for them (calibration_needs().any()) and the experiment has a [calibration] section;
  // nullptr otherwise (strategies must then fall back to a calibration-free rule). The model
  // always calls this overload; the default ignores `calib`.
  virtual std::unique_ptr<Linear> make_linear(const std::string& name, std::vector<float> weight, int out,
                                              int in, const LinearCalibration* calib) {
    (void)calib;
    return make_linear(name, std::move(weight), out, in);
  }
  // Whether make_linear(name, ...) reads the fp32 values. A strategy that builds `name` from
  // the checkpoint's stored blocks (ModelWeights::source_blocks) answers false and is handed an
  // empty vector, so a block-held matrix is never dequantised for it. True by default.
  virtual bool needs_values(const std::string& name) const {
    (void)name;
    return true;
  }
  // Bytes linear `name` ([out, in], of `model`) will store: what the memory estimate asks before
  // any weights load. The default builds it with make_linear on a fixed probe of min(out, 64)
  // rows and scales weight_bytes() by out / rows; a strategy whose size depends on the
  // checkpoint rather than on values (quantization/gguf: the file's blocks) answers from `model`.
  virtual std::uint64_t planned_bytes(const std::string& name, int out, int in, const ModelConfig& model);
  // What to collect for make_linear; nothing by default.
  virtual CalibrationNeeds calibration_needs() const { return {}; }
  // How linear `name` of `model` multiplies (see LinearArithmetic); undeclared by default.
  virtual LinearArithmetic arithmetic(const std::string& name, const ModelConfig& model) const {
    (void)name;
    (void)model;
    return {};
  }
};

}  // namespace inferlab
