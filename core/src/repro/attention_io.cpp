// HBM traffic of standard and tiled (FlashAttention) attention, counted while computing it
// (see inferlab/repro/attention_io.h). Symbols follow Dao et al. 2022: N rows, head dim d, SRAM of M
// elements, tiles Br × Bc.
#include "inferlab/repro/attention_io.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

// GCC 12 reports a false maybe-uninitialized inside Eigen's AVX-512 kernels (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Dense>

#include "inferlab/error.h"

namespace inferlab {

namespace {

// A row-major [rows, cols] tensor in simulated HBM. Its contents reach the arithmetic only
// through load (HBM → SRAM) and leave it only through store (SRAM → HBM), both counted.
class Hbm {
 public:
  Hbm(int rows, int cols, AttentionIoCount& count, float fill = 0.0f)
      : rows_(rows), cols_(cols), data_(static_cast<std::size_t>(rows) * cols, fill), count_(count) {}
  int rows() const { return rows_; }
  int cols() const { return cols_; }
  // dst: [nr, nc] = this[r0 : r0 + nr, c0 : c0 + nc], or of the transpose when `transposed`.
  void load(int r0, int nr, int c0, int nc, float* dst, bool transposed = false) const {
    for (int r = 0; r < nr; ++r)
      for (int c = 0; c < nc; ++c)
        dst[static_cast<std::size_t>(r) * nc + c] = transposed ? at(c0 + c, r0 + r) : at(r0 + r, c0 + c);
    count_.hbm_reads += static_cast<double>(nr) * nc;
  }
  // this[r0 : r0 + nr, c0 : c0 + nc] = src [nr, nc].
  void store(int r0, int nr, int c0, int nc, const float* src) {
    for (int r = 0; r < nr; ++r)
      for (int c = 0; c < nc; ++c) data_[static_cast<std::size_t>(r0 + r) * cols_ + c0 + c] = src[static_cast<std::size_t>(r) * nc + c];
    count_.hbm_writes += static_cast<double>(nr) * nc;
  }
  // Uncounted: inputs already in HBM before the algorithm starts, the result after it ends.
  std::vector<float>& raw() { return data_; }

 private:
  float at(int r, int c) const { return data_[static_cast<std::size_t>(r) * cols_ + c]; }
  int rows_, cols_;
  std::vector<float> data_;
  AttentionIoCount& count_;
};

// A buffer in simulated SRAM: its size counts toward the SRAM in use while it lives.
class SramTile {
 public:
  SramTile(std::size_t& in_use, AttentionIoCount& count, std::size_t n) : in_use_(in_use), data_(n) {
    in_use_ += n;
    count.sram_peak = std::max(count.sram_peak, in_use_);
  }
  ~SramTile() { in_use_ -= data_.size(); }
  SramTile(const SramTile&) = delete;
  SramTile& operator=(const SramTile&) = delete;
  float* data() { return data_.data(); }
  float& operator[](std::size_t i) { return data_[i]; }

