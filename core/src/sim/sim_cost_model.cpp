// The calibrated step cost model (see inferlab/sim/sim_cost_model.h): batch features, the
// non-negative least-squares fit, the TOML data file, and timing a real executor over a grid.
#include "inferlab/sim/sim_cost_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <numeric>
#include <sstream>

// GCC 12 reports a false maybe-uninitialized inside Eigen's AVX-512 kernels (GCC bug 105593),
// and, in a portable (-DINFERLAB_NATIVE=OFF, SSE2) build, a false use-after-free in Eigen's
// aligned_free as a vector's destructor is inlined into fit_nonnegative.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuse-after-free"
#endif
#include <Eigen/Dense>
#include "inferlab/experiment/tomlpp.h"

#include "inferlab/engine/engine.h"
#include "inferlab/error.h"
#include "inferlab/experiment/toml_input.h"
#include "inferlab/support/log.h"

namespace inferlab {

CostFeatures step_features(const StepBatch& batch) {
  double keys = 0, read = 0;
  for (int s = 0; s < batch.n_seqs(); ++s) {
    const double q = batch.query_start[static_cast<std::size_t>(s) + 1] - batch.query_start[static_cast<std::size_t>(s)];
    const double ctx = batch.context_len[static_cast<std::size_t>(s)];
    keys += q * ctx - q * (q - 1) / 2;  // row i of q attends to ctx - q + i + 1 keys
    read += ctx;
  }
  return {1.0, static_cast<double>(batch.rows()), keys, static_cast<double>(batch.logit_rows.size()), read};
}

double CalibratedStack::total(const CostFeatures& f) const {
  double t = 0;
  for (const CostFeatures& c : coef)
    for (int i = 0; i < kCostFeatures; ++i) t += c[static_cast<std::size_t>(i)] * f[static_cast<std::size_t>(i)];
  return t;
}

std::array<double, kTimeCategories> CalibratedStack::seconds(const StepBatch& batch) const {
  const CostFeatures f = step_features(batch);
  std::array<double, kTimeCategories> s{};
  for (std::size_t c = 0; c < s.size(); ++c) {
    for (std::size_t i = 0; i < f.size(); ++i) s[c] += coef[c][i] * f[i];
    s[c] = std::max(0.0, s[c]);
  }
  return s;
}

const CalibratedStack& CalibratedCostModel::stack(const std::string& attention, const std::string& quantization) const {
  std::string have;
  for (const CalibratedStack& s : stacks) {
    if (s.attention == attention && s.quantization == quantization) return s;
    have += (have.empty() ? "" : ", ") + s.attention + "+" + s.quantization;
  }
  throw Error("the calibrated cost model has no fit for attention '" + attention + "' + quantization '" + quantization +
              "' (it has: " + have + "); run inferlab calibrate on an experiment with that stack");
}

void CalibratedCostModel::check_model(const ModelConfig& m, const std::string& where) const {
  if (m.dim != dim || m.hidden_dim != hidden_dim || m.n_layers != n_layers || m.n_heads != n_heads ||
      m.n_kv_heads != n_kv_heads || m.vocab_size != vocab_size)
    throw Error(where + ": the calibrated cost model was measured on " + model + " (dim " + std::to_string(dim) + ", " +
                std::to_string(n_layers) + " layers, vocab " + std::to_string(vocab_size) + "), the experiment's model is " +
                m.name + " (dim " + std::to_string(m.dim) + ", " + std::to_string(m.n_layers) + " layers, vocab " +
                std::to_string(m.vocab_size) + "); calibrate on this model");
}

// ---- the fit ------------------------------------------------------------------------------

CostFeatures fit_nonnegative(const std::vector<CostFeatures>& x, const std::vector<double>& y, const std::vector<double>& w) {
  check(x.size() == y.size() && y.size() == w.size() && !y.empty(), "fit_nonnegative: sizes differ or no points");
  std::array<bool, kCostFeatures> active{};
  active.fill(true);
  CostFeatures c{};
  for (int round = 0; round < kCostFeatures; ++round) {
    std::vector<int> cols;
    for (int i = 0; i < kCostFeatures; ++i)
      if (active[static_cast<std::size_t>(i)]) cols.push_back(i);
    c.fill(0.0);
    if (cols.empty()) return c;
    // Columns scaled to unit norm so features of very different magnitudes (1 vs keys ~1e4)
    // condition the solve alike.
    Eigen::MatrixXd a(static_cast<Eigen::Index>(y.size()), static_cast<Eigen::Index>(cols.size()));
    Eigen::VectorXd b(static_cast<Eigen::Index>(y.size()));
    for (std::size_t r = 0; r < y.size(); ++r) {
      for (std::size_t j = 0; j < cols.size(); ++j)
        a(static_cast<Eigen::Index>(r), static_cast<Eigen::Index>(j)) = w[r] * x[r][static_cast<std::size_t>(cols[j])];
      b(static_cast<Eigen::Index>(r)) = w[r] * y[r];
    }
    Eigen::VectorXd scale = a.colwise().norm().transpose();
    for (Eigen::Index j = 0; j < scale.size(); ++j)
      if (scale(j) == 0) scale(j) = 1;
    const Eigen::MatrixXd scaled = a * scale.cwiseInverse().asDiagonal();
    Eigen::VectorXd sol = scaled.colPivHouseholderQr().solve(b);
    sol = sol.cwiseQuotient(scale);
    bool negative = false;
    for (std::size_t j = 0; j < cols.size(); ++j) {
      const double v = sol(static_cast<Eigen::Index>(j));
      c[static_cast<std::size_t>(cols[j])] = v;
      if (v < 0) negative = true;
    }
    if (!negative) return c;
    // Drop the most negative feature (relative to its column's scale) and refit.
    std::size_t worst = 0;
    double worst_v = 0;
    for (std::size_t j = 0; j < cols.size(); ++j) {
      const double v = sol(static_cast<Eigen::Index>(j)) * scale(static_cast<Eigen::Index>(j));
      if (v < worst_v) worst_v = v, worst = j;
    }
    active[static_cast<std::size_t>(cols[worst])] = false;
  }
  c.fill(0.0);
  return c;
}

// ---- the data file ------------------------------------------------------------------------

void write_cost_model(const std::string& path, const CalibratedCostModel& m) {
  std::ofstream out(path);
  if (!out) throw Error("calibrate: cannot write " + path);
  out << std::setprecision(9);
  out << "# inferlab calibrated step cost model (inferlab calibrate; docs/simulation.md).\n"
      << "# Per stack and time category: seconds = sum over the features below of coef_<category>[i] x feature[i].\n"
      << "# Use it with [device] kind = \"sim\", profile = \"calibrated:<this file>\".\n"
      << "[calibrated]\nmodel = \"" << m.model << "\"\ndim = " << m.dim << "\nhidden_dim = " << m.hidden_dim
      << "\nn_layers = " << m.n_layers << "\nn_heads = " << m.n_heads << "\nn_kv_heads = " << m.n_kv_heads
      << "\nvocab_size = " << m.vocab_size << "\nthreads = " << m.threads << "\nmachine = \"" << m.machine
      << "\"\nclock = \"" << m.clock << "\"\nfeatures = [";
  for (int i = 0; i < kCostFeatures; ++i) out << (i ? ", " : "") << '"' << kCostFeatureNames[static_cast<std::size_t>(i)] << '"';
  out << "]\n";
  for (const CalibratedStack& s : m.stacks) {
    out << "\n[[stack]]\nattention = \"" << s.attention << "\"\nquantization = \"" << s.quantization
        << "\"\nkv_bytes_per_token = " << s.kv_bytes_per_token << "\nweight_bytes = " << s.weight_bytes
        << "\nblock_copy_s = " << s.block_copy_s
        << "\npoints = " << s.points << "\nfit_rms_rel_error = " << s.fit_rms_rel_error << "\n";
    for (int c = 0; c < kTimeCategories; ++c) {
      out << "coef_" << time_category_name(static_cast<TimeCategory>(c)) << " = [";
      for (int i = 0; i < kCostFeatures; ++i) out << (i ? ", " : "") << s.coef[static_cast<std::size_t>(c)][static_cast<std::size_t>(i)];
      out << "]\n";
    }
  }
  if (!out) throw Error("calibrate: error writing " + path);
}

namespace {

std::string at(const std::string& path, const toml::node& n) {
  return path + ":" + std::to_string(n.source().begin.line);
}

double number(const std::string& path, const toml::table& t, const std::string& key, const std::string& section) {
  const toml::node* n = t.get(key);
  if (n == nullptr) throw Error(path + ": " + section + " needs '" + key + "'");
  if (auto v = n->value<double>()) return *v;
  throw Error(at(path, *n) + ": " + section + " '" + key + "' must be a number");
}

std::string text(const std::string& path, const toml::table& t, const std::string& key, const std::string& section) {
  const toml::node* n = t.get(key);
  if (n == nullptr) throw Error(path + ": " + section + " needs '" + key + "'");
  if (auto v = n->value<std::string>()) return *v;
  throw Error(at(path, *n) + ": " + section + " '" + key + "' must be a string");
}

}  // namespace

CalibratedCostModel read_cost_model(const std::string& path) {
  const toml::table root = parse_toml_file(path, "a calibrated cost model TOML file");
  const toml::table* head = root["calibrated"].as_table();
  if (head == nullptr) throw Error(path + ": not a calibrated cost model (no [calibrated] table; write one with inferlab calibrate)");
  CalibratedCostModel m;
  const std::string h = "[calibrated]";
  m.model = text(path, *head, "model", h);
  m.machine = text(path, *head, "machine", h);
  m.clock = text(path, *head, "clock", h);
  if (m.clock != "wall" && m.clock != "thread-cpu") throw Error(path + ": [calibrated] clock = \"" + m.clock + "\"; allowed: wall, thread-cpu");
  m.dim = static_cast<int>(number(path, *head, "dim", h));
  m.hidden_dim = static_cast<int>(number(path, *head, "hidden_dim", h));
  m.n_layers = static_cast<int>(number(path, *head, "n_layers", h));
  m.n_heads = static_cast<int>(number(path, *head, "n_heads", h));
  m.n_kv_heads = static_cast<int>(number(path, *head, "n_kv_heads", h));
  m.vocab_size = static_cast<int>(number(path, *head, "vocab_size", h));
  m.threads = static_cast<int>(number(path, *head, "threads", h));
  const toml::array* feats = (*head)["features"].as_array();
  bool same = feats != nullptr && feats->size() == kCostFeatures;
  for (std::size_t i = 0; same && i < feats->size(); ++i)
    same = (*feats)[i].value<std::string>() == std::string(kCostFeatureNames[i]);
  if (!same) {
    std::string want;
    for (const char* f : kCostFeatureNames) want += std::string(want.empty() ? "" : ", ") + '"' + f + '"';
    throw Error((feats != nullptr ? at(path, *feats) : at(path, *head)) + ": [calibrated] features must be [" + want +
                "] (a file written by an older inferlab has fewer: run inferlab calibrate again)");
  }
  const toml::array* stacks = root["stack"].as_array();
  if (stacks == nullptr || stacks->empty()) throw Error(path + ": no [[stack]] tables");
  for (const toml::node& node : *stacks) {
    const toml::table* t = node.as_table();
    if (t == nullptr) throw Error(at(path, node) + ": [[stack]] entries must be tables");
    CalibratedStack s;
    const std::string sec = "[[stack]] at line " + std::to_string(node.source().begin.line);
    s.attention = text(path, *t, "attention", sec);
    s.quantization = text(path, *t, "quantization", sec);
    s.kv_bytes_per_token = number(path, *t, "kv_bytes_per_token", sec);
    s.weight_bytes = number(path, *t, "weight_bytes", sec);
    s.block_copy_s = number(path, *t, "block_copy_s", sec);
    s.points = static_cast<int>(number(path, *t, "points", sec));
    s.fit_rms_rel_error = number(path, *t, "fit_rms_rel_error", sec);
    if (s.block_copy_s < 0) throw Error(path + ": " + sec + ": block_copy_s must be >= 0");
    if (s.kv_bytes_per_token <= 0) throw Error(path + ": " + sec + ": kv_bytes_per_token must be > 0");
    for (int c = 0; c < kTimeCategories; ++c) {
      const std::string name = std::string("coef_") + time_category_name(static_cast<TimeCategory>(c));
      const toml::node* n = t->get(name);
      if (n == nullptr) throw Error(path + ": " + sec + " needs '" + name + "' (" + std::to_string(kCostFeatures) + " coefficients)");
      const toml::array* a = n->as_array();
      if (a == nullptr || a->size() != kCostFeatures)
        throw Error(at(path, *n) + ": '" + name + "' must be an array of " + std::to_string(kCostFeatures) + " numbers");
      for (std::size_t i = 0; i < a->size(); ++i) {
        auto v = (*a)[i].value<double>();
        if (!v || !std::isfinite(*v) || *v < 0)
          throw Error(at(path, *n) + ": '" + name + "' coefficients must be finite numbers >= 0");
        s.coef[static_cast<std::size_t>(c)][i] = *v;
      }
    }
    m.stacks.push_back(std::move(s));
  }
  return m;
}

// ---- timing a real executor ---------------------------------------------------------------

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

CalibrationGrid clip_grid(CalibrationGrid g, const ModelConfig& m) {
  auto clip = [&](std::vector<int>& v, int hi) {
    std::erase_if(v, [&](int x) { return x < 1 || x > hi; });
    if (v.empty()) v.push_back(hi);
  };
  clip(g.prefill_tokens, m.max_seq_len);
  clip(g.context, m.max_seq_len);
  clip(g.decode_batch, 1 << 16);
  g.repeats = std::max(1, g.repeats);
  return g;
}

CalibratedStack calibrate_stack(StepExecutor& executor, Decoder& decoder, const CalibrationGrid& grid,
                                const std::function<double()>& clock) {
  const ModelConfig& cfg = executor.config();
  const int block_size = 16;
  int max_ctx = 1, max_batch = 1;
  for (int p : grid.prefill_tokens) max_ctx = std::max(max_ctx, p);
  for (int c : grid.context) max_ctx = std::max(max_ctx, c);
  for (int b : grid.decode_batch) max_batch = std::max(max_batch, b);
  const int blocks_per_seq = (max_ctx + block_size - 1) / block_size;
  KvCacheConfig kv;
  kv.block_size = block_size;
  kv.num_blocks = blocks_per_seq * max_batch;
  executor.prepare(kv);
  Device& device = executor.device();

  // The grid's batches: prefills (one sequence, logits of its last row) and decodes.
  std::vector<StepBatch> batches;
  std::vector<int> tokens;
  std::vector<int> table(static_cast<std::size_t>(blocks_per_seq));
  auto add = [&](StepBatch& b, int seq, int start, int n) {
    tokens.assign(static_cast<std::size_t>(n), 0);
    for (int i = 0; i < n; ++i) tokens[static_cast<std::size_t>(i)] = 3 + (seq * 131 + start + i * 7) % (cfg.vocab_size - 3);
    std::iota(table.begin(), table.end(), seq * blocks_per_seq);
    b.add_sequence(tokens, start, table, block_size, n - 1, n);
  };
  for (int p : grid.prefill_tokens) {
    StepBatch b;
    add(b, 0, 0, p);
    batches.push_back(std::move(b));
  }
  for (int bs : grid.decode_batch)
    for (int ctx : grid.context) {
      StepBatch b;
      for (int s = 0; s < bs; ++s) add(b, s, ctx - 1, 1);
      batches.push_back(std::move(b));
    }

  std::vector<float> logits;
  std::vector<int> out, prefix(1, 3);
  Rng rng(1);
  std::vector<CostFeatures> x;
  std::vector<std::array<double, kTimeCategories>> per_cat;
  std::vector<double> totals;
  auto time_once = [&](const StepBatch& b, std::array<double, kTimeCategories>& cat) {
    device.reset_op_times();
    const auto w0 = std::chrono::steady_clock::now();
    const double t0 = clock();
    executor.execute(b, {}, logits);
    {
      OpScope timed(device, TimeCategory::kSampling);
      for (std::size_t r = 0; r < b.logit_rows.size(); ++r) {
        out.clear();
        decoder.accept_for(static_cast<int>(r), prefix, {}, logits.data() + r * static_cast<std::size_t>(cfg.vocab_size),
                           cfg.vocab_size, rng, out);
      }
    }
    const double total = clock() - t0;
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
    // The op timers measure wall time; the split is theirs, scaled to the clock's total (the
    // same when the clock is the wall clock; a thread-CPU clock leaves out time preempted).
    const OpTimes& t = device.op_times();
    double timed = 0;
    for (int c = 0; c < kTimeCategories; ++c) {
      cat[static_cast<std::size_t>(c)] = t.seconds[static_cast<std::size_t>(c)];
      timed += t.seconds[static_cast<std::size_t>(c)];
    }
    cat[static_cast<std::size_t>(TimeCategory::kFramework)] += std::max(0.0, wall - timed);
    const double scale = total / std::max(wall, timed);
    for (double& x : cat) x *= scale;
    return total;
  };
  std::array<double, kTimeCategories> cat{};
  if (!batches.empty()) time_once(batches.back(), cat);  // warm-up: first-touch of the pool and scratch
  for (const StepBatch& b : batches) {
    // The repeat with the median total, and its split.
    std::vector<std::pair<double, std::array<double, kTimeCategories>>> runs;
    for (int r = 0; r < grid.repeats; ++r) {
      const double t = time_once(b, cat);
      runs.emplace_back(t, cat);
    }
    std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& c) { return a.first < c.first; });
    const auto& med = runs[runs.size() / 2];
    x.push_back(step_features(b));
    totals.push_back(med.first);
    per_cat.push_back(med.second);
  }

  CalibratedStack s;
  // Copy-on-write: the median of (a 1-row decode with `n` block copies) - (without), per copy.
  if (kv.num_blocks >= 2 && !grid.decode_batch.empty()) {
    const StepBatch& one = batches[grid.prefill_tokens.size()];  // the first decode batch
    std::vector<BlockCopy> copies;
    for (int i = 0; i + 1 < kv.num_blocks && i < 32; i += 2) copies.push_back({i + 1, i + 2 < kv.num_blocks ? i + 2 : i});
    std::vector<double> diffs;
    for (int r = 0; r < grid.repeats; ++r) {
      double t0 = clock();
      executor.execute(one, {}, logits);
      const double plain = clock() - t0;
      t0 = clock();
      executor.execute(one, copies, logits);
      diffs.push_back((clock() - t0 - plain) / static_cast<double>(copies.size()));
    }
    std::nth_element(diffs.begin(), diffs.begin() + static_cast<std::ptrdiff_t>(diffs.size() / 2), diffs.end());
    s.block_copy_s = std::max(0.0, diffs[diffs.size() / 2]);
  }
  s.points = static_cast<int>(x.size());
  s.weight_bytes = static_cast<double>(executor.weight_bytes());
  s.kv_bytes_per_token = static_cast<double>(executor.kv_bytes_per_block(block_size)) / block_size;
  // Relative errors matter (a decode step is ~100x cheaper than a long prefill and there are
  // many more of them): every point weighted by 1 / its measured total.
  std::vector<double> w(totals.size());
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 1.0 / std::max(totals[i], 1e-9);
  for (int c = 0; c < kTimeCategories; ++c) {
    std::vector<double> y(totals.size());
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = per_cat[i][static_cast<std::size_t>(c)];
    s.coef[static_cast<std::size_t>(c)] = fit_nonnegative(x, y, w);
  }
  double sq = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double e = (s.total(x[i]) - totals[i]) / totals[i];
    sq += e * e;
    std::ostringstream line;
    line << "calibrate: point";
    for (int f = 1; f < kCostFeatures; ++f) line << ' ' << kCostFeatureNames[static_cast<std::size_t>(f)] << '=' << x[i][static_cast<std::size_t>(f)];
    line << ": measured " << totals[i] * 1e3 << " ms, fit " << s.total(x[i]) * 1e3 << " ms (" << std::showpos << 100 * e
         << std::noshowpos << "%)";
    log::debug(line.str());
  }
  s.fit_rms_rel_error = std::sqrt(sq / static_cast<double>(x.size()));
  return s;
}

}  // namespace inferlab
