// Per-operation options: quantisation, the Pareto filter, effective energy, the exponential
// fit (against the reference's published coefficients), overrides and bad configuration.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <tuple>

#include "perseus/cost/operation_options.hpp"
#include "perseus/model/errors.hpp"
#include "temp_dir.hpp"

namespace perseus {
namespace {

using testing::TempFile;

// The profiles and the reference's published fit bundled with the repository (data/).
const std::string kData = PERSEUS_SOURCE_DIR "/data";
const std::string kBloom = kData + "/profiles/bloom-176b+a100-sxm.csv";
const std::string kGoldenFit = kData + "/golden/bloom-176b+a100-sxm+fit.csv";
constexpr double kA100Blocking = 83.64;
constexpr double kA40Blocking = 70.38;

double relative_error(double value, double reference) { return std::abs(value - reference) / std::abs(reference); }

const OperationOptions& find_op(const std::vector<OperationOptions>& ops, int stage, InstructionKind kind) {
  for (const OperationOptions& op : ops) {
    if (op.stage == stage && op.kind == kind) return op;
  }
  throw std::runtime_error("no such operation");
}

// One operation's measurements as (time s, energy J) pairs, knob = index.
// The options the reference's filter kept (the crawl's), in order.
std::vector<Option> reference_options(const OperationOptions& op) {
  std::vector<Option> kept;
  for (const Option& o : op.options) {
    if (o.reference) kept.push_back(o);
  }
  return kept;
}

OperationProfile operation(int stage, InstructionKind kind, const std::vector<std::pair<double, double>>& points) {
  OperationProfile op{stage, kind, {}};
  for (std::size_t i = 0; i < points.size(); ++i) {
    op.measurements.push_back({std::to_string(1000 + i), static_cast<int>(1000 + i), points[i].first, points[i].second,
                               static_cast<int>(i + 2)});
  }
  return op;
}

// Times that sit in the middle of quantum q, so quantisation is unambiguous.
double mid_time(std::int64_t q, double tau) { return (static_cast<double>(q) + 0.5) * tau; }

std::vector<std::pair<double, double>> from_curve(const ExpCost& curve, std::int64_t q_min, std::int64_t q_max,
                                                  double tau, double p_blocking) {
  std::vector<std::pair<double, double>> points;
  for (std::int64_t q = q_min; q <= q_max; ++q) {
    points.emplace_back(mid_time(q, tau), curve(static_cast<double>(q)) + p_blocking * static_cast<double>(q) * tau);
  }
  return points;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(PythonFloordiv, MatchesCPython) {
  // Values CPython prints for a // b.
  EXPECT_EQ(python_floordiv(0.5, 0.001), 499.0);  // floor(0.5 / 0.001) would be 500
  EXPECT_EQ(std::floor(0.5 / 0.001), 500.0);
  EXPECT_EQ(python_floordiv(1.0, 0.1), 9.0);
  EXPECT_EQ(python_floordiv(0.3, 0.1), 2.0);
  EXPECT_EQ(python_floordiv(7.0, 2.0), 3.0);
  EXPECT_EQ(python_floordiv(-7.0, 2.0), -4.0);
  EXPECT_EQ(python_floordiv(7.0, -2.0), -4.0);
  EXPECT_EQ(python_floordiv(-7.0, -2.0), 3.0);
  EXPECT_EQ(python_floordiv(6.0, 3.0), 2.0);
  EXPECT_FALSE(std::signbit(python_floordiv(0.0, 5.0)));
  EXPECT_TRUE(std::signbit(python_floordiv(-0.0, 5.0)));
  EXPECT_TRUE(std::signbit(python_floordiv(0.0, -5.0)));
  EXPECT_THROW(python_floordiv(1.0, 0.0), InputError);
}

TEST(PythonFloordiv, AgreesWithFloorOnEveryBundledProfileTime) {
  // docs/solver.md, "Per-operation options": the bundled profiles never sit on a quantum boundary.
  for (const char* name : {"bloom-176b+a100-sxm", "bloom-176b+a40", "gpt3-175b+a100-sxm", "gpt3-175b+a40"}) {
    const Profile profile = Profile::read_csv(kData + "/profiles/" + name + ".csv");
    for (double tau : {0.001, 0.0001}) {
      for (const OperationProfile& op : profile.operations()) {
        for (const Measurement& m : op.measurements) {
          EXPECT_EQ(python_floordiv(m.time_s, tau), std::floor(m.time_s / tau)) << name << " " << m.time_s;
        }
      }
    }
  }
}

TEST(ExpCost, EvaluatesTheClosedForm) {
  const ExpCost cost{3.0, -0.5, 2.0};
  EXPECT_DOUBLE_EQ(cost(0.0), 5.0);
  EXPECT_DOUBLE_EQ(cost(2.0), 3.0 * std::exp(-1.0) + 2.0);
}

TEST(OptionForDuration, SlowestOptionThatFitsElseFastest) {
  OperationOptions op;
  for (std::int64_t q : {10, 8, 5}) op.options.push_back({Measurement{}, q, 0.0});
  EXPECT_EQ(op.max_q(), 10);
  EXPECT_EQ(op.min_q(), 5);
  const std::vector<std::pair<std::int64_t, std::size_t>> expected = {
      {12, 0}, {10, 0}, {9, 1}, {8, 1}, {7, 2}, {5, 2}, {4, 2}, {-3, 2}};
  for (const auto& [d, index] : expected) EXPECT_EQ(op.option_for_duration(d), index) << "d=" << d;
}

TEST(OptionForDuration, MatchesBruteForceOnRealOptions) {
  std::vector<Warning> warnings;
  const auto ops = build_operation_options(Profile::read_csv(kBloom), {0.001, kA100Blocking, {}}, &warnings);
  for (const OperationOptions& op : ops) {
    for (std::int64_t d = op.min_q() - 3; d <= op.max_q() + 3; ++d) {
      // Brute force over the reference's options: the largest q not above d; the smallest q
      // when none is.
      std::size_t best = op.options.size();
      for (std::size_t i = 0; i < op.options.size(); ++i) {
        if (!op.options[i].reference) continue;
        if (op.options[i].q <= d && (best == op.options.size() || op.options[i].q > op.options[best].q)) best = i;
      }
      if (best == op.options.size()) {
        for (std::size_t i = 0; i < op.options.size(); ++i) {
          if (op.options[i].reference && (best == op.options.size() || op.options[i].q < op.options[best].q)) best = i;
        }
      }
      EXPECT_EQ(op.option_for_duration(d), best) << "d=" << d;
      EXPECT_TRUE(op.options[op.option_for_duration(d)].reference);
    }
  }
}

TEST(OptionBracket, SlowestThatFitsAndFastestNoFaster) {
  OperationOptions op;
  for (double t : {0.010, 0.008, 0.005}) {
    Measurement m;
    m.time_s = t;
    op.options.push_back({m, 0, 0.0});
  }
  const std::vector<std::tuple<double, std::int32_t, std::int32_t>> expected = {
      {0.012, 0, 0},  // slower than every option: the slowest either way
      {0.010, 0, 0}, {0.009, 1, 0}, {0.008, 1, 1}, {0.006, 2, 1}, {0.005, 2, 2},
      {0.004, 2, 2},  // faster than every option: the fastest either way
  };
  for (const auto& [duration, down, up] : expected) {
    const OperationOptions::Bracket bracket = op.bracket(duration);
    EXPECT_EQ(bracket.down, down) << duration;
    EXPECT_EQ(bracket.up, up) << duration;
  }
  // Within the tolerance a duration counts as the option's time.
  EXPECT_EQ(op.bracket(0.008 - 1e-12).down, 2);
  EXPECT_EQ(op.bracket(0.008 - 1e-12, 1e-9).down, 1);
  EXPECT_EQ(op.bracket(0.008 + 1e-12, 1e-9).up, 1);
  for (const auto& [duration, down, up] : expected) EXPECT_EQ(op.round_down(duration), down) << duration;
  EXPECT_EQ(op.round_down(0.008 - 1e-12), 2);
  EXPECT_EQ(op.round_down(0.008 - 1e-12, 1e-9), 1);
  EXPECT_EQ(op.round_down(std::numeric_limits<double>::quiet_NaN()), 2);  // as bracket: the fastest
  EXPECT_EQ(OperationOptions{}.round_down(0.001), 0);                    // no options
}

// The bracket's binary searches against the scan it replaced (the definition: the slowest
// option within the duration, the fastest no faster, the first of equal times, the fastest or
// slowest where none is) on random option sets with repeated times, at every option's time,
// between and beyond them, with and without a tolerance; and round_down against its down.
TEST(OptionBracket, AgreesWithAScanOverEveryOptionIncludingTies) {
  const auto scan = [](const OperationOptions& op, double d, double tolerance) {
    std::int32_t down = -1, up = -1, fastest = 0, slowest = 0;
    for (std::size_t k = 0; k < op.options.size(); ++k) {
      const double t = op.options[k].measurement.time_s;
      const auto i = static_cast<std::int32_t>(k);
      if (t <= d + tolerance && (down < 0 || t > op.options[down].measurement.time_s)) down = i;
      if (t >= d - tolerance && (up < 0 || t < op.options[up].measurement.time_s)) up = i;
      if (t < op.options[fastest].measurement.time_s) fastest = i;
      if (t > op.options[slowest].measurement.time_s) slowest = i;
    }
    return std::pair{down >= 0 ? down : fastest, up >= 0 ? up : slowest};
  };
  std::mt19937 random(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<double> times(1 + random() % 12);
    for (double& t : times) t = 0.001 * static_cast<double>(1 + random() % 8);  // ties likely
    std::sort(times.begin(), times.end(), std::greater<>());
    OperationOptions op;
    for (const double t : times) {
      Measurement m;
      m.time_s = t;
      op.options.push_back({m, 0, 0.0});
    }
    for (int k = 0; k <= 20; ++k) {
      const double d = 0.0005 * k;  // every option's time, the midpoints, and beyond both ends
      for (const double tolerance : {0.0, 1e-9, 0.0007}) {
        const OperationOptions::Bracket got = op.bracket(d, tolerance);
        const auto [down, up] = scan(op, d, tolerance);
        ASSERT_EQ(got.down, down) << "trial " << trial << " d " << d << " tolerance " << tolerance;
        ASSERT_EQ(got.up, up) << "trial " << trial << " d " << d << " tolerance " << tolerance;
        // Rounding down alone gives bracket's down.
        ASSERT_EQ(op.round_down(d, tolerance), down) << "trial " << trial << " d " << d << " tolerance " << tolerance;
      }
    }
  }
}

// Every option lies on or above the hull, the hull's corners are options, it is convex and
// decreasing; with a time unit its corners sit on whole units.
// The corners as options: one per corner of the hull, fastest first, each at its corner's time
// and effective energy, the cheapest of the options at that time; on the A40 profile the
// clocks just below the highest are not corners (they save too little for their time).
TEST(HullCornerOptions, AreTheOptionsAtTheHullsCornersFastestFirst) {
  std::vector<Warning> warnings;
  const std::string a40 = kData + "/profiles/gpt3-175b+a40.csv";
  std::size_t skipped_below_highest = 0;
  for (const auto& [path, blocking] : {std::pair{kBloom, kA100Blocking}, std::pair{a40, kA40Blocking}}) {
    const auto ops = build_operation_options(Profile::read_csv(path), {0.001, blocking, {}}, &warnings);
    for (const OperationOptions& op : ops) {
      const auto effective = [&](std::int32_t k) {
        return op.options[k].measurement.energy_j - blocking * op.options[k].measurement.time_s;
      };
      const std::vector<HullPoint> hull = effective_energy_hull(op, blocking);
      const std::vector<std::int32_t> corners = hull_corner_options(op, blocking);
      ASSERT_EQ(corners.size(), hull.size());
      for (std::size_t c = 0; c < corners.size(); ++c) {
        ASSERT_GE(corners[c], 0);
        ASSERT_LT(static_cast<std::size_t>(corners[c]), op.options.size());
        EXPECT_EQ(op.options[corners[c]].measurement.time_s, hull[c].time_s);
        EXPECT_EQ(effective(corners[c]), hull[c].effective_j);
        for (std::size_t k = 0; k < op.options.size(); ++k) {
          if (op.options[k].measurement.time_s == hull[c].time_s) {
            EXPECT_GE(effective(static_cast<std::int32_t>(k)), effective(corners[c]));
          }
        }
      }
      // The second-fastest option is not a corner (its clock saves too little for its time).
      if (path == a40 && op.options.size() > 2 && corners.size() > 1 &&
          op.options[corners[1]].measurement.time_s > op.options[op.options.size() - 2].measurement.time_s) {
        ++skipped_below_highest;
      }
    }
  }
  EXPECT_GT(skipped_below_highest, 0u);
}

TEST(EffectiveEnergyHull, LiesBelowEveryOptionAndIsConvexOnRealOptions) {
  std::vector<Warning> warnings;
  const auto ops = build_operation_options(Profile::read_csv(kBloom), {0.001, kA100Blocking, {}}, &warnings);
  for (const double unit : {0.0, 0.0005}) {
    for (const OperationOptions& op : ops) {
      const auto time_of = [&](const Measurement& m) {
        return unit > 0 ? std::max(1.0, std::round(m.time_s / unit)) * unit : m.time_s;
      };
      const std::vector<HullPoint> hull = effective_energy_hull(op, kA100Blocking, unit);
      ASSERT_FALSE(hull.empty());
      for (std::size_t k = 0; k < hull.size(); ++k) {
        const bool is_option = std::any_of(op.options.begin(), op.options.end(), [&](const Option& o) {
          return time_of(o.measurement) == hull[k].time_s &&
                 o.measurement.energy_j - kA100Blocking * o.measurement.time_s == hull[k].effective_j;
        });
        EXPECT_TRUE(is_option) << "corner " << k;
        if (unit > 0) {
          EXPECT_NEAR(hull[k].time_s / unit, std::round(hull[k].time_s / unit), 1e-9);
        }
        if (k > 0) {
          EXPECT_GT(hull[k].time_s, hull[k - 1].time_s);
          EXPECT_LT(hull[k].effective_j, hull[k - 1].effective_j);
        }
        if (k > 1) {
          const double left = (hull[k - 1].effective_j - hull[k - 2].effective_j) / (hull[k - 1].time_s - hull[k - 2].time_s);
          const double right = (hull[k].effective_j - hull[k - 1].effective_j) / (hull[k].time_s - hull[k - 1].time_s);
          EXPECT_GT(right, left) << "corner " << k - 1 << " is not convex";
        }
      }
      for (const Option& o : op.options) {
        const double t = time_of(o.measurement);
        const double e = o.measurement.energy_j - kA100Blocking * o.measurement.time_s;
        ASSERT_GE(t, hull.front().time_s);
        // The hull at t: interpolated between corners, flat at the cheapest beyond the last.
        double at = hull.back().effective_j;
        for (std::size_t k = 1; k < hull.size(); ++k) {
          if (t <= hull[k].time_s) {
            const double w = (t - hull[k - 1].time_s) / (hull[k].time_s - hull[k - 1].time_s);
            at = hull[k - 1].effective_j + w * (hull[k].effective_j - hull[k - 1].effective_j);
            break;
          }
        }
        EXPECT_GE(e, at - 1e-9 * std::abs(at)) << "an option below the hull at " << t << " s";
      }
    }
  }
}

// The reference's published fit for every (instruction, stage) of the Bloom A100-SXM profile.
TEST(ExponentialFit, ReproducesTheReferenceFitForBloomA100) {
  std::vector<Warning> warnings;
  const auto ops = build_operation_options(Profile::read_csv(kBloom), {0.001, kA100Blocking, {}}, &warnings);
  std::ifstream in(kGoldenFit);
  std::string line;
  std::getline(in, line);
  ASSERT_EQ(line, "instruction,stage,options_after_filter,a,b,c");
  double worst_a = 0.0, worst_b = 0.0, worst_c = 0.0;
  int rows = 0;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string instruction, stage, count, a, b, c;
    std::getline(fields, instruction, ',');
    std::getline(fields, stage, ',');
    std::getline(fields, count, ',');
    std::getline(fields, a, ',');
    std::getline(fields, b, ',');
    std::getline(fields, c, ',');
    SCOPED_TRACE(line);
    const OperationOptions& op = find_op(ops, std::stoi(stage), *parse_instruction_kind(instruction));
    EXPECT_EQ(op.num_reference_options(), std::stoul(count));
    EXPECT_FALSE(op.cost_overridden);
    worst_a = std::max(worst_a, relative_error(op.cost.a, std::stod(a)));
    worst_b = std::max(worst_b, relative_error(op.cost.b, std::stod(b)));
    worst_c = std::max(worst_c, relative_error(op.cost.c, std::stod(c)));
    ++rows;
  }
  EXPECT_EQ(rows, 16);
  std::cout << "worst relative error vs the reference fit: a " << worst_a << ", b " << worst_b << ", c " << worst_c
            << "\n";
  RecordProperty("worst_relative_error_a", std::to_string(worst_a));
  // The reference's own end points depend on its floating-point path: from the same 54 starts
  // its iterates stop anywhere in a valley about 3e-5 wide in a, and the least-squares optimum
  // itself is 2.1e-6 from the published forward a. Eigen's LM (another QR inside) lands within
  // 1.5e-6 in a and 3e-7 in b and c.
  EXPECT_LE(worst_a, 2e-6);
  EXPECT_LE(worst_b, 5e-7);
  EXPECT_LE(worst_c, 5e-7);
}

TEST(ExponentialFit, ReproducesTheReferenceFitForGpt3A40Forward) {
  std::vector<Warning> warnings;
  const auto ops = build_operation_options(Profile::read_csv(kData + "/profiles/gpt3-175b+a40.csv"),
                                           {0.0001, kA40Blocking, {}}, &warnings);
  const OperationOptions& op = find_op(ops, 0, InstructionKind::kForward);
  // The reference's coefficients (docs/solver.md, "Per-operation options").
  EXPECT_LE(relative_error(op.cost.a, 21612.570255908657), 1e-6) << op.cost.a;
  EXPECT_LE(relative_error(op.cost.b, -0.0067784677095500965), 1e-6) << op.cost.b;
  EXPECT_LE(relative_error(op.cost.c, 15.560488861543531), 1e-6) << op.cost.c;
}

TEST(ExponentialFit, RecoversAKnownCurveExactly) {
  const double tau = 0.001, p = 80.0;
  const ExpCost curve{500.0, -0.08, 20.0};
  const Profile profile = Profile::from_operations(
      "curve.csv", {operation(0, InstructionKind::kForward, from_curve(curve, 40, 60, tau, p))});
  std::vector<Warning> warnings;
  const auto ops = build_operation_options(profile, {tau, p, {}}, &warnings);
  ASSERT_EQ(ops.size(), 1u);
  const OperationOptions& op = ops[0];
  ASSERT_EQ(op.options.size(), 21u);
  EXPECT_EQ(op.max_q(), 60);
  EXPECT_EQ(op.min_q(), 40);
  EXPECT_LE(relative_error(op.cost.a, curve.a), 1e-6);
  EXPECT_LE(relative_error(op.cost.b, curve.b), 1e-6);
  EXPECT_LE(relative_error(op.cost.c, curve.c), 1e-6);
  EXPECT_LE(op.fit_mse, 1e-12);
  for (const Option& o : op.options) {
    EXPECT_NEAR(o.effective_energy, curve(static_cast<double>(o.q)), 1e-9);
    EXPECT_NEAR(op.fitted_cost(o.q), o.effective_energy, 1e-6);
  }
  EXPECT_TRUE(warnings.empty()) << warnings.front().message;
}

TEST(ParetoFilter, KeepsOneNonDominatedOptionPerQuantumSlowestFirst) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double tau = 0.001, p = 50.0;
  int checked = 0;
  for (int trial = 0; trial < 20; ++trial) {
    // Energy falls with time, plus noise: many options are dominated, several share a quantum.
    std::vector<std::pair<double, double>> points;
    for (int i = 0; i < 40; ++i) {
      const double t = 0.040 + 0.030 * unit(rng);
      points.emplace_back(t, 10.0 + 0.5 / t + 2.0 * unit(rng));
    }
    const OperationProfile op = operation(0, InstructionKind::kBackward, points);
    std::vector<Warning> warnings;
    const auto built =
        build_operation_options(Profile::from_operations("random.csv", {op}), {tau, p, {{{0, InstructionKind::kBackward}, {1, -0.1, 1}}}}, &warnings);
    const std::vector<Option> options = reference_options(built[0]);

    // Brute force over the measurements.
    auto dominated = [&](const Measurement& m) {
      return std::any_of(op.measurements.begin(), op.measurements.end(), [&](const Measurement& o) {
        return o.time_s < m.time_s && o.energy_j < m.energy_j;
      });
    };
    std::map<std::int64_t, const Measurement*> best_per_q;
    for (const Measurement& m : op.measurements) {
      if (dominated(m)) continue;
      const auto q = static_cast<std::int64_t>(std::floor(m.time_s / tau));
      auto [it, inserted] = best_per_q.emplace(q, &m);
      if (!inserted && m.energy_j > it->second->energy_j) it->second = &m;
    }
    if (best_per_q.size() <= 3) continue;  // the laxer retry applies; tested separately
    ++checked;
    ASSERT_EQ(options.size(), best_per_q.size());
    auto expected = best_per_q.rbegin();
    for (std::size_t i = 0; i < options.size(); ++i, ++expected) {
      EXPECT_EQ(options[i].q, expected->first);  // q strictly descending
      EXPECT_EQ(options[i].measurement.knob, expected->second->knob);
      EXPECT_EQ(options[i].effective_energy,
                expected->second->energy_j - p * static_cast<double>(expected->first) * tau);
    }
    // Besides them: exactly the measurements no faster one beats in effective energy,
    // slowest first.
    const auto& all = built[0].options;
    for (std::size_t i = 1; i < all.size(); ++i) EXPECT_GE(all[i - 1].measurement.time_s, all[i].measurement.time_s);
    for (const Measurement& m : op.measurements) {
      const bool effective_optimum = std::none_of(op.measurements.begin(), op.measurements.end(), [&](const Measurement& o) {
        return o.time_s <= m.time_s && &o != &m && o.energy_j - p * o.time_s <= m.energy_j - p * m.time_s;
      });
      const bool reference = std::any_of(options.begin(), options.end(), [&](const Option& o) { return o.measurement.knob == m.knob; });
      const bool present = std::any_of(all.begin(), all.end(), [&](const Option& o) { return o.measurement.knob == m.knob; });
      EXPECT_EQ(present, reference || effective_optimum) << m.knob;
    }
  }
  EXPECT_GE(checked, 10);
}

TEST(ParetoFilter, SlowClocksCheaperThanBlockingAreKeptButNeverPlannedByTheCrawl) {
  // Below 1000 MHz static power makes energy rise as the clock falls, so the reference drops
  // those clocks; per second they draw less than blocking (50 W) costs, so they stay, flagged.
  const double tau = 0.001, p = 50.0;
  const OperationProfile op = operation(0, InstructionKind::kForward,
                                        {{0.100, 30.0}, {0.110, 28.0}, {0.120, 26.5}, {0.130, 25.5}, {0.150, 26.0},
                                         {0.170, 26.8}, {0.200, 40.0}});
  std::vector<Warning> warnings;
  const OperationOptions built = build_operation_options(Profile::from_operations("slow.csv", {op}), {tau, p, {}}, &warnings)[0];
  ASSERT_EQ(built.num_reference_options(), 4u);  // 0.100 .. 0.130 s
  ASSERT_EQ(built.options.size(), 6u);           // and 0.150, 0.170 s (0.200 s costs more than blocking)
  EXPECT_FALSE(built.options[0].reference);
  EXPECT_DOUBLE_EQ(built.options[0].measurement.time_s, 0.170);
  EXPECT_FALSE(built.options[1].reference);
  EXPECT_TRUE(built.options[2].reference);
  // The crawl's view is the reference's: its range, and the options it plans with.
  EXPECT_EQ(built.max_q(), 130);
  EXPECT_EQ(built.min_q(), 100);
  EXPECT_EQ(built.option_for_duration(1000), 2u);
}

TEST(ParetoFilter, SparseFrontiersAreRetriedWithANoiseFactor) {
  // Within 5% of each other: at n = 1 the fastest (also cheapest) dominates all the others;
  // at n = 0.95 nothing is 5% faster and cheaper, so all five survive.
  const double tau = 0.001;
  const OperationProfile op = operation(
      3, InstructionKind::kForward,
      {{0.1005, 100.0}, {0.1015, 100.5}, {0.1025, 101.0}, {0.1035, 101.5}, {0.1045, 102.0}, {0.2005, 300.0}});
  OptionsConfig config{tau, 1.0, {{{3, InstructionKind::kForward}, {1.0, -0.01, 1.0}}}};
  std::vector<Warning> warnings;
  const auto ops = build_operation_options(Profile::from_operations("sparse.csv", {op}), config, &warnings);
  ASSERT_EQ(ops[0].options.size(), 5u);
  EXPECT_EQ(ops[0].max_q(), 104);
  EXPECT_EQ(ops[0].min_q(), 100);
  EXPECT_TRUE(ops[0].cost_overridden);
  EXPECT_EQ(ops[0].cost.b, -0.01);

  // Without an override, that rising data admits no fit with a >= 0 and b <= 0.
  warnings.clear();
  config.overrides.clear();
  try {
    build_operation_options(Profile::from_operations("sparse.csv", {op}), config, &warnings);
    FAIL() << "expected a SolveError";
  } catch (const SolveError& e) {
    EXPECT_NE(std::string(e.what()).find("sparse.csv: stage 3 forward: cannot fit"), std::string::npos) << e.what();
  }
  ASSERT_FALSE(warnings.empty());
  EXPECT_NE(warnings[0].message.find("stage 3 forward"), std::string::npos) << warnings[0].message;
  EXPECT_NE(warnings[0].message.find("not decreasing"), std::string::npos) << warnings[0].message;
}

TEST(OperationShapes, OneOptionIsConstant) {
  const double tau = 0.001, p = 80.0;
  const Profile profile = Profile::from_operations(
      "one.csv", {operation(0, InstructionKind::kForward, from_curve({500.0, -0.08, 20.0}, 40, 50, tau, p)),
                  operation(0, InstructionKind::kBackward, from_curve({900.0, -0.05, 40.0}, 80, 100, tau, p)),
                  operation(0, InstructionKind::kLoad, {{0.0105, 2.0}, {0.0105, 1.5}})});
  std::vector<Warning> warnings;
  const auto ops = build_operation_options(profile, {tau, p, {}}, &warnings);
  const OperationOptions& load = find_op(ops, 0, InstructionKind::kLoad);
  ASSERT_TRUE(load.is_constant());
  EXPECT_EQ(load.options[0].q, 10);
  // Equal times dominate neither way; of one quantum the reference keeps the most energetic.
  EXPECT_EQ(load.options[0].measurement.energy_j, 2.0);
  const double effective = 2.0 - p * 10 * tau;
  EXPECT_EQ(load.options[0].effective_energy, effective);
  EXPECT_EQ(load.cost.a, 0.0);
  EXPECT_EQ(load.cost.b, 0.0);
  EXPECT_EQ(load.cost.c, effective);
  for (std::int64_t d : {0, 10, 1000}) {
    EXPECT_EQ(load.fitted_cost(d), effective);
    EXPECT_EQ(load.option_for_duration(d), 0u);
  }
  EXPECT_EQ(load.fit_mse, 0.0);
  EXPECT_FALSE(find_op(ops, 0, InstructionKind::kForward).is_constant());
}

TEST(OperationShapes, CommunicationWithSeveralOptionsIsFitted) {
  const double tau = 0.001, p = 80.0;
  const ExpCost curve{50.0, -0.1, 3.0};
  const Profile profile = Profile::from_operations(
      "comm.csv", {operation(0, InstructionKind::kForward, from_curve({500.0, -0.08, 20.0}, 40, 50, tau, p)),
                   operation(0, InstructionKind::kBackward, from_curve({900.0, -0.05, 40.0}, 80, 100, tau, p)),
                   operation(0, InstructionKind::kCommunication, from_curve(curve, 5, 15, tau, p))});
  std::vector<Warning> warnings;
  const auto ops = build_operation_options(profile, {tau, p, {}}, &warnings);
  const OperationOptions& comm = find_op(ops, 0, InstructionKind::kCommunication);
  EXPECT_EQ(comm.options.size(), 11u);
  EXPECT_LE(relative_error(comm.cost.b, curve.b), 1e-6);
}

TEST(OperationShapes, TwoOptionsGetAnExactCurveAndAWarning) {
  const double tau = 0.001, p = 80.0;
  const Profile profile =
      Profile::from_operations("two.csv", {operation(2, InstructionKind::kBackward, {{0.0505, 20.0}, {0.0405, 25.0}})});
  std::vector<Warning> warnings;
  const auto ops = build_operation_options(profile, {tau, p, {}}, &warnings);
  const OperationOptions& op = ops[0];
  ASSERT_EQ(op.options.size(), 2u);
  EXPECT_EQ(op.max_q(), 50);
  EXPECT_EQ(op.min_q(), 40);
  EXPECT_NEAR(op.fitted_cost(50), 20.0 - p * 50 * tau, 1e-9);
  EXPECT_NEAR(op.fitted_cost(40), 25.0 - p * 40 * tau, 1e-9);
  EXPECT_GT(op.cost.a, 0.0);
  EXPECT_LT(op.cost.b, 0.0);
  // Convex and decreasing in between.
  for (std::int64_t d = 41; d < 50; ++d) {
    EXPECT_LT(op.fitted_cost(d), op.fitted_cost(d - 1));
    EXPECT_LT(op.fitted_cost(d) - op.fitted_cost(d + 1), op.fitted_cost(d - 1) - op.fitted_cost(d));
  }
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].message.find("two.csv: stage 2 backward: only two options"), std::string::npos)
      << warnings[0].message;
}

