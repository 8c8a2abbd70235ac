// Software prefetch for the CPU kernels that stream a weight matrix once per pass of one or a
// few token rows: gemm_gguf's decode and few-row tiles (AVX2 and VNNI), gemm_panels_int8's
// micro-tiles, the fp32 / f16 / bf16 panels' few_rows, and the int8 / int4 row streams. Such a
// kernel spends several times the instructions per byte of a plain read-sum (R times more with
// R rows), so the out-of-order window holds fewer bytes ahead and one core keeps too few lines
// in flight; the hardware prefetcher alone left 4-bit decode at 25-28 GB/s where the read probe
// reached 33-36 (Zen 3, 2026-12-04), and TinyLlama's 4-row passes 1.3-1.5x a one-row pass where
// prefetching takes them to 1.1-1.25x (AMX Xeon, 2026-12-06). Prefetching a couple of KiB ahead
// in the stream restores it (docs/kernels.md, "Decode prefetch"). INFERLAB_PREFETCH=<bytes> sets
// the distance a process starts with (0: off). Internal to kernels/cpu.
#pragma once
#include <cstddef>
#include <cstdint>

namespace inferlab::cpu {

// How far ahead (bytes of the weight stream) the decode kernels above prefetch; 0: not at all
// (the hardware prefetcher alone). Both give the same bits; the switch is there to measure what
// it buys (`inferlab_bench --benchmark_filter=gemm_gguf_prefetch`).
// Values are clamped to [0, kMaxDecodePrefetch]. Returns the setting before.
constexpr int kDecodePrefetch = 2048;
constexpr int kMaxDecodePrefetch = 1 << 16;
int set_decode_prefetch(int bytes);
int decode_prefetch_bytes();

// One line into L1, unconditionally (for loops that must not branch on the distance).
// `asm volatile`: GCC 12 at -O3 deleted every _mm_prefetch of the AVX2 decode tiles' loops as
// dead code (objdump showed no prefetcht0 in them; -fno-tree-dce kept them). The address may lie
// up to kMaxDecodePrefetch past the end of the weights: a prefetch never faults. Elsewhere
// __builtin_prefetch (ARM's prfm).
inline void prefetch_line(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const std::uint8_t*>(p)));
#else
  __builtin_prefetch(p, 0, 3);
#endif
}

// One line into L2 (prefetcht1): bytes a compute-bound loop reads only after its current work.
inline void prefetch_line_l2(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht1 %0" : : "m"(*static_cast<const std::uint8_t*>(p)));
#else
  __builtin_prefetch(p, 0, 2);
#endif
}

// The next block of weights pulled into L2 while a loop computes on the current one, a few
// lines per step() over about `steps` calls: the AMX prefill kernels unpack a panel, then spend
// as long in tile products on it as its bytes take to arrive from memory, and without this the
// two phases ran one after the other (one token tile of Q8_0 at 5632 x 2048: 2.3x a one-row pass).
// Default-constructed: does nothing.
class SpreadPrefetch {
 public:
  SpreadPrefetch() = default;
  SpreadPrefetch(const void* from, std::size_t bytes, int steps)
      : p_(static_cast<const std::uint8_t*>(from)), end_(p_ + bytes),
        per_(steps > 0 ? (bytes / 64 + static_cast<std::size_t>(steps) - 1) / static_cast<std::size_t>(steps) : 0) {}
  void step() {
    for (std::size_t i = 0; i < per_ && p_ < end_; ++i, p_ += 64) prefetch_line_l2(p_);
  }
  // Whatever step() has not reached yet.
  void rest() {
    for (; p_ < end_; p_ += 64) prefetch_line_l2(p_);
  }

 private:
  const std::uint8_t* p_ = nullptr;
  const std::uint8_t* end_ = nullptr;
  std::size_t per_ = 0;
};

// Prefetches (into L1) the cache lines of [p + ahead, p + ahead + bytes); nothing for ahead <= 0.
inline void prefetch_ahead(const void* p, std::size_t bytes, int ahead) {
  if (ahead <= 0) return;
  const auto* base = static_cast<const std::uint8_t*>(p) + ahead;
  for (std::size_t l = 0; l < bytes; l += 64) prefetch_line(base + l);
}

}  // namespace inferlab::cpu
