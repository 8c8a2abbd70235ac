// A handler that records the signal and nothing else (async-signal-safe).
#include "inferlab/engine/interrupt.h"

#include <signal.h>

#include <atomic>

namespace inferlab {

namespace {
std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);
extern "C" void record_signal(int sig) { g_signal.store(sig); }
}  // namespace

void install_interrupt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = record_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int interrupt_signal() { return g_signal.load(); }

}  // namespace inferlab