TEST(OperationShapes, OneWarningOfOneKindOnSeveralStagesIsOneLineNamingThem) {
  // Stages 0, 1, 2 and 5 backward with two options each, stage 3 backward with two that
  // quantise to one duration, stage 4 forward with two: "stages 0-2, 5 backward", then
  // "stage 3 backward", then "stage 4 forward", in the order each text first came.
  const double tau = 0.001, p = 80.0;
  const std::vector<std::pair<double, double>> two = {{0.0505, 20.0}, {0.0405, 25.0}};
  const std::vector<std::pair<double, double>> other = {{0.05052, 19.9}, {0.0505, 20.0}};
  std::vector<OperationProfile> operations;
  for (int stage : {0, 1, 2, 5}) operations.push_back(operation(stage, InstructionKind::kBackward, two));
  operations.push_back(operation(3, InstructionKind::kBackward, other));
  operations.push_back(operation(4, InstructionKind::kForward, two));
  const Profile profile = Profile::from_operations("alike.csv", operations);
  std::vector<Warning> warnings;
  build_operation_options(profile, {tau, p, {}}, &warnings);
  ASSERT_EQ(warnings.size(), 3u);
  EXPECT_EQ(warnings[0].message.rfind("alike.csv: stages 0-2, 5 backward: only two options", 0), 0u) << warnings[0].message;
  EXPECT_EQ(warnings[1].message.rfind("alike.csv: stage 3 backward: its 2 candidate options all quantise to 50", 0), 0u)
      << warnings[1].message;
  EXPECT_EQ(warnings[2].message.rfind("alike.csv: stage 4 forward: only two options", 0), 0u) << warnings[2].message;
}

