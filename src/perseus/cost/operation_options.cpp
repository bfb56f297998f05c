// Per-operation options (docs/solver.md, "Per-operation options"): quantise, Pareto-filter,
// subtract blocking energy, and fit cost(q) = a*exp(b*q) + c.
#include "perseus/cost/operation_options.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include <Eigen/Core>
#include <unsupported/Eigen/NonLinearOptimization>

#include "perseus/model/errors.hpp"

namespace perseus {

double ExpCost::operator()(double q) const { return a * std::exp(b * q) + c; }

std::size_t OperationOptions::option_for_duration(std::int64_t d) const {
  // Options are sorted slowest first: the first reference option with q <= d is the slowest
  // that fits.
  std::size_t fastest = options.size();
  for (std::size_t i = 0; i < options.size(); ++i) {
    if (!options[i].reference) continue;
    if (options[i].q <= d) return i;
    fastest = i;
  }
  return fastest;
}

std::int64_t OperationOptions::min_q() const {
  for (auto it = options.rbegin(); it != options.rend(); ++it) {
    if (it->reference) return it->q;
  }
  return 0;
}

std::int64_t OperationOptions::max_q() const {
  for (const Option& o : options) {
    if (o.reference) return o.q;
  }
  return 0;
}

std::size_t OperationOptions::num_reference_options() const {
  return static_cast<std::size_t>(std::count_if(options.begin(), options.end(), [](const Option& o) { return o.reference; }));
}

double OperationOptions::fitted_cost(std::int64_t d) const { return cost(static_cast<double>(d)); }

namespace {

// The number of options, slowest first, for which `before(time)` holds, for a predicate that
// holds on a prefix of them (the first for which it does not; options.size() if it always
// does). A binary search whose comparisons move the base without a branch (by half or by
// nothing), so a mispredicted comparison costs nothing: the sweeps round every node of every
// far point, and branching searches there were 8% of a 1,536-node frontier's CPU time.
template <class Before>
std::size_t prefix_where(const std::vector<Option>& options, Before before) {
  if (options.empty()) return 0;
  const Option* base = options.data();
  std::size_t length = options.size();
  while (length > 1) {
    const std::size_t half = length / 2;
    base += before(base[half - 1].measurement.time_s) ? half : 0;
    length -= half;
  }
  return static_cast<std::size_t>(base - options.data()) + (before(base->measurement.time_s) ? 1 : 0);
}

// The first option no slower than t (options.size() when every one is slower).
std::size_t first_within(const std::vector<Option>& options, double t) {
  return prefix_where(options, [t](double x) { return x > t; });
}

}  // namespace

OperationOptions::Bracket OperationOptions::bracket(double duration_s, double tolerance_s) const {
  // Binary searches over the options, slowest first (times non-increasing): a linear scan
  // was 4-5% of the frontier's CPU time on 768-1,536 nodes, where every rounding of a
  // relaxation brackets every node among its 30-100 options. Among options of equal time
  // the first is taken, as a scan would.
  if (options.empty()) return {0, 0};
  const std::int32_t down = round_down(duration_s, tolerance_s);
  if (std::isnan(duration_s)) return {down, 0};  // the fastest
  // Options no faster than duration - tolerance come before the first faster one; of them
  // the last is the fastest.
  const double floor_s = duration_s - tolerance_s;
  const std::size_t no_faster = prefix_where(options, [floor_s](double x) { return x >= floor_s; });
  const std::size_t up = no_faster == 0 ? 0 : first_within(options, options[no_faster - 1].measurement.time_s);
  return {down, static_cast<std::int32_t>(up)};
}

std::int32_t OperationOptions::round_down(double duration_s, double tolerance_s) const {
  const std::size_t n = options.size();
  if (n == 0) return 0;
  const std::size_t down = std::isnan(duration_s) ? n : first_within(options, duration_s + tolerance_s);
  if (down < n) return static_cast<std::int32_t>(down);
  return static_cast<std::int32_t>(first_within(options, options.back().measurement.time_s));  // the fastest
}

std::vector<HullPoint> effective_energy_hull(const OperationOptions& operation, double p_blocking, double time_unit_s) {
  std::vector<HullPoint> points;
  for (const Option& option : operation.options) {
    const Measurement& m = option.measurement;
    const double time_s =
        time_unit_s > 0 ? static_cast<double>(std::max<std::int64_t>(1, std::llround(m.time_s / time_unit_s))) * time_unit_s
                        : m.time_s;
    points.push_back({time_s, m.energy_j - p_blocking * m.time_s});
  }
  std::sort(points.begin(), points.end(), [](const HullPoint& a, const HullPoint& b) {
    return a.time_s != b.time_s ? a.time_s < b.time_s : a.effective_j < b.effective_j;
  });
  std::vector<HullPoint> hull;
  for (const HullPoint& p : points) {
    if (!hull.empty() && hull.back().time_s == p.time_s) continue;  // the cheaper came first
    if (!hull.empty() && p.effective_j >= hull.back().effective_j) continue;  // slower and dearer
    while (hull.size() >= 2) {
      const HullPoint& a = hull[hull.size() - 2];
      const HullPoint& b = hull.back();
      const double cross = (b.time_s - a.time_s) * (p.effective_j - a.effective_j) -
                           (b.effective_j - a.effective_j) * (p.time_s - a.time_s);
      if (cross > 0) break;  // b stays below the chord from a to p
      hull.pop_back();
    }
    hull.push_back(p);
  }
  return hull;
}

std::vector<std::int32_t> hull_corner_options(const OperationOptions& operation, double p_blocking) {
  std::vector<std::int32_t> corners;
  const std::vector<Option>& options = operation.options;
  const auto effective = [&](std::size_t k) {
    return options[k].measurement.energy_j - p_blocking * options[k].measurement.time_s;
  };
  for (const HullPoint& corner : effective_energy_hull(operation, p_blocking)) {
    std::int32_t chosen = -1;
    for (std::size_t k = 0; k < options.size(); ++k) {
      if (options[k].measurement.time_s != corner.time_s) continue;
      if (chosen < 0 || effective(k) < effective(static_cast<std::size_t>(chosen))) chosen = static_cast<std::int32_t>(k);
    }
    corners.push_back(chosen);  // the hull's corners are options' own points: always found
  }
  return corners;
}

// CPython's float_floor_div (Objects/floatobject.c): floor division through fmod, which is
// what `time // unit_time` computes in the reference.
double python_floordiv(double a, double b) {
  if (b == 0.0) throw InputError("python_floordiv: division by zero");
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0) {
    if ((b < 0) != (mod < 0)) div -= 1.0;
  }
  double floordiv = 0.0;
  if (div != 0.0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, a / b);
  }
  return floordiv;
}

