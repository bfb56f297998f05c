// EmulatedGpu: clocks from the spec, locking semantics, time and energy accounting against
// hand sums, the event record, and building a spec from a profile.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "perseus/gpu/emulated_gpu.hpp"
#include "perseus/model/errors.hpp"
#include "perseus/profile/profile.hpp"

namespace perseus {
namespace {

using Kind = EmulatedGpuEvent::Kind;
constexpr auto kF = InstructionKind::kForward;
constexpr auto kB = InstructionKind::kBackward;

// Two stages, three clocks; stage 1 also loads data at a constant cost.
EmulatedGpuSpec small_spec() {
  EmulatedGpuSpec spec;
  spec.p_blocking_w = 60.0;
  for (int stage = 0; stage < 2; ++stage) {
    spec.costs[{stage, kF, 1410}] = {0.010 + stage * 0.001, 3.0};
    spec.costs[{stage, kF, 1200}] = {0.012 + stage * 0.001, 2.5};
    spec.costs[{stage, kF, 1005}] = {0.015 + stage * 0.001, 2.2};
    spec.costs[{stage, kB, 1410}] = {0.020, 6.0};
    spec.costs[{stage, kB, 1200}] = {0.024, 5.1};
    spec.costs[{stage, kB, 1005}] = {0.030, 4.7};
  }
  spec.costs[{1, InstructionKind::kLoad, 0}] = {0.002, 0.1};
  return spec;
}

template <typename Action>
std::string error_of(Action&& action) {
  try {
    action();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(EmulatedGpu, ClocksAreTheMeasuredFrequenciesDescending) {
  EmulatedGpu gpu(small_spec());
  EXPECT_EQ(gpu.device_count(), 1);
  EXPECT_EQ(gpu.supported_graphics_clocks(0), (std::vector<int>{1410, 1200, 1005}));
  EXPECT_EQ(gpu.max_memory_clock(0), 1593);
  EXPECT_EQ(gpu.name(0), "Emulated GPU");
  EXPECT_EQ(gpu.graphics_clock_mhz(), 1410);  // unlocked: the top clock
  EXPECT_THROW(gpu.name(1), GpuError);
}

TEST(EmulatedGpu, RunsAtTheLockedClockAndAccumulatesTimeAndEnergy) {
  EmulatedGpu gpu(small_spec());
  const EmulatedCost unlocked = gpu.run(kF, 0);
  EXPECT_DOUBLE_EQ(unlocked.time_s, 0.010);
  gpu.set_locked_graphics_clocks(0, 1200, 1200);
  gpu.run(kB, 1);
  gpu.run(InstructionKind::kLoad, 1);  // constant at every clock
  gpu.set_locked_graphics_clocks(0, 1005, 1005);
  gpu.run(kF, 1);
  gpu.idle(0.5);

  const double time = 0.010 + 0.024 + 0.002 + 0.016 + 0.5;
  const double energy = 3.0 + 5.1 + 0.1 + 2.2 + 60.0 * 0.5;
  EXPECT_NEAR(gpu.now_s(), time, 1e-12);
  EXPECT_NEAR(gpu.energy_j(), energy, 1e-12);
  EXPECT_EQ(gpu.total_energy_mj(0), static_cast<std::uint64_t>(std::llround(energy * 1000)));
  EXPECT_EQ(gpu.power_mw(0), 60'000u);  // idle last
  gpu.run(kB, 0);                       // 4.7 J over 30 ms at 1005 MHz
  EXPECT_EQ(gpu.power_mw(0), static_cast<std::uint64_t>(std::llround(4.7 / 0.030 * 1000)));
}

TEST(EmulatedGpu, LockedRangeRunsAtItsHighestSupportedClock) {
  EmulatedGpu gpu(small_spec());
  gpu.set_locked_graphics_clocks(0, 1000, 1300);
  EXPECT_EQ(gpu.graphics_clock_mhz(), 1200);
  gpu.set_locked_graphics_clocks(0, 0, 5000);
  EXPECT_EQ(gpu.graphics_clock_mhz(), 1410);
  gpu.reset_locked_graphics_clocks(0);
  EXPECT_EQ(gpu.graphics_clock_mhz(), 1410);
}

TEST(EmulatedGpu, LockWithoutASupportedClockInRangeIsRefused) {
  EmulatedGpu gpu(small_spec());
  gpu.set_locked_graphics_clocks(0, 1200, 1200);
  EXPECT_EQ(error_of([&] { gpu.set_locked_graphics_clocks(0, 1300, 1350); }),
            "EmulatedGpu::set_locked_graphics_clocks(device 0, 1300, 1350): Invalid Argument (no supported clock "
            "in range; supported 1005..1410 MHz)");
  EXPECT_THROW(gpu.set_locked_graphics_clocks(0, 1410, 1200), GpuError);  // min > max
  EXPECT_THROW(gpu.set_locked_graphics_clocks(0, 500, 900), GpuError);    // below every clock
  EXPECT_THROW(gpu.set_locked_memory_clocks(0, 2000, 2000), GpuError);
  EXPECT_EQ(gpu.graphics_clock_mhz(), 1200);  // refused locks change nothing
  EXPECT_EQ(gpu.events().size(), 1u);
}

TEST(EmulatedGpu, MissingMeasurementNamesStageInstructionAndClock) {
  EmulatedGpu gpu(small_spec());
  gpu.set_locked_graphics_clocks(0, 1200, 1200);
  EXPECT_EQ(error_of([&] { gpu.run(InstructionKind::kRecompute, 0); }),
            "EmulatedGpu::run: no measurement for stage 0 recompute at 1200 MHz");
  EXPECT_EQ(error_of([&] { gpu.run(kF, 2); }), "EmulatedGpu::run: no measurement for stage 2 forward at 1200 MHz");
  EXPECT_DOUBLE_EQ(gpu.now_s(), 0.0);
}

TEST(EmulatedGpu, RecordsEveryStateChangeAtItsVirtualTime) {
  EmulatedGpu gpu(small_spec());
  gpu.reset_power_limit(0);
  gpu.set_locked_memory_clocks(0, 1593, 1593);
  gpu.run(kF, 0);  // 10 ms at 1410
  gpu.set_locked_graphics_clocks(0, 1005, 1005);
  gpu.run(kF, 0);  // 15 ms at 1005
  gpu.reset_locked_graphics_clocks(0);
  gpu.reset_locked_memory_clocks(0);
  const std::vector<EmulatedGpuEvent> events = gpu.events();
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[0], (EmulatedGpuEvent{Kind::kResetPowerLimit, 0.0, 0, 0}));
  EXPECT_EQ(events[1], (EmulatedGpuEvent{Kind::kLockMemory, 0.0, 1593, 1593}));
  EXPECT_EQ(events[2].kind, Kind::kLockGraphics);
  EXPECT_DOUBLE_EQ(events[2].at_s, 0.010);
  EXPECT_EQ(events[2].min_mhz, 1005);
  EXPECT_EQ(events[3].kind, Kind::kResetGraphics);
  EXPECT_DOUBLE_EQ(events[3].at_s, 0.025);
  EXPECT_EQ(events[4].kind, Kind::kResetMemory);
}

TEST(EmulatedGpu, BadSpecsAreInputErrors) {
  EXPECT_THROW(EmulatedGpu(EmulatedGpuSpec{}), InputError);  // no clocks
  EmulatedGpuSpec only_constant;
  only_constant.costs[{0, InstructionKind::kLoad, 0}] = {0.1, 1.0};
  EXPECT_THROW(EmulatedGpu{only_constant}, InputError);
  EmulatedGpuSpec negative = small_spec();
  negative.costs[{0, kF, 1200}].time_s = -1.0;
  EXPECT_NE(error_of([&] { EmulatedGpu gpu(negative); }).find("stage 0 forward at 1200 MHz"), std::string::npos);
  EmulatedGpuSpec nan_energy = small_spec();
  nan_energy.costs[{1, kB, 1005}].energy_j = std::nan("");
  EXPECT_THROW(EmulatedGpu{nan_energy}, InputError);
  EmulatedGpuSpec bad_power = small_spec();
  bad_power.p_blocking_w = -3.0;
  EXPECT_THROW(EmulatedGpu{bad_power}, InputError);
  EmulatedGpu gpu(small_spec());
  EXPECT_THROW(gpu.idle(-1.0), InputError);
  EXPECT_THROW(gpu.idle(INFINITY), InputError);
}

TEST(EmulatedGpuSpecFromProfile, TakesEveryMeasurementFastestKnobAndForwardForRecompute) {
  const Profile profile = Profile::parse_csv(
      "stage,instruction,frequency,time,energy,attention_configs\n"
      "0,forward,1410,0.010,3.0,1\n"
      "0,forward,1410,0.009,3.3,2\n"  // a faster knob at the same clock wins
      "0,forward,1200,0.012,2.5,1\n"
      "0,backward,1410,0.020,6.0,1\n"
      "0,backward,1200,0.024,5.1,1\n"
      "0,load,1410,0.002,0.1,1\n",  // a single point: the same at every clock
      "tiny.csv");
  const EmulatedGpuSpec spec = emulated_gpu_spec_from_profile(profile, 75.0);
  EXPECT_DOUBLE_EQ(spec.p_blocking_w, 75.0);
  const std::map<EmulatedOperationKey, std::pair<double, double>> expected{
      {{0, kF, 1410}, {0.009, 3.3}},
      {{0, kF, 1200}, {0.012, 2.5}},
      {{0, kB, 1410}, {0.020, 6.0}},
      {{0, kB, 1200}, {0.024, 5.1}},
      {{0, InstructionKind::kLoad, 0}, {0.002, 0.1}},
      {{0, InstructionKind::kRecompute, 1410}, {0.009, 3.3}},
      {{0, InstructionKind::kRecompute, 1200}, {0.012, 2.5}},
  };
  ASSERT_EQ(spec.costs.size(), expected.size());
  for (const auto& [key, figures] : expected) {
    SCOPED_TRACE(std::string(to_string(key.kind)) + " " + std::to_string(key.frequency_mhz));
    ASSERT_TRUE(spec.costs.count(key));
    EXPECT_DOUBLE_EQ(spec.costs.at(key).time_s, figures.first);
    EXPECT_DOUBLE_EQ(spec.costs.at(key).energy_j, figures.second);
  }
  EXPECT_THROW(emulated_gpu_spec_from_profile(profile, -1.0), InputError);
}

TEST(EmulatedGpuSpecFromProfile, BundledProfileGivesItsDistinctFrequenciesAsClocks) {
  const std::string path = std::string(PERSEUS_SOURCE_DIR) + "/data/profiles/gpt3-175b+a100-sxm.csv";
  // Independent reading of the frequency column (the third) and one row to cost.
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::string line;
  std::getline(in, line);
  ASSERT_EQ(line.rfind("stage,instruction,frequency,time,energy", 0), 0u);
  std::set<int, std::greater<>> frequencies;
  std::string first_row;
  while (std::getline(in, line)) {
    if (first_row.empty()) {
      first_row = line;
    }
    std::stringstream fields(line);
    std::string stage, instruction, frequency;
    std::getline(fields, stage, ',');
    std::getline(fields, instruction, ',');
    std::getline(fields, frequency, ',');
    frequencies.insert(std::stoi(frequency));
  }
  EmulatedGpu gpu(emulated_gpu_spec_from_profile(Profile::read_csv(path), 83.64));
  EXPECT_EQ(gpu.supported_graphics_clocks(0), std::vector<int>(frequencies.begin(), frequencies.end()));

  // The first row is "0,forward,1410,<time>,<energy>": running it unlocked costs exactly that.
  std::stringstream fields(first_row);
  std::string stage, instruction, frequency, time, energy;
  std::getline(fields, stage, ',');
  std::getline(fields, instruction, ',');
  std::getline(fields, frequency, ',');
  std::getline(fields, time, ',');
  std::getline(fields, energy, ',');
  ASSERT_EQ(stage + "," + instruction + "," + frequency, "0,forward," + std::to_string(*frequencies.begin()));
  const EmulatedCost cost = gpu.run(kF, 0);
  EXPECT_DOUBLE_EQ(cost.time_s, std::stod(time));
  EXPECT_DOUBLE_EQ(cost.energy_j, std::stod(energy));
}

}  // namespace
}  // namespace perseus