TEST(OperationShapes, NonConvexDataIsFittedWithAWarning) {
  const double tau = 0.001, p = 80.0;
  // A nearly straight curve with a bump of a quarter of its range around q = 50: still
  // decreasing (so every option is Pareto-optimal) but far from convex.
  const ExpCost curve{1000.0, -0.01, 0.0};
  auto points = from_curve(curve, 40, 60, tau, p);
  const double range = curve(40) - curve(60);
  for (std::int64_t q = 40; q <= 60; ++q) {
    points[static_cast<std::size_t>(q - 40)].second += 0.25 * range * std::exp(-std::pow((q - 50) / 5.0, 2));
  }
  const Profile profile = Profile::from_operations("bulge.csv", {operation(1, InstructionKind::kForward, points)});
  std::vector<Warning> warnings;
  const auto ops = build_operation_options(profile, {tau, p, {}}, &warnings);
  EXPECT_EQ(ops[0].options.size(), 21u);
  EXPECT_GE(ops[0].cost.a, 0.0);
  EXPECT_LE(ops[0].cost.b, 0.0);
  ASSERT_FALSE(warnings.empty());
  EXPECT_NE(warnings[0].message.find("bulge.csv: stage 1 forward"), std::string::npos) << warnings[0].message;
  EXPECT_NE(warnings[0].message.find("at q=50"), std::string::npos) << warnings[0].message;
  EXPECT_NE(warnings[0].message.find("not convex"), std::string::npos) << warnings[0].message;

  // The same curve without the bump: no warning.
  warnings.clear();
  build_operation_options(
      Profile::from_operations("smooth.csv", {operation(1, InstructionKind::kForward, from_curve(curve, 40, 60, tau, p))}),
      {tau, p, {}}, &warnings);
  EXPECT_TRUE(warnings.empty()) << warnings.front().message;
}

