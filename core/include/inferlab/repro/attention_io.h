// HBM traffic of exact attention, counted on a working algorithm (Dao et al., FlashAttention,
// NeurIPS 2022, §3.2, Theorem 2): with an on-chip memory (SRAM) of M elements, the standard
// implementation (Algorithm 0: S = QKᵀ, P = softmax(S), O = PV, each through HBM) moves
// Θ(Nd + N²) elements and the tiled one (Algorithm 1) Θ(N²d²/M).
//
// Both functions really compute attention: the inputs live in a simulated HBM, every tile is
// copied into SRAM buffers (whose peak size is tracked) before any arithmetic touches it, and
// every element copied between the two is counted. One head, no causal mask, no dropout (the
// setting of the theorem); scale 1/√d. `inferlab reproduce` (quantity attention_io_exponent)
// fits the exponents of N, d and M over a grid with these counts.
#pragma once
#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace inferlab {

enum class AttentionIoAlgorithm { kStandard, kFlash };
// "standard" or "flash"; Error naming `where` and the allowed names otherwise.
AttentionIoAlgorithm parse_attention_io_algorithm(const std::string& name, const std::string& where);

struct AttentionIoCount {
  double hbm_reads = 0;      // elements copied HBM → SRAM
  double hbm_writes = 0;     // elements copied SRAM → HBM
  std::size_t sram_peak = 0; // largest number of elements held in SRAM at once
  double hbm_accesses() const { return hbm_reads + hbm_writes; }
};

// The tile sizes of Algorithm 1, line 1: Bc = ⌈M / 4d⌉ (key/value rows per tile),
// Br = min(Bc, d) (query rows per tile).
struct FlashTiles {
  int bc = 0, br = 0;
};
FlashTiles flash_tiles(std::size_t sram_elements, int head_dim);

// q, k, v: [n, d] row-major; out: [n, d]. `sram_elements` = M; Error unless d <= M and the
// spans hold n·d elements. Returns the counts of the run that computed `out`.
AttentionIoCount attention_io_run(AttentionIoAlgorithm algorithm, int n, int d, std::size_t sram_elements,
                                  std::span<const float> q, std::span<const float> k, std::span<const float> v,
                                  std::span<float> out);

// Least-squares exponents of log(HBM accesses) = c + a·log N + b·log d + e·log M over the grid
// N, d, M ∈ {min, 2·min, …, ≤ max} (only points in the theorem's range d <= M <= N·d, and for
// the standard algorithm d² <= M: SRAM for a d × d tile, without which its S = QKᵀ alone moves
// more than Θ(N²)),
// each point one run of `algorithm` on seeded random inputs. {a, b, e}, and `bound_slope`: the
// slope of log(accesses) against log of the theorem's bound (Nd + N² for standard, N²d²/M for
// flash) over the same points: 1 when the bound has the right shape.
struct AttentionIoFit {
  double exp_n = 0, exp_d = 0, exp_m = 0, bound_slope = 0;
  int points = 0;
};
struct AttentionIoGrid {
  int n_min = 0, n_max = 0, d_min = 0, d_max = 0;
  std::size_t m_min = 0, m_max = 0;
};
AttentionIoFit fit_attention_io(AttentionIoAlgorithm algorithm, const AttentionIoGrid& grid);

}  // namespace inferlab