namespace {

constexpr double kDurationLimit = 9.0e15;  // q stays exactly representable as a double
// Shape checks on measured effective energy, as fractions of its range over the options.
// From noise alone, the bundled real profiles put points up to 10% of the range above their
// convex hull and fit with RMS errors up to 7%; the clearly broken ones exceed 20%.
constexpr double kConvexityTolerance = 0.15;
constexpr double kMonotonicityTolerance = 1e-3;
constexpr double kPoorFitTolerance = 0.1;

// A number for a message, to 6 significant digits ("0.0001", "83.64", "4.38471").
std::string number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.6g", value);
  return buffer;
}

std::string operation_name(const std::string& source, int stage, InstructionKind kind) {
  return source + ": stage " + std::to_string(stage) + " " + std::string(to_string(kind));
}

bool is_compute(InstructionKind kind) {
  return kind == InstructionKind::kForward || kind == InstructionKind::kBackward ||
         kind == InstructionKind::kRecompute;
}

struct Candidate {
  const Measurement* measurement;
  std::int64_t q;
};

struct Filtered {
  std::vector<Candidate> options;  // one per q, q descending
  std::size_t pareto_count = 0;    // survivors of the Pareto step, before one-per-q
};

// The reference's CandidateExecutionOptions with a noise factor. Python's sort is stable,
// hence stable_sort everywhere: ties keep the reference's order.
Filtered pareto_filter(const std::vector<Candidate>& all, double noise) {
  std::vector<Candidate> by_time = all;
  std::stable_sort(by_time.begin(), by_time.end(), [](const Candidate& x, const Candidate& y) {
    return x.measurement->time_s > y.measurement->time_s;
  });
  std::vector<Candidate> pareto;
  for (const Candidate& o : by_time) {
    const bool dominated = std::any_of(by_time.begin(), by_time.end(), [&](const Candidate& other) {
      return other.measurement->time_s < o.measurement->time_s * noise &&
             other.measurement->energy_j < o.measurement->energy_j * noise;
    });
    if (!dominated) pareto.push_back(o);
  }
  Filtered result;
  result.pareto_count = pareto.size();
  // Of several options with one q keep the most energetic: its real time is closest to q.
  std::stable_sort(pareto.begin(), pareto.end(), [](const Candidate& x, const Candidate& y) {
    return x.measurement->energy_j > y.measurement->energy_j;
  });
  for (const Candidate& o : pareto) {
    const bool seen = std::any_of(result.options.begin(), result.options.end(),
                                  [&](const Candidate& kept) { return kept.q == o.q; });
    if (!seen) result.options.push_back(o);
  }
  std::stable_sort(result.options.begin(), result.options.end(),
                   [](const Candidate& x, const Candidate& y) { return x.q > y.q; });
  return result;
}

