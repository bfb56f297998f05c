// The checks issue 3 asks for, on the four bundled profiles (8 stages, 1F1B, 12 microbatches,
// the reference unit times): the all-max plan of a balanced schedule takes the closed-form
// time; every frontier plan emulates to its measured time and energy (and stays within its
// time plus the switching delay it reports); Perseus's frontier dominates the ZeusGlobal and
// ZeusPerStage frontiers, and Perseus wins the straggler table.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <limits>
#include <cmath>
#include <map>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "perseus/emulator/comparison.hpp"
#include "perseus/profile/bundled_profiles.hpp"
#include "perseus/solver/crawl.hpp"

namespace perseus {
namespace {

using Workload = BundledProfile;
constexpr const auto& kWorkloads = kBundledProfiles;

Profile bundled_profile(const std::string& name) {
  return Profile::read_csv(std::string(PERSEUS_SOURCE_DIR) + "/data/profiles/" + name + ".csv");
}

struct Solved {
  EnergyProblem problem;
  Frontier frontier;
  Comparison comparison;
};

// Solved once per workload for the whole test program.
const Solved& solved(const Workload& w) {
  static std::map<std::string, std::unique_ptr<Solved>> cache;
  auto& slot = cache[w.name];
  if (!slot) {
    std::vector<Warning> warnings;
    EnergyProblem problem = make_problem(bundled_profile(w.name), {ScheduleKind::k1F1B, 8, 12, 1, false},
                                         {w.unit_time, w.p_blocking, {}}, &warnings);
    Frontier frontier = build_frontier(problem, crawl_frontier(problem));
    ComparisonOptions options;
    options.straggler_ratios = {1.05, 1.1, 1.2, 1.3, 1.4, 1.5};  // the paper's straggler table
    options.clocks = std::make_shared<const FrequencyTable>(FrequencyTable::from_profile(problem, bundled_profile(w.name)));
    Comparison comparison = compare_methods(problem, frontier, options);
    slot = std::make_unique<Solved>(Solved{std::move(problem), std::move(frontier), std::move(comparison)});
  }
  return *slot;
}

TEST(BundledProfiles, AllMaxOfABalancedScheduleTakesTheClosedFormTime) {
  // Stages 0-6 of the bundled profiles are identical Transformer layers: seven of them make a
  // balanced pipeline. All-max runs every instruction at the highest measured clock.
  for (const Workload& w : kWorkloads) {
    const Profile full = bundled_profile(w.name);
    std::vector<OperationProfile> balanced;
    for (const OperationProfile& op : full.operations()) {
      if (op.stage < 7) balanced.push_back(op);
    }
    const Profile profile = Profile::from_operations(std::string(w.name) + " stages 0-6", balanced);
    const auto fastest_at_top_clock = [&](InstructionKind kind) {
      const Measurement* top = nullptr;
      for (const Measurement& m : full.find(0, kind)->measurements) {
        if (!top || m.frequency_mhz > top->frequency_mhz) top = &m;
      }
      return top->time_s;
    };
    const double tf = fastest_at_top_clock(InstructionKind::kForward), tb = fastest_at_top_clock(InstructionKind::kBackward);
    for (int m : {1, 7, 12, 24}) {
      std::vector<Warning> warnings;
      const EnergyProblem problem =
          make_problem(profile, {ScheduleKind::k1F1B, 7, m, 1, false}, {w.unit_time, w.p_blocking, {}}, &warnings);
      // The profile's own measurements: the solver's Pareto filter may drop the top clock.
      const auto measured = std::make_shared<const FrequencyTable>(FrequencyTable::from_profile(problem, profile));
      const EmulationResult r = emulate(problem, plan_from_clocks(problem, all_max(problem, *measured).clock_mhz, measured), {});
      const double expected = (m + 7 - 1) * (tf + tb);
      EXPECT_NEAR(r.iteration_time_s, expected, 1e-9 * expected) << w.name << " M=" << m;
      EXPECT_EQ(r.switches, 0);
    }
  }
}

// "Planned time" is the frontier's own figure for a plan, its measured time. The crawl's
// quantised time (planned_time_q x unit time) floors every duration to the unit, so plans
// take longer than it (bloom-176b+a100-sxm: 2.818 s against 2.797 s); frontier.csv keeps it
// as `planned_time`, for comparison with the reference only.
TEST(BundledProfiles, EveryFrontierPlanEmulatesToItsMeasuredTimeAndEnergy) {
  for (const Workload& w : kWorkloads) {
    SCOPED_TRACE(w.name);
    const auto& [problem, frontier, comparison] = solved(w);
    ASSERT_GT(frontier.points.size(), 100u);
    const auto clocks = std::make_shared<const FrequencyTable>(FrequencyTable::from_problem(problem));
    EmulationConfig instant, nvidia;
    nvidia.switch_latency_s = 0.01;
    std::size_t plans_with_late_switches = 0, plans_warned = 0;
    for (std::size_t i = 0; i < frontier.points.size(); ++i) {
      const FrontierPoint& point = frontier.points[i];
      const ExecutionPlan plan = plan_from_choice(problem, point.option_choice(), clocks);
      // Instant switching: exactly the core's measured figures.
      const EmulationResult r = emulate(problem, plan, instant);
      ASSERT_NEAR(r.iteration_time_s, point.measured.time_s, 1e-9 * point.measured.time_s) << "point " << i;
      ASSERT_NEAR(r.energy.total_j(), point.measured.energy_j, 1e-9 * point.measured.energy_j) << "point " << i;
      ASSERT_NEAR(r.energy.computation_j, point.measured.computation_energy_j, 1e-9 * point.measured.energy_j);
      // A 10 ms switch: exactly the instant-switching run plus what the emulator reports late
      // switches cost (it re-runs the plan with instant switching to tell); never more than
      // the latency of each late switch; with no late switch, the same figures.
      const EmulationResult s = emulate(problem, plan, nvidia);
      ASSERT_NEAR(s.iteration_time_s, r.iteration_time_s + s.switching_delay_s, 1e-9 * r.iteration_time_s)
          << "point " << i << ": " << s.late_switches << " late switches";
      ASSERT_NEAR(s.energy.computation_j, r.energy.computation_j + s.switching_energy_j, 1e-9 * r.energy.total_j())
          << "point " << i;
      ASSERT_LE(s.switching_delay_s, nvidia.switch_latency_s * s.late_switches + 1e-9) << "point " << i;
      // The warning: only when late switches cost more than 0.1% of the time or the energy.
      const bool costly = s.switching_delay_s > kSwitchingWarningFraction * s.iteration_time_s ||
                          s.switching_energy_j > kSwitchingWarningFraction * s.energy.total_j();
      ASSERT_EQ(s.warnings.size(), costly ? 1u : 0u) << "point " << i << ": delay " << s.switching_delay_s << " s, "
                                                     << s.switching_energy_j << " J";
      if (s.late_switches == 0) {
        ASSERT_EQ(s.switching_delay_s, 0.0);
        ASSERT_NEAR(s.iteration_time_s, point.measured.time_s, 1e-9 * point.measured.time_s) << "point " << i;
        ASSERT_NEAR(s.energy.total_j(), point.measured.energy_j, 1e-9 * point.measured.energy_j) << "point " << i;
      } else {
        ++plans_with_late_switches;
        plans_warned += costly;
      }
    }
    // Frontier plans switch clocks between consecutive instructions that leave no idle time
    // to hide 10 ms, so many pay some of it: what the checks above account for.
    EXPECT_GT(plans_with_late_switches, 0u);
    // Some pay enough to be warned about (bloom-176b+a100-sxm: 608 of 650), not all: the
    // threshold spares the ones whose late switches cost next to nothing.
    EXPECT_GT(plans_warned, 0u);
    EXPECT_LT(plans_warned, plans_with_late_switches);
  }
}

// Dominance of the baselines' Pareto points, and the stronger iso-time comparison at every
// point they scan: at the baseline's own iteration time, Perseus's best plan blocking for the
// rest is no more expensive. Beyond T* that needs the
// solver to keep options whose *effective* energy (energy - p_blocking x time) is lower even
// where their total is not (what counts once the iteration lasts longer anyway); with only
// the (time, total energy) Pareto options, ZeusGlobal at 1020 MHz beat Perseus by 0.16% on
// bloom-176b+a40. No exception is allowed now.
TEST(BundledProfiles, PerseusDominatesZeusGlobalAndZeusPerStage) {
  std::size_t beyond_t_star = 0;
  for (const Workload& w : kWorkloads) {
    const auto& [problem, frontier, c] = solved(w);
    const MethodCurve& perseus = c.method(kPerseus);
    for (const char* baseline : {kZeusGlobal, kZeusPerStage}) {
      std::size_t checked = 0;
      for (const MethodPoint& b : c.method(baseline).points) {
        // Iso-time, at every point of the scan (its slow end lies beyond T*).
        const MethodPoint* best = best_within(perseus, b.time_s, c.p_blocking_w, c.gpus_per_pipeline);
        ASSERT_NE(best, nullptr);
        const double e = energy_over_window(best->time_s, best->energy_j, b.time_s, c.p_blocking_w, c.gpus_per_pipeline);
        EXPECT_LE(e, b.energy_j * (1 + 1e-12)) << w.name << ": " << baseline << " " << b.setting << " (" << b.time_s
                                               << " s, T* " << c.t_star_s << " s)";
        beyond_t_star += b.time_s > c.t_star_s;
        if (!b.pareto) continue;
        ++checked;
        // Pareto dominance: some Perseus plan is at least as fast and uses at most as much energy.
        const MethodPoint* dominating = nullptr;
        for (const MethodPoint& p : perseus.points) {
          if (p.time_s <= b.time_s * (1 + 1e-12) && p.energy_j <= b.energy_j * (1 + 1e-12)) dominating = &p;
        }
        EXPECT_NE(dominating, nullptr) << w.name << ": " << baseline << " " << b.setting << " (" << b.time_s << " s, "
                                       << b.energy_j << " J) is not dominated";
      }
      EXPECT_GT(checked, 3u) << w.name << " " << baseline;
    }
  }
  // The comparison reaches past T*, where the old exception was: the baselines' slowest
  // clocks take longer than T* on three profiles (on bloom A100, T* is all 855 MHz).
  EXPECT_GT(beyond_t_star, 0u);
}

// The paper's straggler table: for every T'/T, the non-straggler pipelines save at least as
// much with Perseus's T_opt plan as with any baseline's least-energy plan within T'. (Before
// the solver kept options cheaper than blocking, ZeusGlobal won by up to a point at
// T'/T >= 1.3.) The margins are thin at 1.4 and 1.5 (bloom-176b+a100-sxm: 28.82% against
// ZeusPerStage's 28.71% at 1.5), so the comparison is exact, up to float noise.
TEST(BundledProfiles, PerseusWinsTheStragglerTable) {
  for (const Workload& w : kWorkloads) {
    const Comparison& c = solved(w).comparison;
    ASSERT_EQ(c.stragglers.size(), 6u) << w.name;
    for (const StragglerRow& row : c.stragglers) {
      const MethodRow& perseus = row.methods.front();
      ASSERT_EQ(perseus.method, kPerseus);
      ASSERT_TRUE(perseus.available) << w.name << " " << row.ratio;
      for (const MethodRow& r : row.methods) {
        if (!r.available) continue;
        EXPECT_GE(perseus.savings_fraction, r.savings_fraction - 1e-12)
            << w.name << ", T'/T " << row.ratio << ": " << r.method << " " << r.setting;
      }
    }
    // ZeusGlobal answers every ratio; at 1.5 it is within two points of Perseus (the table is
    // not trivially won).
    const auto& last = c.stragglers.back().methods;
    const auto zeus = std::find_if(last.begin(), last.end(), [](const MethodRow& r) { return r.method == kZeusGlobal; });
    ASSERT_NE(zeus, last.end());
    ASSERT_TRUE(zeus->available);
    EXPECT_LT(last.front().savings_fraction - zeus->savings_fraction, 0.02) << w.name;
  }
}

}  // namespace
}  // namespace perseus