 private:
  std::size_t& in_use_;
  std::vector<float> data_;
};

struct Machine {
  std::size_t m = 0;  // SRAM elements
  AttentionIoCount count;
  std::size_t in_use = 0;
  SramTile tile(std::size_t n) { return SramTile(in_use, count, n); }
};

// C [rows(A), cols(B)] = scale · A · B through SRAM, tile by tile: square output tiles of side
// b = ⌊√(M/3)⌋ accumulate over chunks of b along the shared dimension (b² + 2·b·b ≤ M). B is
// read transposed from its storage when `b_transposed` (S = Q·Kᵀ with K stored [N, d]).
void tiled_matmul(Machine& mc, const Hbm& a, const Hbm& b, bool b_transposed, float scale, Hbm& c) {
  const int rows = a.rows(), inner = a.cols(), cols = b_transposed ? b.rows() : b.cols();
  const int side = std::max(1, static_cast<int>(std::sqrt(static_cast<double>(mc.m) / 3.0)));
  for (int i0 = 0; i0 < rows; i0 += side) {
    const int ni = std::min(side, rows - i0);
    for (int j0 = 0; j0 < cols; j0 += side) {
      const int nj = std::min(side, cols - j0);
      SramTile acc = mc.tile(static_cast<std::size_t>(ni) * nj);  // [ni, nj]
      for (int l0 = 0; l0 < inner; l0 += side) {
        const int nl = std::min(side, inner - l0);
        SramTile at = mc.tile(static_cast<std::size_t>(ni) * nl), bt = mc.tile(static_cast<std::size_t>(nl) * nj);
        a.load(i0, ni, l0, nl, at.data());                 // [ni, nl]
        b.load(l0, nl, j0, nj, bt.data(), b_transposed);   // [nl, nj]
        for (int i = 0; i < ni; ++i)
          for (int l = 0; l < nl; ++l) {
            const float x = at[static_cast<std::size_t>(i) * nl + l];
            for (int j = 0; j < nj; ++j) acc[static_cast<std::size_t>(i) * nj + j] += x * bt[static_cast<std::size_t>(l) * nj + j];
          }
      }
      for (std::size_t e = 0; e < static_cast<std::size_t>(ni) * nj; ++e) acc[e] *= scale;
      c.store(i0, ni, j0, nj, acc.data());
    }
  }
}

// P = softmax(S) row by row in chunks of at most M − 2 elements: one pass for the running max
// and sum (rescaled when the max grows), one to write the normalised chunk.
void chunked_softmax(Machine& mc, const Hbm& s, Hbm& p) {
  const int n = s.cols();
  const int chunk = std::max(1, std::min(n, static_cast<int>(mc.m) - 2));
  SramTile buf = mc.tile(static_cast<std::size_t>(chunk)), stats = mc.tile(2);  // [chunk], {max, sum}
  for (int r = 0; r < s.rows(); ++r) {
    stats[0] = -std::numeric_limits<float>::infinity();
    stats[1] = 0;
    for (int c0 = 0; c0 < n; c0 += chunk) {
      const int nc = std::min(chunk, n - c0);
      s.load(r, 1, c0, nc, buf.data());
      const float mx = std::max(stats[0], *std::max_element(buf.data(), buf.data() + nc));
      stats[1] *= std::exp(stats[0] - mx);
      for (int c = 0; c < nc; ++c) stats[1] += std::exp(buf[static_cast<std::size_t>(c)] - mx);
      stats[0] = mx;
    }
    for (int c0 = 0; c0 < n; c0 += chunk) {
      const int nc = std::min(chunk, n - c0);
      s.load(r, 1, c0, nc, buf.data());
      for (int c = 0; c < nc; ++c) buf[static_cast<std::size_t>(c)] = std::exp(buf[static_cast<std::size_t>(c)] - stats[0]) / stats[1];
      p.store(r, 1, c0, nc, buf.data());
    }
  }
}

// Algorithm 0: S = QKᵀ / √d, P = softmax(S), O = PV, each written to and read back from HBM.
void standard_attention(Machine& mc, const Hbm& q, const Hbm& k, const Hbm& v, Hbm& o) {
  const int n = q.rows(), d = q.cols();
  Hbm s(n, n, mc.count), p(n, n, mc.count);  // [N, N] each
  tiled_matmul(mc, q, k, /*b_transposed=*/true, 1.0f / std::sqrt(static_cast<float>(d)), s);
  chunked_softmax(mc, s, p);
  tiled_matmul(mc, p, v, /*b_transposed=*/false, 1.0f, o);
}

// Algorithm 1 (forward pass, no mask or dropout), line by line.
void flash_attention(Machine& mc, const Hbm& q, const Hbm& k, const Hbm& v, Hbm& o) {
  const int n = q.rows(), d = q.cols();
  const FlashTiles t = flash_tiles(mc.m, d);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  // Line 2: O = 0 [N, d], ℓ = 0 [N], m = −∞ [N] in HBM (written through one SRAM row).
  Hbm ell(n, 1, mc.count), m(n, 1, mc.count);
  {
    SramTile zero = mc.tile(static_cast<std::size_t>(d)), neg = mc.tile(1);  // [d], [1]
    neg[0] = -std::numeric_limits<float>::infinity();
    for (int r = 0; r < n; ++r) {
      o.store(r, 1, 0, d, zero.data());
      ell.store(r, 1, 0, 1, zero.data());
      m.store(r, 1, 0, 1, neg.data());
    }
  }
  for (int j0 = 0; j0 < n; j0 += t.bc) {  // line 5: over the Tc = ⌈N/Bc⌉ key/value blocks
    const int bc = std::min(t.bc, n - j0);
    SramTile kj = mc.tile(static_cast<std::size_t>(bc) * d), vj = mc.tile(static_cast<std::size_t>(bc) * d);  // [Bc, d]
    k.load(j0, bc, 0, d, kj.data());  // line 6
    v.load(j0, bc, 0, d, vj.data());
    for (int i0 = 0; i0 < n; i0 += t.br) {  // line 7: over the Tr = ⌈N/Br⌉ query blocks
      const int br = std::min(t.br, n - i0);
      SramTile qi = mc.tile(static_cast<std::size_t>(br) * d), oi = mc.tile(static_cast<std::size_t>(br) * d);  // [Br, d]
      SramTile li = mc.tile(static_cast<std::size_t>(br)), mi = mc.tile(static_cast<std::size_t>(br));          // [Br]
      q.load(i0, br, 0, d, qi.data());  // line 8
      o.load(i0, br, 0, d, oi.data());
      ell.load(i0, br, 0, 1, li.data());
      m.load(i0, br, 0, 1, mi.data());
      SramTile sij = mc.tile(static_cast<std::size_t>(br) * bc);  // [Br, Bc]: S_ij, then P̃_ij in place
      SramTile row = mc.tile(static_cast<std::size_t>(d));        // [d]: one row of P̃_ij V_j
      for (int r = 0; r < br; ++r) {
        float* s_row = sij.data() + static_cast<std::size_t>(r) * bc;
        for (int c = 0; c < bc; ++c) {  // line 9: S_ij = Q_i K_jᵀ
          float dot = 0;
          for (int e = 0; e < d; ++e) dot += qi[static_cast<std::size_t>(r) * d + e] * kj[static_cast<std::size_t>(c) * d + e];
          s_row[c] = dot * scale;
        }
        const float m_tilde = *std::max_element(s_row, s_row + bc);  // line 10
        float l_tilde = 0;
        for (int c = 0; c < bc; ++c) l_tilde += (s_row[c] = std::exp(s_row[c] - m_tilde));
        const float m_new = std::max(mi[static_cast<std::size_t>(r)], m_tilde);  // line 11
        const float old_w = std::exp(mi[static_cast<std::size_t>(r)] - m_new), new_w = std::exp(m_tilde - m_new);
        const float l_new = old_w * li[static_cast<std::size_t>(r)] + new_w * l_tilde;
        std::fill(row.data(), row.data() + d, 0.0f);
        for (int c = 0; c < bc; ++c)
          for (int e = 0; e < d; ++e) row[static_cast<std::size_t>(e)] += s_row[c] * vj[static_cast<std::size_t>(c) * d + e];
        for (int e = 0; e < d; ++e) {  // line 12
          float& out = oi[static_cast<std::size_t>(r) * d + e];
          out = (li[static_cast<std::size_t>(r)] * old_w * out + new_w * row[static_cast<std::size_t>(e)]) / l_new;
        }
        li[static_cast<std::size_t>(r)] = l_new;  // line 13
        mi[static_cast<std::size_t>(r)] = m_new;
      }
      o.store(i0, br, 0, d, oi.data());  // lines 12-13: write O_i, ℓ_i, m_i back
      ell.store(i0, br, 0, 1, li.data());
      m.store(i0, br, 0, 1, mi.data());
    }
  }
}

}  // namespace

AttentionIoAlgorithm parse_attention_io_algorithm(const std::string& name, const std::string& where) {
  if (name == "standard") return AttentionIoAlgorithm::kStandard;
  if (name == "flash") return AttentionIoAlgorithm::kFlash;
  throw Error(where + ": attention IO algorithm '" + name + "'; allowed: standard, flash");
}

FlashTiles flash_tiles(std::size_t sram_elements, int head_dim) {
  FlashTiles t;
  const std::size_t four_d = 4 * static_cast<std::size_t>(head_dim);
  t.bc = static_cast<int>((sram_elements + four_d - 1) / four_d);
  t.br = std::min(t.bc, head_dim);
  return t;
}

AttentionIoCount attention_io_run(AttentionIoAlgorithm algorithm, int n, int d, std::size_t sram_elements,
                                  std::span<const float> q, std::span<const float> k, std::span<const float> v,
                                  std::span<float> out) {
  check(n > 0 && d > 0, "attention_io_run: N and d must be > 0");
  check(sram_elements >= static_cast<std::size_t>(d),
        "attention_io_run: SRAM of " + std::to_string(sram_elements) + " elements < d = " + std::to_string(d) +
            "; allowed: d <= M");
  const std::size_t nd = static_cast<std::size_t>(n) * d;
  check(q.size() == nd && k.size() == nd && v.size() == nd && out.size() == nd,
        "attention_io_run: q, k, v and out must each hold N·d elements");
  Machine mc;
  mc.m = sram_elements;
  Hbm hq(n, d, mc.count), hk(n, d, mc.count), hv(n, d, mc.count), ho(n, d, mc.count);  // [N, d] each
  std::copy(q.begin(), q.end(), hq.raw().begin());
  std::copy(k.begin(), k.end(), hk.raw().begin());
  std::copy(v.begin(), v.end(), hv.raw().begin());
  if (algorithm == AttentionIoAlgorithm::kStandard) standard_attention(mc, hq, hk, hv, ho);
  else flash_attention(mc, hq, hk, hv, ho);
  std::copy(ho.raw().begin(), ho.raw().end(), out.begin());
  return mc.count;
}

AttentionIoFit fit_attention_io(AttentionIoAlgorithm algorithm, const AttentionIoGrid& g) {
  check(g.n_min > 0 && g.n_max >= g.n_min && g.d_min > 0 && g.d_max >= g.d_min && g.m_min > 0 && g.m_max >= g.m_min,
        "fit_attention_io: the grid needs 0 < min <= max for N, d and M");
  std::vector<double> log_n, log_d, log_m, log_io, log_bound;
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  for (int n = g.n_min; n <= g.n_max; n *= 2)
    for (int d = g.d_min; d <= g.d_max; d *= 2)
      for (std::size_t m = g.m_min; m <= g.m_max; m *= 2) {
        const double nn = n, dd = d, mm = static_cast<double>(m);
        // The theorem's range d <= M <= N·d. For the standard algorithm also d² <= M: below
        // that even S = QKᵀ cannot be tiled with Θ(N²) traffic (a matmul moves Θ(N²d/√M)),
        // which the theorem's count takes for granted (real SRAMs hold several d × d tiles).
        const double m_floor = algorithm == AttentionIoAlgorithm::kStandard ? dd * dd : dd;
        if (mm < m_floor || mm > nn * dd) continue;
        std::vector<float> q(static_cast<std::size_t>(n) * d), k(q.size()), v(q.size()), out(q.size());  // [N, d]
        for (auto* x : {&q, &k, &v})
          for (float& e : *x) e = uni(rng);
        const AttentionIoCount c = attention_io_run(algorithm, n, d, m, q, k, v, out);
        log_n.push_back(std::log(nn));
        log_d.push_back(std::log(dd));
        log_m.push_back(std::log(mm));
        log_io.push_back(std::log(c.hbm_accesses()));
        log_bound.push_back(std::log(algorithm == AttentionIoAlgorithm::kStandard ? nn * dd + nn * nn : nn * nn * dd * dd / mm));
      }
  const int points = static_cast<int>(log_io.size());
  check(points >= 6, "fit_attention_io: only " + std::to_string(points) +
                         " grid points lie in the theorem's range of M; widen the grid (at least 6, spanning N, d and M)");
  Eigen::MatrixXd x(points, 4);
  Eigen::VectorXd y(points), xb(points);
  for (int i = 0; i < points; ++i) {
    x.row(i) << 1.0, log_n[static_cast<std::size_t>(i)], log_d[static_cast<std::size_t>(i)], log_m[static_cast<std::size_t>(i)];
    y(i) = log_io[static_cast<std::size_t>(i)];
    xb(i) = log_bound[static_cast<std::size_t>(i)];
  }
  const Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(x);
  check(qr.rank() == 4, "fit_attention_io: the grid does not vary N, d and M independently; widen it");
  const Eigen::VectorXd beta = qr.solve(y);
  AttentionIoFit fit;
  fit.exp_n = beta(1);
  fit.exp_d = beta(2);
  fit.exp_m = beta(3);
  fit.points = points;
  const double mb = xb.mean(), my = y.mean();
  const double var = (xb.array() - mb).square().sum();
  check(var > 0, "fit_attention_io: the theorem's bound does not vary over the grid");
  fit.bound_slope = ((xb.array() - mb) * (y.array() - my)).sum() / var;
  return fit;
}

}  // namespace inferlab