// Residuals f(x) - y of cost(q) = a*exp(b*q) + c, the same sign as scipy's curve_fit.
struct ExpResiduals {
  const std::vector<double>& q;
  const std::vector<double>& e;

  int values() const { return static_cast<int>(q.size()); }

  int operator()(const Eigen::VectorXd& x, Eigen::VectorXd& fvec) const {
    for (std::size_t i = 0; i < q.size(); ++i) {
      fvec[static_cast<Eigen::Index>(i)] = x[0] * std::exp(x[1] * q[i]) + x[2] - e[i];
    }
    return 0;
  }

  // Forward differences exactly as MINPACK's fdjac2 (what scipy's leastsq/lmdif uses):
  // step sqrt(machine epsilon) * |x_j|, or sqrt(epsilon) when x_j == 0. Returns the number
  // of function evaluations so that Eigen counts them against maxfev as lmdif does.
  int df(const Eigen::VectorXd& x, Eigen::MatrixXd& fjac) const {
    const double eps = std::sqrt(std::numeric_limits<double>::epsilon());
    Eigen::VectorXd f0(values()), f1(values());
    (*this)(x, f0);
    Eigen::VectorXd xh = x;
    for (Eigen::Index j = 0; j < x.size(); ++j) {
      double h = eps * std::abs(x[j]);
      if (h == 0.0) h = eps;
      xh[j] = x[j] + h;
      (*this)(xh, f1);
      xh[j] = x[j];
      fjac.col(j) = (f1 - f0) / h;
    }
    return static_cast<int>(x.size());
  }
};

double mean_squared_error(const ExpCost& cost, const std::vector<double>& q, const std::vector<double>& e) {
  double sum = 0.0;
  for (std::size_t i = 0; i < q.size(); ++i) {
    const double r = e[i] - cost(q[i]);
    sum += r * r;
  }
  return sum / static_cast<double>(q.size());
}

struct FitOutcome {
  std::optional<ExpCost> cost;
  double mse = 0.0;
  int converged = 0;  // starts that converged at all, whatever the sign of a and b
};

