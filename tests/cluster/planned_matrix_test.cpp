// The throughput matrix planned for catalogue models and GPUs (planned_matrix.hpp), cell by cell
// against the planner itself.
#include <fstream>

#include <gtest/gtest.h>

#include "temp_dir.hpp"

#include "perseus/cluster/planned_matrix.hpp"
#include "perseus/planner/planner.hpp"

namespace perseus::cluster {
namespace {

TEST(PlannedMatrix, EachCellIsThePlannersFrontierAtTheClustersScale) {
  PlannedMatrixSpec spec;
  spec.models = {"bert-large", "gpt3-13b"};
  spec.gpus = {"a40", "h100-sxm"};
  spec.scale_factors = {1, 2};
  spec.operating_points = 3;
  int calls = 0;
  spec.progress = [&](int, int total, const std::string&) {
    ++calls;
    EXPECT_EQ(total, 8);
  };
  const PlannedMatrix p = plan_matrix(spec);
  EXPECT_EQ(calls, 9);  // each cell, then done
  ASSERT_EQ(p.cells.size(), 8u);
  // 13B parameters need ~200 GB of weights, gradients and Adam state: not on one or two GPUs.
  EXPECT_EQ(p.left_out, (std::vector<std::string>{"gpt3-13b x1", "gpt3-13b x2"}));
  EXPECT_FALSE(p.cells[4].fits);
  EXPECT_FALSE(p.cells[4].why_not.empty());
  const ThroughputMatrix& t = p.matrix;
  ASSERT_EQ(t.num_job_types(), 2);
  ASSERT_TRUE(t.has_energy());
  const int one = t.job_index("bert-large x1"), h100 = t.gpu_index("h100-sxm"), a40 = t.gpu_index("a40");

  // The cell against plan_training: one step is one iteration, the all-reduce added.
  planner::PlanRequest request;
  request.model = "bert-large";
  request.gpu = "h100-sxm";
  request.num_gpus = 1;
  request.refine = false;
  request.straggler_slowdowns.clear();
  request.time_model = planner::TimeModel::kProfiles;  // as the matrix times every GPU type
  const planner::PlanReport r = planner::plan_training(request);
  const double t_min = r.frontier.t_min_point().measured.time_s + r.chosen.data_parallel_s;
  EXPECT_DOUBLE_EQ(t.at(one, h100), 1.0 / t_min);
  const auto& points = t.operating_points[one][h100];
  ASSERT_GE(points.size(), 2u);
  ASSERT_LE(points.size(), 3u);
  EXPECT_DOUBLE_EQ(points.front().joules_per_step, r.frontier.t_min_point().measured.energy_j);  // one GPU, no all-reduce
  EXPECT_DOUBLE_EQ(points.back().joules_per_step, r.frontier.least_energy_point().measured.energy_j);
  EXPECT_DOUBLE_EQ(p.cells[1].t_star_energy_j, r.frontier.t_star_point().measured.energy_j);
  for (std::size_t k = 1; k < points.size(); ++k) {
    EXPECT_LT(points[k].steps_per_s, points[k - 1].steps_per_s);
    EXPECT_LT(points[k].joules_per_step, points[k - 1].joules_per_step);  // slower is cheaper on a frontier
  }
  const PlannedCell& cell = p.cells[1];  // bert-large x1 on h100-sxm
  EXPECT_EQ(cell.configuration, planner::describe(r.chosen.config));
  EXPECT_LT(cell.least_energy_j, cell.t_min_energy_j);
  EXPECT_LE(cell.least_energy_j, cell.t_star_energy_j);
  EXPECT_LE(cell.t_min_energy_j, cell.all_max_energy_j * (1.0 + 1e-12));
  // Three generations apart: the H100 is faster; two GPUs are faster than one.
  EXPECT_GT(t.at(one, h100), t.at(one, a40));
  EXPECT_GT(t.at(t.job_index("bert-large x2"), h100), t.at(one, h100));

  // Written and read back unchanged.
  const perseus::testing::TempDir temp;
  const auto path = (temp.path() / "planned.csv").string();
  std::ofstream(path) << throughput_csv(t);
  const ThroughputMatrix back = read_throughput_csv(path);
  EXPECT_EQ(back.steps_per_s, t.steps_per_s);
  ASSERT_EQ(back.operating_points.size(), t.operating_points.size());
  for (int m = 0; m < t.num_job_types(); ++m)
    for (int j = 0; j < t.num_gpu_types(); ++j) {
      ASSERT_EQ(back.operating_points[m][j].size(), t.operating_points[m][j].size());
      for (std::size_t k = 0; k < t.operating_points[m][j].size(); ++k) {
        EXPECT_EQ(back.operating_points[m][j][k].steps_per_s, t.operating_points[m][j][k].steps_per_s);
        EXPECT_EQ(back.operating_points[m][j][k].joules_per_step, t.operating_points[m][j][k].joules_per_step);
      }
    }
}

TEST(PlannedMatrix, TheBundledMatrixIsWhatThePlannerGives) {
  const ThroughputMatrix bundled = read_throughput_csv(bundled_planned_throughputs());
  ASSERT_TRUE(bundled.has_energy());
  EXPECT_EQ(bundled.gpu_types, (std::vector<std::string>{"a40", "a100-sxm", "h100-sxm"}));
  // Replanning every cell takes ~20 s; two models at two scales on every GPU check the rest.
  PlannedMatrixSpec spec;
  spec.models = {"t5-large", "wide-resnet50-8"};
  spec.gpus = default_planned_gpus();
  spec.scale_factors = {1, 4};
  const PlannedMatrix planned = plan_matrix(spec);
  for (int m = 0; m < planned.matrix.num_job_types(); ++m) {
    const int b = bundled.job_index(planned.matrix.job_types[m].name());
    for (int j = 0; j < planned.matrix.num_gpu_types(); ++j) {
      const auto& mine = planned.matrix.operating_points[m][j];
      const auto& theirs = bundled.operating_points[b][j];
      ASSERT_EQ(mine.size(), theirs.size()) << planned.matrix.job_types[m].name() << " on " << planned.matrix.gpu_types[j];
      for (std::size_t k = 0; k < mine.size(); ++k) {
        EXPECT_NEAR(mine[k].steps_per_s, theirs[k].steps_per_s, 1e-9 * theirs[k].steps_per_s);
        EXPECT_NEAR(mine[k].joules_per_step, theirs[k].joules_per_step, 1e-9 * theirs[k].joules_per_step);
      }
    }
  }
  // Models that need more memory than one A40 has are missing there, not zero-filled elsewhere.
  EXPECT_EQ(bundled.at(bundled.job_index("llama3.2-3b x1"), bundled.gpu_index("a40")), 0.0);
  EXPECT_GT(bundled.at(bundled.job_index("llama3.2-3b x1"), bundled.gpu_index("a100-sxm")), 0.0);
}

TEST(PlannedMatrix, BadSpecsAreNamed) {
  PlannedMatrixSpec spec;
  spec.models = {"gpt-17"};
  spec.gpus = {"a40"};
  EXPECT_THROW(plan_matrix(spec), InputError);
  spec.models = {"bert-large"};
  spec.scale_factors = {0};
  EXPECT_THROW(plan_matrix(spec), InputError);
  spec.scale_factors = {1};
  spec.operating_points = 0;
  EXPECT_THROW(plan_matrix(spec), InputError);
  spec.operating_points = 2;
  spec.models = {"gpt3-175b"};  // fits nowhere on one GPU
  try {
    plan_matrix(spec);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no model fits"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace perseus::cluster
