// Plan files: the JSON plan, the freqs_pipeline lists existing deployments load (written,
// and parsed as data, never evaluated), and atomic writes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "perseus/model/errors.hpp"
#include "perseus/plan/output_files.hpp"
#include "perseus/plan/plan_files.hpp"
#include "perseus/solver/frontier.hpp"
#include "synthetic.hpp"
#include "temp_dir.hpp"

namespace perseus {
namespace {

EnergyProblem small_problem() {
  return testing::synthetic_problem({ScheduleKind::k1F1B, 3, 4, 1, false}, 8, 3);
}

TEST(Plan, ListsEveryStagesInstructionsInOrderWithTheirOptions) {
  const EnergyProblem problem = small_problem();
  OptionChoice choice(problem.dag.num_nodes());
  for (std::size_t i = 0; i < choice.size(); ++i) choice[i] = static_cast<std::int32_t>(i % 3);
  const Plan plan = make_plan(problem, choice);
  ASSERT_EQ(plan.stages.size(), 3u);
  for (int s = 0; s < 3; ++s) {
    const auto nodes = problem.dag.stage_nodes(s);
    ASSERT_EQ(plan.stages[s].size(), nodes.size());
    for (std::size_t k = 0; k < nodes.size(); ++k) {
      const Measurement& m = problem.chosen(nodes[k], choice).measurement;
      EXPECT_EQ(plan.stages[s][k].instruction, problem.dag.instruction(nodes[k]));
      EXPECT_EQ(plan.stages[s][k].frequency_mhz, m.frequency_mhz);
      EXPECT_EQ(plan.stages[s][k].knob, m.knob);
      EXPECT_DOUBLE_EQ(plan.stages[s][k].time_s, m.time_s);
    }
  }
  const MeasuredFigures expected = evaluate_measured(problem, choice);
  EXPECT_DOUBLE_EQ(plan.measured.time_s, expected.time_s);
  EXPECT_DOUBLE_EQ(plan.measured.energy_j, expected.energy_j);

  const nlohmann::json json = plan_to_json(plan);
  EXPECT_EQ(json.at("schema"), "perseus.plan/1");
  EXPECT_DOUBLE_EQ(json.at("energy_j").get<double>(),
                   json.at("computation_energy_j").get<double>() + json.at("blocking_energy_j").get<double>());
  EXPECT_EQ(json.at("stages").at(1).at(0).at("frequency_mhz"), plan.stages[1][0].frequency_mhz);
  EXPECT_EQ(json.at("stages").at(2).size(), plan.stages[2].size());
}

TEST(FreqsPipeline, RoundTripsThroughTheExistingFormat) {
  const EnergyProblem problem = small_problem();
  const Plan plan = make_plan(problem, fastest_choice(problem));
  const std::string text = plan_to_freqs_pipeline(plan, {"Iteration 3 cost change: 0.5", "note"});
  EXPECT_NE(text.find("# Iteration 3 cost change: 0.5\n"), std::string::npos);
  const PipelineFrequencies parsed = parse_freqs_pipeline(text, "plan.py");
  ASSERT_EQ(parsed.size(), plan.stages.size());
  for (std::size_t s = 0; s < parsed.size(); ++s) {
    ASSERT_EQ(parsed[s].size(), plan.stages[s].size());
    for (std::size_t k = 0; k < parsed[s].size(); ++k) {
      EXPECT_EQ(parsed[s][k].first, to_string(plan.stages[s][k].instruction.kind));
      EXPECT_EQ(parsed[s][k].second, plan.stages[s][k].frequency_mhz);
    }
  }
}

TEST(FreqsPipeline, ReadsTheFormatsSpecExampleWithCommentsAndPythonSyntax) {
  const std::string text =
      "[\n[('forward', 1020), ('forward', 930), ('backward', 960)],\n"
      "[(\"forward\", 1410,), ('backward', 1410)],  # trailing comment\n]\n"
      "# Iteration 122 cost change: 0.0377\n# Iteration 122 total cost: 1192.41\n";
  const PipelineFrequencies parsed = parse_freqs_pipeline(text, "f.py");
  ASSERT_EQ(parsed.size(), 2u);
  EXPECT_EQ(parsed[0], (StageFrequencies{{"forward", 1020}, {"forward", 930}, {"backward", 960}}));
  EXPECT_EQ(parsed[1], (StageFrequencies{{"forward", 1410}, {"backward", 1410}}));
}

// ["forward", 1410] pairs, as zeus's FrequencySchedule serialises them, read as tuples do:
// Python (zeus's PointSolution evaluates the file) reads both alike.
TEST(FreqsPipeline, ReadsPairsWrittenAsListsAsPythonDoes) {
  const std::string text = "[\n[[\"forward\", 1020], ('backward', 960,)],\n[[\"forward\", 1410,], [\"backward\", 1410]],\n]\n";
  EXPECT_EQ(parse_freqs_pipeline(text, "f.py"),
            (PipelineFrequencies{{{"forward", 1020}, {"backward", 960}}, {{"forward", 1410}, {"backward", 1410}}}));
  try {
    parse_freqs_pipeline("[[[\"forward\", 1410)]]", "f.py");
    ADD_FAILURE() << "accepted a pair opened by '[' and closed by ')'";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("f.py:1:19: expected ']' closing the pair"), std::string::npos) << e.what();
  }
}

// One list of pairs is one rank's schedule, not a plan: said so, with the form a plan takes.
TEST(FreqsPipeline, AFlatListOfPairsIsRefusedAsOneRanksSchedule) {
  for (const char* text : {R"([["forward", 1410], ["backward", 1410]])", "[('forward', 1410), ('backward', 1410)]",
                           "[\n  [ 'forward', 1410]]\n"}) {
    try {
      parse_freqs_pipeline(text, "plan.py");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const InputError& e) {
      const std::string message = e.what();
      EXPECT_TRUE(message.starts_with("plan.py: expected a plan, one list of (instruction, frequency) pairs per "
                                      "pipeline stage in stage order (the freqs_pipeline form: [[('forward', 1410)"))
          << message;
      EXPECT_NE(message.find("got a single list of pairs (one rank's schedule"), std::string::npos) << message;
    }
  }
}

TEST(FreqsPipeline, AnythingButDataIsRejectedWithLineAndColumn) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"__import__('os').system('rm -rf /')", "f.py:1:1: expected '[' opening the list of stages"},
      {"[[('forward', 1410)]]\nimport os\n", "f.py:2:1: expected only comments after the closing ']'"},
      {"[[('forward', 1410)], ]; exec('x')", "f.py:1:24: expected only comments"},
      {"[[('forward', __import__('os'))]]", "f.py:1:15: expected a positive integer frequency"},
      {"[[('forward', 0)]]", "f.py:1:15: expected a positive integer frequency"},
      {"[[('forward', -5)]]", "f.py:1:15: expected a positive integer frequency"},
      {"[[('fwd', 1410)]]", "expected an instruction name (forward, backward, ...)"},
      {"[[('for ward', 1410)]]", "f.py:1:8: expected an instruction name of letters"},
      {"[[('forward' 1410)]]", "expected ',' between instruction and frequency"},
      {"[[('forward', 1410)]", "expected ',' or ']' after a stage list"},
      {"[]", "expected at least one stage"},
      {"", "f.py:1:1: expected '[' opening the list of stages, got 'end of file'"},
  };
  for (const auto& [text, message] : cases) {
    try {
      parse_freqs_pipeline(text, "f.py");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << text << "\n  got: " << e.what();
    }
  }
}

TEST(AtomicWrite, ReplacesWholeFilesAndLeavesNothingOnFailure) {
  testing::TempDir dir;
  const auto path = dir.path() / "plan.json";
  write_file_atomically(path, "first");
  write_file_atomically(path, "second, longer");
  EXPECT_EQ(read_text_file(path), "second, longer");
  EXPECT_THROW(write_file_atomically(dir.path() / "missing" / "plan.json", "x"), InputError);
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 1u);  // no temporary left behind
  EXPECT_THROW(read_text_file(dir.path() / "absent"), InputError);
}

}  // namespace
}  // namespace perseus