// One Levenberg-Marquardt run from `start`; nullopt unless MINPACK reports convergence with
// a non-singular final Jacobian (the reference skips fits whose covariance is infinite).
std::optional<ExpCost> fit_from(const ExpResiduals& residuals, const std::array<double, 3>& start) {
  Eigen::VectorXd x(3);
  x << start[0], start[1], start[2];
  ExpResiduals functor = residuals;
  Eigen::LevenbergMarquardt<ExpResiduals> lm(functor);
  // scipy.optimize.leastsq defaults as curve_fit calls them (maxfev=50000 in the reference).
  lm.parameters.ftol = 1.49012e-08;
  lm.parameters.xtol = 1.49012e-08;
  lm.parameters.gtol = 0.0;
  lm.parameters.factor = 100.0;
  lm.parameters.maxfev = 50000;
  const auto status = lm.minimize(x);
  using Space = Eigen::LevenbergMarquardtSpace::Status;
  if (status != Space::RelativeReductionTooSmall && status != Space::RelativeErrorTooSmall &&
      status != Space::RelativeErrorAndReductionTooSmall && status != Space::CosinusTooSmall) {
    return std::nullopt;
  }
  if (!x.allFinite()) return std::nullopt;
  for (Eigen::Index j = 0; j < 3; ++j) {
    const double r = lm.fjac(j, j);
    if (r == 0.0 || !std::isfinite(r)) return std::nullopt;
  }
  return ExpCost{x[0], x[1], x[2]};
}

// Nonlinear least squares with Eigen's Levenberg-Marquardt. Eigen's unsupported module is a
// port of MINPACK's lmder/lmdif, the algorithm scipy's curve_fit (leastsq) runs in the
// reference: same trust-region step control, scaling and stopping tests. With scipy's
// tolerances and MINPACK's forward differences, the same starts reach the same minima. Eigen
// factorises with its own column-pivoting QR where MINPACK has qrfac, so end points agree to
// the stopping tolerance (about 1e-6 relative in a), not bit for bit.
FitOutcome fit_exponential(const std::vector<double>& q, const std::vector<double>& e, double unit_time) {
  const ExpResiduals residuals{q, e};
  FitOutcome outcome;
  auto consider = [&](const std::array<double, 3>& start) {
    const std::optional<ExpCost> fit = fit_from(residuals, start);
    if (!fit) return;
    ++outcome.converged;
    if (!(fit->a >= 0.0 && fit->b <= 0.0)) return;  // energy must not rise with time
    const double mse = mean_squared_error(*fit, q, e);
    if (!std::isfinite(mse)) return;
    if (!outcome.cost || mse < outcome.mse) {
      outcome.cost = fit;
      outcome.mse = mse;
    }
  };
  // The reference's 54 starting points, in itertools.product order (ties keep the first).
  for (double a : {1e1, 1e2, 1e3}) {
    for (double k : {0.01, 0.02, 0.03, 0.04, 0.05, 0.1}) {
      const double b = -k * unit_time / 0.001;
      for (double c : {1e1, 1e2, 1e3}) consider({a, b, c});
    }
  }
  if (!outcome.cost) {
    // The grid assumes energies of tens to thousands of Joules; try a start read off the data
    // (rise over the measured span, one e-folding across it) before giving up.
    const auto [lo, hi] = std::minmax_element(e.begin(), e.end());
    const double b = -1.0 / std::max(1.0, q.front() - q.back());
    const double a = std::max(*hi - *lo, 1e-9) / std::exp(b * q.back());
    if (std::isfinite(a)) consider({a, b, *lo});
  }
  return outcome;
}

double energy_range(const std::vector<Option>& options) {
  const auto [lo, hi] = std::minmax_element(options.begin(), options.end(), [](const Option& x, const Option& y) {
    return x.effective_energy < y.effective_energy;
  });
  return hi->effective_energy - lo->effective_energy;
}

