// The fused decode ops of a ComputeDevice (Device::set_fuse: residual_rmsnorm, rope_kv_write_f32,
// swiglu_quantize) against their reference math (kernels/ref/ops_fused.h), over awkward shapes
// (1, 3, 129 rows; widths that are not multiples of a warp or of the 32-value activation block),
// outputs poisoned so an unwritten value shows. Device-agnostic (memory through the Device), so
// the CPU test (tests/kernels) and the CUDA test (tests/cuda) run the same cases. Tolerance, as
// ops_fused.h states: floats within 1e-5 * (1 + |want|), int8 codes equal or one step apart,
// scales within 1e-5 relative.
#pragma once
#include <vector>

#include "inferlab/device/device.h"

namespace inferlab::testing {

void expect_fused_ops_match_reference(ComputeDevice& device);

// Logits rows for the token choice (argmax, sampling): vocabularies 1 / 7 / 300 / 32000, normal,
// with a tie at the top (the lower index must win), with a NaN and a -inf inside, with a NaN at
// index 0, and flat.
std::vector<std::vector<float>> token_choice_rows();

}  // namespace inferlab::testing
