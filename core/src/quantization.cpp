// Linear's optional interface (see inferlab/quantization.h).
#include "inferlab/quantization.h"

#include <string>

#include "inferlab/error.h"

namespace inferlab {

void Linear::forward_act_blocks(const std::int8_t*, const float*, float*, int, Device&) const {
  throw Error("a [" + std::to_string(out_) + ", " + std::to_string(in_) +
              "] linear without int8 activations was handed activation blocks (reads_act_blocks() is false)");
}

void check_linear_row(const Linear& linear, int row, const char* who) {
  check(row >= 0 && row < linear.out_features(), std::string(who) + ": row " + std::to_string(row) +
                                                     " outside [0, " + std::to_string(linear.out_features()) + ")");
}

}  // namespace inferlab