// Does effective energy fall, and fall ever more slowly, as q grows? Deviations within the
// tolerances above are measurement noise and not reported.
std::optional<std::string> shape_problem(const std::vector<Option>& options) {
  const double range = energy_range(options);
  // options are q descending: options[k] is slower than options[k + 1].
  for (std::size_t k = 0; k + 1 < options.size(); ++k) {
    const Option& slower = options[k];
    const Option& faster = options[k + 1];
    if (slower.effective_energy > faster.effective_energy + kMonotonicityTolerance * range) {
      return "effective energy rises from " + number(faster.effective_energy) + " J at q=" +
             std::to_string(faster.q) + " to " + number(slower.effective_energy) + " J at q=" +
             std::to_string(slower.q) + " (not decreasing with time)";
    }
  }
  // Convex data lie on their lower convex hull; measure how far each point sits above it.
  std::vector<const Option*> hull;  // walking from the fastest option to the slowest
  auto cross = [](const Option* o, const Option* a, const Option* b) {
    return static_cast<double>(a->q - o->q) * (b->effective_energy - o->effective_energy) -
           (a->effective_energy - o->effective_energy) * static_cast<double>(b->q - o->q);
  };
  for (auto it = options.rbegin(); it != options.rend(); ++it) {
    while (hull.size() >= 2 && cross(hull[hull.size() - 2], hull.back(), &*it) <= 0.0) hull.pop_back();
    hull.push_back(&*it);
  }
  std::size_t segment = 0;
  const Option* worst = nullptr;
  double worst_above = 0.0;
  for (auto it = options.rbegin(); it != options.rend(); ++it) {
    while (segment + 2 < hull.size() && hull[segment + 1]->q <= it->q) ++segment;
    const Option& left = *hull[segment];
    const Option& right = *hull[std::min(segment + 1, hull.size() - 1)];
    const double t = right.q == left.q ? 0.0 : static_cast<double>(it->q - left.q) / static_cast<double>(right.q - left.q);
    const double above = it->effective_energy - (left.effective_energy + t * (right.effective_energy - left.effective_energy));
    if (above > worst_above) {
      worst_above = above;
      worst = &*it;
    }
  }
  if (worst && worst_above > kConvexityTolerance * range) {
    return "effective energy at q=" + std::to_string(worst->q) + " lies " + number(worst_above) +
           " J above the convex hull of the measurements (not convex)";
  }
  return std::nullopt;
}

// Two points determine no unique a*exp(b*q)+c: fix b = -1/q_slow (mild curvature, |b*q| <= 1
// so nothing overflows) and solve a and c exactly.
ExpCost through_two_points(const Option& slow, const Option& fast) {
  const double b = -1.0 / static_cast<double>(std::max<std::int64_t>(slow.q, 1));
  const double es = std::exp(b * static_cast<double>(slow.q));
  const double ef = std::exp(b * static_cast<double>(fast.q));
  const double a = (fast.effective_energy - slow.effective_energy) / (ef - es);
  return {a, b, slow.effective_energy - a * es};
}

void warn(std::vector<Warning>* warnings, std::string message) {
  if (warnings) warnings->push_back({std::move(message)});
}

// Warnings about operations, "SOURCE: stage S KIND" and what follows, gathered so that one
// text of one kind on several stages becomes one warning naming them ("stages 0-6"), in the
// order each text first came.
class StageWarnings {
 public:
  explicit StageWarnings(std::string source) : source_(std::move(source)) {}
  void add(int stage, InstructionKind kind, std::string text) {
    auto key = std::pair(kind, std::move(text));
    auto [at, added] = index_.emplace(key, entries_.size());
    if (added) entries_.push_back({std::move(key), {}});
    entries_[at->second].stages.push_back(stage);
  }
  void emit(std::vector<Warning>* warnings) const {
    for (const Entry& e : entries_) {
      const std::string name =
          e.stages.size() == 1 ? operation_name(source_, e.stages[0], e.key.first)
                               : source_ + ": stages " + ranges(e.stages) + " " + std::string(to_string(e.key.first));
      warn(warnings, name + e.key.second);
    }
  }

