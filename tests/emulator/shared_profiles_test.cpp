// The checks issue 3 asks for, on the four shared profiles (8 stages, 1F1B, 12 microbatches,
// the reference unit times): the all-max plan of a balanced schedule takes the closed-form
// time; every frontier plan emulates to its measured time and energy (and stays within its
// time plus the switching latency of its late switches); Perseus's frontier dominates the
// ZeusGlobal and ZeusPerStage frontiers.
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
#include "perseus/solver/crawl.hpp"

namespace perseus {
namespace {

struct Workload {
  std::string name;
  double unit_time;
  double p_blocking;
};

const Workload kWorkloads[] = {{"bloom-176b+a100-sxm", 0.001, 83.64},
                               {"gpt3-175b+a100-sxm", 0.001, 83.64},
                               {"bloom-176b+a40", 0.0001, 70.38},
                               {"gpt3-175b+a40", 0.0001, 70.38}};

Profile shared_profile(const std::string& name) {
  return Profile::read_csv(std::string(PERSEUS_SHARED_DIR) + "/data/profiles/" + name + ".csv");
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
    EnergyProblem problem = make_problem(shared_profile(w.name), {ScheduleKind::k1F1B, 8, 12, 1, false},
                                         {w.unit_time, w.p_blocking, {}}, &warnings);
    Frontier frontier = build_frontier(problem, crawl_frontier(problem));
    ComparisonOptions options;
    options.straggler_ratios = {};
    options.clocks = std::make_shared<const FrequencyTable>(FrequencyTable::from_profile(problem, shared_profile(w.name)));
    Comparison comparison = compare_methods(problem, frontier, options);
    slot = std::make_unique<Solved>(Solved{std::move(problem), std::move(frontier), std::move(comparison)});
  }
  return *slot;
}

TEST(SharedProfiles, AllMaxOfABalancedScheduleTakesTheClosedFormTime) {
  // Stages 0-6 of the shared profiles are identical Transformer layers: seven of them make a
  // balanced pipeline. All-max runs every instruction at the highest measured clock.
  for (const Workload& w : kWorkloads) {
    const Profile full = shared_profile(w.name);
    std::vector<OperationProfile> balanced;
    for (const OperationProfile& op : full.operations()) {
      if (op.stage < 7) balanced.push_back(op);
    }
    const Profile profile = Profile::from_operations(w.name + " stages 0-6", balanced);
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
TEST(SharedProfiles, EveryFrontierPlanEmulatesToItsMeasuredTimeAndEnergy) {
  for (const Workload& w : kWorkloads) {
    SCOPED_TRACE(w.name);
    const auto& [problem, frontier, comparison] = solved(w);
    ASSERT_GT(frontier.points.size(), 100u);
    const auto clocks = std::make_shared<const FrequencyTable>(FrequencyTable::from_problem(problem));
    EmulationConfig instant, nvidia;
    nvidia.switch_latency_s = 0.01;
    std::size_t plans_with_late_switches = 0;
    for (std::size_t i = 0; i < frontier.points.size(); ++i) {
      const FrontierPoint& point = frontier.points[i];
      const ExecutionPlan plan = plan_from_choice(problem, point.option_choice(), clocks);
      // Instant switching: exactly the core's measured figures.
      const EmulationResult r = emulate(problem, plan, instant);
      ASSERT_NEAR(r.iteration_time_s, point.measured.time_s, 1e-9 * point.measured.time_s) << "point " << i;
      ASSERT_NEAR(r.energy.total_j(), point.measured.energy_j, 1e-9 * point.measured.energy_j) << "point " << i;
      ASSERT_NEAR(r.energy.computation_j, point.measured.computation_energy_j, 1e-9 * point.measured.energy_j);
      // A 10 ms switch: at most the planned time plus the latency of each late switch; with
      // no late switch, the same figures.
      const EmulationResult s = emulate(problem, plan, nvidia);
      ASSERT_LE(s.iteration_time_s, point.measured.time_s + nvidia.switch_latency_s * s.late_switches + 1e-9)
          << "point " << i << ": " << s.late_switches << " late switches";
      if (s.late_switches == 0) {
        ASSERT_NEAR(s.iteration_time_s, point.measured.time_s, 1e-9 * point.measured.time_s) << "point " << i;
        ASSERT_NEAR(s.energy.total_j(), point.measured.energy_j, 1e-9 * point.measured.energy_j) << "point " << i;
        ASSERT_TRUE(s.warnings.empty());
      } else {
        ++plans_with_late_switches;
        ASSERT_EQ(s.warnings.size(), 1u);  // the emulator says the plan switches more than it can pay for
      }
    }
    // Frontier plans switch clocks between consecutive instructions that leave no idle time
    // to hide 10 ms, so most pay some of it: what the check above bounds.
    EXPECT_GT(plans_with_late_switches, 0u);
  }
}

// Where the stronger, iso-time comparison fails, and why: the solver's options are the
// profile's Pareto-optimal ones in (time, total energy). A clock below them is slower and
// costs more in total, but its *effective* energy (energy - p_blocking x time) can be lower,
// and once the iteration is longer than T* anyway (a baseline's slow point, a straggler),
// effective energy is what counts. A uniform low clock can then beat Perseus's T* plan
// blocking until then. It happens on bloom-176b+a40 at ZeusGlobal 1020 MHz (8.59 s, T* 8.18 s,
// 0.16%). The fix belongs in the core's option filter, not here.
bool runs_below_the_solvers_options(const EnergyProblem& problem, const MethodPoint& point) {
  for (std::size_t i = 0; i < point.clock_mhz.size(); ++i) {
    int slowest = std::numeric_limits<int>::max();
    for (const Option& o : problem.options_of(static_cast<Dag::NodeId>(i)).options) {
      slowest = std::min(slowest, o.measurement.frequency_mhz);
    }
    if (point.clock_mhz[i] < slowest) return true;
  }
  return false;
}

TEST(SharedProfiles, PerseusDominatesZeusGlobalAndZeusPerStage) {
  std::size_t exceptions = 0;
  for (const Workload& w : kWorkloads) {
    const auto& [problem, frontier, c] = solved(w);
    const MethodCurve& perseus = c.method(kPerseus);
    for (const char* baseline : {kZeusGlobal, kZeusPerStage}) {
      std::size_t checked = 0;
      for (const MethodPoint& b : c.method(baseline).points) {
        if (!b.pareto) continue;
        ++checked;
        // Pareto dominance: some Perseus plan is at least as fast and uses at most as much energy.
        const MethodPoint* dominating = nullptr;
        for (const MethodPoint& p : perseus.points) {
          if (p.time_s <= b.time_s * (1 + 1e-12) && p.energy_j <= b.energy_j * (1 + 1e-12)) dominating = &p;
        }
        EXPECT_NE(dominating, nullptr) << w.name << ": " << baseline << " " << b.setting << " (" << b.time_s << " s, "
                                       << b.energy_j << " J) is not dominated";
        // Iso-time: at the baseline's own iteration time, Perseus's best plan (blocking for the
        // rest) is no more expensive -- up to T*, the span Perseus's frontier covers.
        const MethodPoint* best = best_within(perseus, b.time_s, c.p_blocking_w, c.gpus_per_pipeline);
        ASSERT_NE(best, nullptr);
        const double e = energy_over_window(best->time_s, best->energy_j, b.time_s, c.p_blocking_w, c.gpus_per_pipeline);
        if (b.time_s <= c.t_star_s || e <= b.energy_j * (1 + 1e-12)) {
          EXPECT_LE(e, b.energy_j * (1 + 1e-12)) << w.name << ": " << baseline << " " << b.setting;
          continue;
        }
        ++exceptions;
        EXPECT_TRUE(runs_below_the_solvers_options(problem, b)) << w.name << ": " << baseline << " " << b.setting;
        EXPECT_LE(e, b.energy_j * 1.005) << w.name << ": " << baseline << " " << b.setting;
      }
      EXPECT_GT(checked, 3u) << w.name << " " << baseline;
    }
  }
  EXPECT_LE(exceptions, 2u);
}

}  // namespace
}  // namespace perseus
