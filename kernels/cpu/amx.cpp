// AMX availability and tile configuration: see amx.h.
#include "kernels/cpu/amx.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#if INFERLAB_AMX_INT8 || INFERLAB_AMX_BF16
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace inferlab::cpu {
namespace {

// Whether the kernel grants this process the tile data state (asked once).
bool os_grants_tiles() {
#if INFERLAB_AMX_INT8 || INFERLAB_AMX_BF16
  static const bool granted = [] {
    constexpr long kReqXcompPerm = 0x1023;  // arch_prctl ARCH_REQ_XCOMP_PERM
    constexpr long kXtiledata = 18;         // XFEATURE_XTILEDATA
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXtiledata) == 0;
  }();
  return granted;
#else
  return false;
#endif
}

std::atomic<int>& state() {  // -1: not decided yet, 0: off, 1: on
  static std::atomic<int> s{-1};
  return s;
}

std::atomic<int>& bf16_state() {  // the same for the bf16 tiles
  static std::atomic<int> s{-1};
  return s;
}

bool amx_wanted() {
  const char* env = std::getenv("INFERLAB_AMX");
  return env == nullptr || std::strcmp(env, "0") != 0;
}

bool decide(std::atomic<int>& st, bool built) {
  int s = st.load(std::memory_order_relaxed);
  if (s < 0) {
    s = amx_wanted() && built && os_grants_tiles() ? 1 : 0;
    int expected = -1;
    if (!st.compare_exchange_strong(expected, s)) s = expected;
  }
  return s == 1;
}

}  // namespace

bool amx_int8_built() {
#if INFERLAB_AMX_INT8
  return true;
#else
  return false;
#endif
}

bool amx_int8_enabled() { return decide(state(), amx_int8_built()); }

bool set_amx_int8(bool on) {
  const bool before = amx_int8_enabled();
  state().store(on && amx_int8_built() && os_grants_tiles() ? 1 : 0);
  return before;
}

bool amx_bf16_built() {
#if INFERLAB_AMX_BF16
  return true;
#else
  return false;
#endif
}

bool amx_bf16_enabled() { return decide(bf16_state(), amx_bf16_built()); }

bool set_amx_bf16(bool on) {
  const bool before = amx_bf16_enabled();
  bf16_state().store(on && amx_bf16_built() && os_grants_tiles() ? 1 : 0);
  return before;
}

void AmxConfig::load() const {
#if INFERLAB_AMX_INT8 || INFERLAB_AMX_BF16
  _tile_loadconfig(this);
#endif
}

const AmxConfig& amx_full_tiles() {
  static const AmxConfig c = [] {
    AmxConfig cfg;
    for (int t = 0; t < 8; ++t) cfg.tile(t, 16, 64);
    return cfg;
  }();
  return c;
}

void AmxConfig::release() {
#if INFERLAB_AMX_INT8 || INFERLAB_AMX_BF16
  _tile_release();
#endif
}

}  // namespace inferlab::cpu