 private:
  // Ascending stage numbers as "0-6", "0, 2, 5" or "0-2, 7".
  static std::string ranges(std::vector<int> stages) {
    std::sort(stages.begin(), stages.end());
    std::string out;
    for (std::size_t i = 0; i < stages.size();) {
      std::size_t j = i;
      while (j + 1 < stages.size() && stages[j + 1] == stages[j] + 1) ++j;
      if (!out.empty()) out += ", ";
      out += std::to_string(stages[i]);
      if (j > i) out += (j == i + 1 ? ", " : "-") + std::to_string(stages[j]);
      i = j + 1;
    }
    return out;
  }
  struct Entry {
    std::pair<InstructionKind, std::string> key;
    std::vector<int> stages;
  };
  std::string source_;
  std::vector<Entry> entries_;
  std::map<std::pair<InstructionKind, std::string>, std::size_t> index_;
};

}  // namespace

std::map<std::pair<int, InstructionKind>, ExpCost> read_cost_overrides(const std::filesystem::path& path) {
  static constexpr std::array<std::string_view, 5> kRequired = {"instruction", "stage", "a", "b", "c"};
  const csv::Table table = csv::parse(csv::read_file(path), path.string(), kRequired);
  const int instruction_col = table.column("instruction");
  const int stage_col = table.column("stage");
  const std::array<int, 3> coefficient_cols = {table.column("a"), table.column("b"), table.column("c")};
  std::map<std::pair<int, InstructionKind>, ExpCost> overrides;
  std::map<std::pair<int, InstructionKind>, int> first_line;
  for (const csv::Row& row : table.rows) {
    const std::optional<InstructionKind> kind = parse_instruction_kind(row.fields[instruction_col]);
    if (!kind) {
      throw InputError(table.field_error(row, instruction_col,
                                         "one of forward, backward, recompute, load, communication"));
    }
    const auto stage = static_cast<int>(
        csv::parse_integer(table, row, stage_col, 0, 1 << 20, "a non-negative integer stage index"));
    const ExpCost cost{csv::parse_finite(table, row, coefficient_cols[0]),
                       csv::parse_finite(table, row, coefficient_cols[1]),
                       csv::parse_finite(table, row, coefficient_cols[2])};
    if (auto [it, inserted] = first_line.emplace(std::pair(stage, *kind), row.line); !inserted) {
      throw InputError(table.source + ":" + std::to_string(row.line) + ": column 'stage': duplicate coefficients for stage " +
                       std::to_string(stage) + " " + std::string(to_string(*kind)) + " (first on line " +
                       std::to_string(it->second) + ")");
    }
    overrides[{stage, *kind}] = cost;
  }
  if (overrides.empty()) {
    throw InputError(table.source + ":" + std::to_string(table.header_line) +
                     ": no coefficient rows after the header; expected rows of instruction,stage,a,b,c");
  }
  return overrides;
}

// Adds to the reference's options every measured option Pareto-optimal in (time, effective
// energy) that the reference's filter dropped, and sorts all slowest first. The reference
// filters on total energy, so it drops slow clocks whose energy rises as the clock falls;
// where the GPU would otherwise block, they are the cheapest way to spend the time.
void add_effective_optima(const std::vector<Candidate>& all, const Filtered& kept, double p_blocking, double tau,
                          std::vector<Option>* options) {
  std::vector<Candidate> by_time = all;
  std::stable_sort(by_time.begin(), by_time.end(), [](const Candidate& x, const Candidate& y) {
    return x.measurement->time_s < y.measurement->time_s;
  });
  double best = std::numeric_limits<double>::infinity();  // least effective energy of faster options
  for (const Candidate& c : by_time) {
    const double effective = c.measurement->energy_j - p_blocking * c.measurement->time_s;
    if (effective >= best) continue;
    best = effective;
    const bool kept_already = std::any_of(kept.options.begin(), kept.options.end(),
                                          [&](const Candidate& k) { return k.measurement == c.measurement; });
    if (!kept_already) {
      options->push_back(
          {*c.measurement, c.q, c.measurement->energy_j - p_blocking * static_cast<double>(c.q) * tau, false});
    }
  }
  std::stable_sort(options->begin(), options->end(), [](const Option& x, const Option& y) {
    return x.measurement.time_s > y.measurement.time_s;
  });
}