TEST(Overrides, ReplaceTheFit) {
  const auto overrides = read_cost_overrides(kGoldenFit);
  ASSERT_EQ(overrides.size(), 16u);
  std::vector<Warning> warnings;
  const auto ops = build_operation_options(Profile::read_csv(kBloom), {0.001, kA100Blocking, overrides}, &warnings);
  // Read the coefficients back independently.
  std::ifstream in(kGoldenFit);
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string instruction, stage, count, a, b, c;
    for (std::string* field : {&instruction, &stage, &count, &a, &b, &c}) std::getline(fields, *field, ',');
    const OperationOptions& op = find_op(ops, std::stoi(stage), *parse_instruction_kind(instruction));
    EXPECT_TRUE(op.cost_overridden);
    EXPECT_EQ(op.cost.a, std::stod(a));
    EXPECT_EQ(op.cost.b, std::stod(b));
    EXPECT_EQ(op.cost.c, std::stod(c));
    EXPECT_EQ(op.num_reference_options(), std::stoul(count));
    EXPECT_GT(op.fit_mse, 0.0);
    EXPECT_LT(op.fit_mse, 1.0);
  }
}

void expect_override_error(const std::string& content, int line, const std::string& column,
                           const std::string& detail) {
  const TempFile file("overrides.csv", content);
  const std::string message = message_of([&] { read_cost_overrides(file.path()); });
  SCOPED_TRACE(content);
  EXPECT_NE(message.find(file.path().string() + ":" + std::to_string(line) + ":"), std::string::npos) << message;
  EXPECT_NE(message.find("column '" + column + "'"), std::string::npos) << message;
  EXPECT_NE(message.find(detail), std::string::npos) << message;
}

