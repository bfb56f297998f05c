// The reference solver's published frontier for Bloom 176B on 8 A100-SXM stages, 1F1B with
// 12 microbatches, tau = 1 ms, p_blocking = 83.64 W (data/golden; docs/solver.md, "Reproducing the
// reference").
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "perseus/profile/profile.hpp"
#include "perseus/solver/crawl.hpp"

namespace perseus {
namespace {

const std::string kData = PERSEUS_SOURCE_DIR "/data";

struct GoldenRow {
  double time;
  double energy;
};

std::vector<GoldenRow> read_golden() {
  std::ifstream in(kData + "/golden/bloom-176b+a100-sxm+1f1b+s8+mb12.csv");
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "time,energy");
  std::vector<GoldenRow> rows;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    GoldenRow row{};
    char comma = 0;
    fields >> row.time >> comma >> row.energy;
    rows.push_back(row);
  }
  return rows;
}

EnergyProblem bloom_problem(bool reference_coefficients) {
  OptionsConfig config{0.001, 83.64, {}};
  if (reference_coefficients) {
    config.overrides = read_cost_overrides(kData + "/golden/bloom-176b+a100-sxm+fit.csv");
  }
  const Profile profile = Profile::read_csv(kData + "/profiles/bloom-176b+a100-sxm.csv");
  std::vector<Warning> warnings;
  return make_problem(profile, {ScheduleKind::k1F1B, 8, 12, 1, false}, config, &warnings);
}

void expect_matches_golden(bool reference_coefficients, double tolerance) {
  const std::vector<GoldenRow> golden = read_golden();
  ASSERT_EQ(golden.size(), 640u);
  const EnergyProblem problem = bloom_problem(reference_coefficients);
  const CrawlResult crawl = crawl_frontier(problem);
  ASSERT_EQ(crawl.steps.size(), golden.size()) << "stop reason: " << crawl.stop_reason;
  double worst = 0.0;
  for (std::size_t i = 0; i < golden.size(); ++i) {
    // Same time grid: the reference prints time_q * tau.
    ASSERT_EQ(static_cast<double>(crawl.steps[i].time_q) * problem.unit_time, golden[i].time) << "row " << i;
    const double energy = crawl.reference_energy(crawl.steps[i], problem);
    worst = std::max(worst, std::abs(energy - golden[i].energy) / golden[i].energy);
  }
  EXPECT_LE(worst, tolerance);
  ::testing::Test::RecordProperty("worst_relative_energy_error", std::to_string(worst));
  std::cout << "worst relative energy error vs golden: " << worst << "\n";
}

TEST(Golden, ReferenceCoefficientsReproduceTheFrontierTo1e6) { expect_matches_golden(true, 1e-6); }

TEST(Golden, OwnFitReproducesTheFrontierTo0Point1Percent) { expect_matches_golden(false, 1e-3); }

}  // namespace
}  // namespace perseus