std::vector<OperationOptions> build_operation_options(const Profile& profile, const OptionsConfig& config,
                                                      std::vector<Warning>* warnings) {
  const double tau = config.unit_time;
  if (!(std::isfinite(tau) && tau > 0.0)) {
    throw InputError("unit time must be a positive, finite number of seconds, got " + number(tau));
  }
  if (!(std::isfinite(config.p_blocking) && config.p_blocking > 0.0)) {
    throw InputError("p_blocking must be a positive, finite power in Watts, got " + number(config.p_blocking));
  }

  // Two passes: options per operation first, then the fits they need (each distinct set of
  // options once: stages built from the same layers measure the same ones), computed in
  // parallel (54 Levenberg-Marquardt runs each, most of make_problem's time), then applied in
  // operation order, so that results, warnings and errors do not depend on the threads.
  struct Pending {
    int stage = 0;
    InstructionKind kind = InstructionKind::kForward;
    std::string name;
    std::vector<Candidate> all;
    Filtered filtered;
    std::vector<double> qs, es;
    bool needs_fit = false;
    std::vector<std::string> warnings;  // each the text after the operation's name (StageWarnings)
  };
  std::vector<OperationOptions> result;
  std::vector<Pending> pending;
  bool any_compute_collapsed = false;
  for (const OperationProfile& op : profile.operations()) {
    Pending& p = pending.emplace_back();
    p.stage = op.stage;
    p.kind = op.kind;
    p.name = operation_name(profile.source(), op.stage, op.kind);
    const std::string& name = p.name;
    if (op.measurements.empty()) throw InputError(name + ": no measured options");

    std::vector<Candidate>& all = p.all;
    all.reserve(op.measurements.size());
    for (const Measurement& m : op.measurements) {
      if (!(std::isfinite(m.time_s) && m.time_s > 0.0 && std::isfinite(m.energy_j))) {
        throw InputError(name + ": option '" + m.knob + "' needs a positive time and a finite energy");
      }
      const double q = python_floordiv(m.time_s, tau);
      if (q > kDurationLimit) {
        throw InputError(name + ": option '" + m.knob + "' lasts " + number(m.time_s) + " s, too many units of " +
                         number(tau) + " s; use a larger unit time");
      }
      all.push_back({&m, static_cast<std::int64_t>(q)});
    }

    p.filtered = pareto_filter(all, 1.0);
    // The reference's retry for sparse frontiers: a laxer dominance test keeps more options.
    if (p.filtered.options.size() <= 3) p.filtered = pareto_filter(all, 0.95);

    OperationOptions options;
    options.stage = op.stage;
    options.kind = op.kind;
    options.highest_clock = *std::max_element(
        op.measurements.begin(), op.measurements.end(), [](const Measurement& a, const Measurement& b) {
          return a.frequency_mhz != b.frequency_mhz ? a.frequency_mhz < b.frequency_mhz : a.time_s > b.time_s;
        });
    for (const Candidate& c : p.filtered.options) {
      // Subtract after filtering, in the reference's order of operations.
      const double effective = c.measurement->energy_j - config.p_blocking * static_cast<double>(c.q) * tau;
      options.options.push_back({*c.measurement, c.q, effective, true});
    }

    if (is_compute(op.kind) && options.options.size() == 1 && p.filtered.pareto_count > 1) {
      any_compute_collapsed = true;
      p.warnings.push_back(": its " + std::to_string(p.filtered.pareto_count) +
                           " candidate options all quantise to " + std::to_string(options.options[0].q) +
                           " units of " + number(tau) + " s; it runs at constant time");
    }

    for (const Option& o : options.options) {
      p.qs.push_back(static_cast<double>(o.q));
      p.es.push_back(o.effective_energy);
    }

    if (const auto it = config.overrides.find({op.stage, op.kind}); it != config.overrides.end()) {
      options.cost = it->second;
      options.cost_overridden = true;
    } else if (options.options.size() == 1 || !config.fit_costs) {
      const auto cheapest = std::min_element(options.options.begin(), options.options.end(), [](const Option& a, const Option& b) {
        return a.effective_energy < b.effective_energy;
      });
      options.cost = {0.0, 0.0, cheapest->effective_energy};
    } else if (options.options.size() == 2) {
      options.cost = through_two_points(options.options[0], options.options[1]);
      p.warnings.push_back(": only two options survive the Pareto filter, too few to fit a*exp(b*q)+c; "
                           "using an exact curve through both");
    } else {
      if (const auto problem = shape_problem(options.options)) {
        p.warnings.push_back(": measured " + *problem + "; the exponential fit smooths this over");
      }
      p.needs_fit = true;
    }
    result.push_back(std::move(options));
  }

  std::map<std::pair<std::vector<double>, std::vector<double>>, FitOutcome> fits;
  for (const Pending& p : pending) {
    if (p.needs_fit) fits.emplace(std::pair(p.qs, p.es), FitOutcome{});
  }
  std::vector<std::pair<const std::pair<std::vector<double>, std::vector<double>>, FitOutcome>*> work;
  for (auto& entry : fits) work.push_back(&entry);
  std::atomic<std::size_t> next{0};
  const auto fit_some = [&] {
    for (std::size_t i = next++; i < work.size(); i = next++) {
      work[i]->second = fit_exponential(work[i]->first.first, work[i]->first.second, tau);
    }
  };
  {
    const std::size_t helpers = std::min<std::size_t>(work.size() / 4, std::max(1u, std::thread::hardware_concurrency()) - 1);
    std::vector<std::jthread> threads;
    for (std::size_t t = 0; t < std::min<std::size_t>(helpers, 3); ++t) threads.emplace_back(fit_some);
    fit_some();
  }

  // Every warning names its operation; the same warning of one kind of operation on several
  // stages (stages built from the same layers measure alike) is one line.
  StageWarnings stage_warnings(profile.source());
  for (std::size_t k = 0; k < result.size(); ++k) {
    Pending& p = pending[k];
    OperationOptions& options = result[k];
    for (std::string& w : p.warnings) stage_warnings.add(p.stage, p.kind, std::move(w));
    if (p.needs_fit) {
      const FitOutcome& fit = fits.at({p.qs, p.es});
      if (!fit.cost) {
        stage_warnings.emit(warnings);  // what was found wrong so far comes with the error
        throw SolveError(p.name + ": cannot fit cost(q) = a*exp(b*q) + c to its " +
                         std::to_string(options.options.size()) + " options: " +
                         (fit.converged == 0 ? std::string("no starting point converged")
                                             : std::to_string(fit.converged) +
                                                   " starting points converged, but only to fits with a < 0 or b > 0 "
                                                   "(energy that does not fall with time)") +
                         "; supply coefficients for it instead");
      }
      options.cost = *fit.cost;
      const double range = energy_range(options.options);
      if (std::sqrt(fit.mse) > kPoorFitTolerance * range) {
        stage_warnings.add(p.stage, p.kind, ": poor fit, RMS error " + number(std::sqrt(fit.mse)) +
                                                " J over an effective-energy range of " + number(range) + " J");
      }
    }
    options.fit_mse = mean_squared_error(options.cost, p.qs, p.es);
    add_effective_optima(p.all, p.filtered, config.p_blocking, tau, &options.options);
  }

  stage_warnings.emit(warnings);

  // A profile measured at one setting is legitimately constant; one whose distinct options all
  // fall into one quantum is a unit-time mistake.
  if (any_compute_collapsed) {
    const bool all_single = std::all_of(result.begin(), result.end(), [](const OperationOptions& o) {
      return !is_compute(o.kind) || o.is_constant();
    });
    if (all_single) {
      throw InputError(profile.source() + ": unit time " + number(tau) +
                       " s is so coarse that every forward/backward operation has a single duration; "
                       "use a smaller unit time");
    }
  }
  return result;
}

}  // namespace perseus
