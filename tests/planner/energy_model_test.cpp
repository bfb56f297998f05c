// The time/energy-versus-frequency model: its stated error against the four measured profiles
// of the Perseus paper (data/profiles), the fit that produced it, and its physics.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <string>

#include "perseus/model/errors.hpp"
#include "perseus/model/instruction.hpp"
#include "perseus/planner/energy_model.hpp"
#include "perseus/solver/crawl.hpp"
#include "perseus/solver/frontier.hpp"

namespace perseus::planner {
namespace {

std::string bundled_profile(const std::string& name) {
  return std::string(PERSEUS_SOURCE_DIR) + "/data/profiles/" + name + ".csv";
}

ProfileComparison shipped_error(const ReferenceCase& c) {
  const EnergyModel model(*c.gpu, c.gpu->energy);
  const auto layers = model_layers(*c.model, c.workload);
  return compare_profiles(c.measured, synthesize_profile(model, layers, c.boundaries, c.workload.tensor_parallel, {},
                                                         "synthetic " + c.name));
}

// The errors docs/planner.md states for the shipped calibration, as bounds over every
// (stage, instruction, frequency) row: |relative error| median, 90th percentile, maximum.
struct StatedError {
  const char* profile;
  double time_median, time_p90, time_max, energy_median, energy_p90, energy_max;
};
constexpr StatedError kStated[] = {
    {"gpt3-175b+a100-sxm", 0.03, 0.04, 0.07, 0.015, 0.035, 0.07},
    {"bloom-176b+a100-sxm", 0.02, 0.04, 0.06, 0.02, 0.04, 0.07},
    {"gpt3-175b+a40", 0.045, 0.11, 0.17, 0.045, 0.09, 0.16},
    {"bloom-176b+a40", 0.05, 0.16, 0.20, 0.04, 0.11, 0.14},
};

TEST(EnergyModel, ShippedCalibrationMatchesTheMeasuredProfilesWithinTheStatedError) {
  for (const StatedError& stated : kStated) {
    const ReferenceCase c = reference_case(bundled_profile(stated.profile));
    const ProfileComparison e = shipped_error(c);
    SCOPED_TRACE(stated.profile);
    EXPECT_EQ(e.time.count, c.measured.operations().size() * c.measured.operations().front().measurements.size());
    EXPECT_LE(e.time.median, stated.time_median);
    EXPECT_LE(e.time.p90, stated.time_p90);
    EXPECT_LE(e.time.max, stated.time_max);
    EXPECT_LE(e.energy.median, stated.energy_median);
    EXPECT_LE(e.energy.p90, stated.energy_p90);
    EXPECT_LE(e.energy.max, stated.energy_max);
  }
}

TEST(EnergyModel, CalibrationReproducesTheShippedA100Fit) {
  std::vector<ReferenceCase> cases{reference_case(bundled_profile("gpt3-175b+a100-sxm")),
                                   reference_case(bundled_profile("bloom-176b+a100-sxm"))};
  const CalibrationResult fit = calibrate(cases);
  // The refit is at least as good as the shipped constants (which came from it).
  double shipped_sum = 0.0, fitted_sum = 0.0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const ProfileComparison shipped = shipped_error(cases[i]);
    shipped_sum += shipped.time.median + shipped.energy.median;
    fitted_sum += fit.per_case[i].time.median + fit.per_case[i].energy.median;
  }
  EXPECT_LE(fitted_sum, shipped_sum + 0.002);
  EXPECT_LT(fit.rms_relative_error, 0.025);
  // Physically plausible: efficiencies below 1, a voltage floor, a power limit near the
  // profiles' flat top (~475 W).
  EXPECT_LT(fit.params.gemm_efficiency_forward, 1.0);
  EXPECT_LT(fit.params.gemm_efficiency_backward, 1.0);
  EXPECT_GT(fit.params.voltage_floor, 0.5);
  EXPECT_NEAR(fit.params.power_limit_w, 475.0, 25.0);
  EXPECT_GE(fit.params.static_power_w, find_gpu("a100-sxm").idle_power_w);
}

TEST(EnergyModel, HeldOutA100ErrorsAreTheStatedOnes) {
  // docs/planner.md: fitted on one model, the A100-SXM model predicts the other (same GPU)
  // with time medians of 3.2% (GPT-3 -> BLOOM) and 5.7% (BLOOM -> GPT-3), energy medians of
  // 3.3% and 4.2%, p90s up to 13.5%. Bounds with a little room for the fit's starts.
  struct HeldOut {
    const char* fit_on;
    const char* predict;
    double time_median, time_p90, energy_median, energy_p90;
  };
  constexpr HeldOut kHeldOut[] = {{"gpt3-175b+a100-sxm", "bloom-176b+a100-sxm", 0.04, 0.075, 0.04, 0.075},
                                  {"bloom-176b+a100-sxm", "gpt3-175b+a100-sxm", 0.065, 0.15, 0.05, 0.10}};
  for (const HeldOut& h : kHeldOut) {
    SCOPED_TRACE(std::string(h.fit_on) + " -> " + h.predict);
    const CalibrationResult fit = calibrate({reference_case(bundled_profile(h.fit_on))});
    const ReferenceCase target = reference_case(bundled_profile(h.predict));
    const ProfileComparison e = compare_with_reference(target, fit.params);
    std::cout << "held out: time median " << e.time.median << " p90 " << e.time.p90 << ", energy median " << e.energy.median << " p90 " << e.energy.p90 << "\n";
    EXPECT_LE(e.time.median, h.time_median);
    EXPECT_LE(e.time.p90, h.time_p90);
    EXPECT_LE(e.energy.median, h.energy_median);
    EXPECT_LE(e.energy.p90, h.energy_p90);
    // Held out is worse than fitted on the same model, or the test would show nothing.
    const CalibrationResult own = calibrate({target});
    EXPECT_GT(e.time.median + e.energy.median, own.per_case[0].time.median + own.per_case[0].energy.median);
  }
}

TEST(EnergyModel, CalibrationRecoversAKnownModel) {
  // Profiles generated by the model itself must be fitted (almost) exactly.
  const GpuSpec& gpu = find_gpu("a100-sxm");
  EnergyModelParams truth = gpu.energy;
  truth.memory_factor_forward = 0.8;
  truth.memory_factor_backward = 1.5;
  truth.memory_power_w = 120.0;
  const EnergyModel model(gpu, truth);
  std::vector<ReferenceCase> cases;
  for (const char* name : {"gpt3-175b", "bloom-176b"}) {
    ReferenceCase c;
    c.name = name;
    c.model = &find_model(name);
    c.gpu = &gpu;
    c.workload = Workload{1, 8, 2048, false, false};
    const auto layers = model_layers(*c.model, c.workload);
    c.boundaries = reference_boundaries(*c.model, layers.size(), 8);
    c.measured = synthesize_profile(model, layers, c.boundaries, 8, {}, name);
    cases.push_back(std::move(c));
  }
  const CalibrationResult fit = calibrate(cases);
  EXPECT_LT(fit.rms_relative_error, 2e-3);
  for (const ProfileComparison& c : fit.per_case) {
    EXPECT_LT(c.time.max, 5e-3);
    EXPECT_LT(c.energy.max, 5e-3);
  }
}

struct FrontierFigures {
  double t_min, t_star, energy_t_min, energy_t_star, savings;
};

FrontierFigures frontier_of(const Profile& profile) {
  std::vector<Warning> warnings;
  const EnergyProblem problem = make_problem(profile, ScheduleSpec{ScheduleKind::k1F1B, 8, 12, 1, false},
                                             OptionsConfig{0.001, 83.64, {}}, &warnings);
  FrontierOptions options;
  options.local_search_max_nodes = 0;
  const Frontier f = build_frontier(problem, crawl_frontier(problem), options);
  return {f.t_min_point().measured.time_s, f.t_star_point().measured.time_s, f.t_min_point().measured.energy_j,
          f.t_star_point().measured.energy_j, 1.0 - f.t_min_point().measured.energy_j / f.all_max.energy_j};
}

TEST(EnergyModel, FrontierOfTheSyntheticProfileMatchesTheMeasuredOne) {
  // What users see: the frontier of 1F1B, 8 stages x 12 microbatches (the golden setting). The
  // ends of the frontier agree within a few percent; the savings at T_min depend on how much
  // slower the LM-head stage is than the others, which the model gets right for Bloom but
  // underestimates for GPT-3 (docs/planner.md), so they are only checked to be positive.
  for (const char* name : {"gpt3-175b+a100-sxm", "bloom-176b+a100-sxm"}) {
    const ReferenceCase c = reference_case(bundled_profile(name));
    const EnergyModel model(*c.gpu, c.gpu->energy);
    const auto layers = model_layers(*c.model, c.workload);
    const FrontierFigures measured = frontier_of(c.measured);
    const FrontierFigures synthetic = frontier_of(synthesize_profile(model, layers, c.boundaries, 8, {}, name));
    SCOPED_TRACE(name);
    EXPECT_NEAR(synthetic.t_min / measured.t_min, 1.0, 0.04);
    EXPECT_NEAR(synthetic.t_star / measured.t_star, 1.0, 0.04);
    EXPECT_NEAR(synthetic.energy_t_min / measured.energy_t_min, 1.0, 0.07);
    EXPECT_NEAR(synthetic.energy_t_star / measured.energy_t_star, 1.0, 0.04);
    EXPECT_GT(synthetic.savings, 0.05);
    EXPECT_GT(measured.savings, 0.05);
  }
}

TEST(EnergyModel, TimeFallsWithTheClockUntilThePowerLimit) {
  const GpuSpec& gpu = find_gpu("a40");
  const EnergyModel model(gpu, gpu.energy);
  const auto layers = model_layers(find_model("gpt3-175b"), Workload{1, 8, 0, false, false});
  const OperationWork work = operation_work(std::span(layers).subspan(1, 12), InstructionKind::kForward);
  const double bw = collective_bandwidth(gpu, 8, gpu.energy.collective_scale);
  double previous_time = 1e9;
  bool throttled = false;
  std::vector<int> clocks = supported_frequencies(gpu, 600);
  std::reverse(clocks.begin(), clocks.end());  // ascending
  for (int f : clocks) {
    const OperationEstimate e = model.estimate(work, InstructionKind::kForward, f, bw);
    EXPECT_LE(e.time_s, previous_time + 1e-12) << f;
    EXPECT_LE(e.energy_j / e.time_s, gpu.energy.power_limit_w + 1e-6) << f;
    if (e.effective_mhz < f - 1e-9) {
      throttled = true;
      EXPECT_NEAR(e.energy_j / e.time_s, gpu.energy.power_limit_w, 1e-3) << f;
    } else {
      EXPECT_FALSE(throttled) << "once power-limited, every higher clock is too (" << f << " MHz)";
    }
    previous_time = e.time_s;
  }
  EXPECT_TRUE(throttled) << "the A40's flat top above ~1450 MHz is its 300 W limit";
}

TEST(EnergyModel, EnergyOptimalClockIsWhereTheMeasuredOneIs) {
  // Energy falls with the clock while static power dominates less, then rises again; the
  // minimum-energy clock of each measured operation is predicted to within 120 MHz.
  for (const char* name : {"gpt3-175b+a100-sxm", "bloom-176b+a100-sxm"}) {
    const ReferenceCase c = reference_case(bundled_profile(name));
    const EnergyModel model(*c.gpu, c.gpu->energy);
    const auto layers = model_layers(*c.model, c.workload);
    const Profile synthetic = synthesize_profile(model, layers, c.boundaries, 8, {}, "synthetic");
    for (const OperationProfile& measured : c.measured.operations()) {
      auto argmin = [](const OperationProfile& op) {
        return std::min_element(op.measurements.begin(), op.measurements.end(), [](const auto& a, const auto& b) {
                 return a.energy_j < b.energy_j;
               })->frequency_mhz;
      };
      const OperationProfile* predicted = synthetic.find(measured.stage, measured.kind);
      ASSERT_NE(predicted, nullptr);
      EXPECT_NEAR(argmin(*predicted), argmin(measured), 120) << name << " stage " << measured.stage << " "
                                                             << to_string(measured.kind);
    }
  }
}

TEST(EnergyModel, SyntheticProfileIsTheStandardCsv) {
  const GpuSpec& gpu = find_gpu("a100-sxm");
  const EnergyModel model(gpu, gpu.energy);
  const auto layers = model_layers(find_model("gpt3-1.3b"), Workload{2, 1, 0, false, false});
  const std::vector<int> boundaries{0, 7, 13, 19, static_cast<int>(layers.size())};
  const Profile profile = synthesize_profile(model, layers, boundaries, 1, {}, "synthetic");
  const std::string csv = profile_to_csv(profile);
  EXPECT_EQ(csv.rfind("stage,instruction,frequency,time,energy\n", 0), 0u);
  const Profile read = Profile::parse_csv(csv, "round trip");
  read.validate_for(4);
  ASSERT_EQ(read.operations().size(), 8u);
  const ProfileComparison same = compare_profiles(profile, read);
  EXPECT_LT(same.time.max, 1e-8);
  EXPECT_LT(same.energy.max, 1e-8);
  EXPECT_EQ(read.operations().front().measurements.size(), 38u);  // 1410 down to 855
  // Backward costs about twice the forward.
  const double forward = read.find(1, InstructionKind::kForward)->measurements.front().time_s;
  const double backward = read.find(1, InstructionKind::kBackward)->measurements.front().time_s;
  EXPECT_GT(backward / forward, 1.5);
  EXPECT_LT(backward / forward, 2.5);
}

TEST(EnergyModel, BadInputIsReported) {
  const GpuSpec& gpu = find_gpu("a100-sxm");
  const EnergyModel model(gpu, gpu.energy);
  const auto layers = model_layers(find_model("gpt3-1.3b"), Workload{});
  EXPECT_THROW(synthesize_profile(model, layers, std::vector<int>{0, 5, 5, 26}, 1, {}, "x"), InputError);
  EXPECT_THROW(synthesize_profile(model, layers, std::vector<int>{0, 10}, 1, {}, "x"), InputError);
  const Profile a = synthesize_profile(model, layers, std::vector<int>{0, 26}, 1, {}, "a");
  SynthesisOptions other_clocks;
  other_clocks.frequencies = {700, 690};
  const Profile b = synthesize_profile(model, layers, std::vector<int>{0, 26}, 1, other_clocks, "b");
  EXPECT_THROW(compare_profiles(a, b), InputError);
  EXPECT_THROW(reference_case("/nonexistent/no-plus-sign.csv"), InputError);
  EXPECT_THROW(calibrate({}), InputError);
}

}  // namespace
}  // namespace perseus::planner