TEST(Overrides, BadFilesNameFileLineAndColumn) {
  const std::string header = "instruction,stage,options_after_filter,a,b,c\n";
  expect_override_error("instruction,stage,a,b\nforward,0,1,2\n", 1, "c", "missing");
  expect_override_error(header + "forward,0,12,lots,-0.1,10\n", 2, "a", "got 'lots'");
  expect_override_error(header + "forward,0,12,1e3,nan,10\n", 2, "b", "finite");
  expect_override_error(header + "forward,0,12,1e3,-0.1,10\nsideways,0,12,1e3,-0.1,10\n", 3, "instruction",
                        "got 'sideways'");
  expect_override_error(header + "forward,-2,12,1e3,-0.1,10\n", 2, "stage", "got '-2'");
  expect_override_error(header + "forward,0,12,1e3,-0.1,10\nforward,0,12,1e3,-0.1,11\n", 3, "stage",
                        "first on line 2");
  expect_override_error(header + "forward,0,12,1e3,-0.1\n", 2, "c", "expected 6 fields");
  const TempFile empty("empty.csv", "");
  const std::string message = message_of([&] { read_cost_overrides(empty.path()); });
  EXPECT_NE(message.find(empty.path().string() + ":1: empty file"), std::string::npos) << message;
  EXPECT_THROW(read_cost_overrides(empty.path().string() + ".missing"), InputError);
}

TEST(Configuration, RejectsBadUnitTimeAndBlockingPower) {
  const Profile profile = Profile::read_csv(kBloom);
  std::vector<Warning> warnings;
  const double nan = std::nan(""), inf = INFINITY;
  for (double tau : {0.0, -0.001, nan, inf}) {
    const std::string message = message_of([&] { build_operation_options(profile, {tau, 80.0, {}}, &warnings); });
    EXPECT_NE(message.find("unit time"), std::string::npos) << tau << ": " << message;
    EXPECT_THROW(build_operation_options(profile, {tau, 80.0, {}}, &warnings), InputError);
  }
  for (double p : {0.0, -5.0, nan, inf}) {
    const std::string message = message_of([&] { build_operation_options(profile, {0.001, p, {}}, &warnings); });
    EXPECT_NE(message.find("p_blocking"), std::string::npos) << p << ": " << message;
    EXPECT_THROW(build_operation_options(profile, {0.001, p, {}}, &warnings), InputError);
  }
}

TEST(Configuration, RejectsAUnitTimeThatCollapsesEveryOperation) {
  std::vector<Warning> warnings;
  const std::string message = message_of(
      [&] { build_operation_options(Profile::read_csv(kBloom), {1.0, kA100Blocking, {}}, &warnings); });
  EXPECT_NE(message.find(kBloom + ": unit time 1 s is so coarse"), std::string::npos) << message;
  EXPECT_THROW(build_operation_options(Profile::read_csv(kBloom), {1.0, kA100Blocking, {}}, &warnings), InputError);

  // A profile measured at a single setting is constant by nature, not by a coarse unit time.
  const Profile single = Profile::from_operations(
      "single.csv", {operation(0, InstructionKind::kForward, {{0.05, 20.0}}),
                     operation(0, InstructionKind::kBackward, {{0.1, 40.0}})});
  const auto ops = build_operation_options(single, {0.001, kA100Blocking, {}}, &warnings);
  EXPECT_TRUE(ops[0].is_constant());
  EXPECT_TRUE(ops[1].is_constant());
}

TEST(BundledProfiles, AllFourBuildConvexDecreasingOptions) {
  struct Case {
    const char* name;
    double tau;
    double p_blocking;
  };
  for (const Case& c : {Case{"bloom-176b+a100-sxm", 0.001, kA100Blocking}, Case{"gpt3-175b+a100-sxm", 0.001, kA100Blocking},
                        Case{"bloom-176b+a40", 0.0001, kA40Blocking}, Case{"gpt3-175b+a40", 0.0001, kA40Blocking}}) {
    SCOPED_TRACE(c.name);
    const Profile profile = Profile::read_csv(kData + "/profiles/" + c.name + ".csv");
    std::vector<Warning> warnings;
    const auto ops = build_operation_options(profile, {c.tau, c.p_blocking, {}}, &warnings);
    ASSERT_EQ(ops.size(), 16u);
    for (const OperationOptions& op : ops) {
      const std::vector<Option> kept = reference_options(op);
      EXPECT_GE(kept.size(), 4u);
      for (std::size_t i = 1; i < kept.size(); ++i) EXPECT_GT(kept[i - 1].q, kept[i].q);
      for (std::size_t i = 1; i < op.options.size(); ++i) {
        EXPECT_GE(op.options[i - 1].measurement.time_s, op.options[i].measurement.time_s);
      }
      EXPECT_GE(op.cost.a, 0.0);
      EXPECT_LE(op.cost.b, 0.0);
      EXPECT_TRUE(std::isfinite(op.cost.c));
      EXPECT_TRUE(std::isfinite(op.fit_mse));
      for (const Option& o : op.options) {
        EXPECT_EQ(o.effective_energy, o.measurement.energy_j - c.p_blocking * static_cast<double>(o.q) * c.tau);
      }
    }
    // Each names its operation's stage, or the stages it holds for alike ("stages 0-6").
    for (const Warning& w : warnings) {
      EXPECT_TRUE(w.message.rfind(profile.source() + ": stage ", 0) == 0 ||
                  w.message.rfind(profile.source() + ": stages ", 0) == 0)
          << w.message;
    }
  }
}

}  // namespace
}  // namespace perseus
