// The external evaluator against a fake one (tests/kareus/fake_evaluator.py): answers, and every
// way it can fail, each a clear error with what was measured before kept.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "perseus/kareus/external_evaluator.hpp"
#include "perseus/kareus/search.hpp"

namespace perseus::kareus {
namespace {

const std::string kFake = "/usr/bin/python3 " PERSEUS_SOURCE_DIR "/tests/kareus/fake_evaluator.py";

Partition partition() {
  const Workload w{planner::find_model("qwen3-1.7b"), planner::find_gpu("a100-sxm"), 8, 1, 2, 4, 2048, 4};
  return layer_partitions(w)[1];  // forward MLP, 4 kernels
}

std::string error_of(const std::string& flags, std::size_t* measured, double timeout = 5.0) {
  ExternalEvaluator evaluator(kFake + " " + flags, timeout);
  const Partition p = partition();
  const KnobSpace space(std::vector<int>{1410}, 3, 4);  // 3 x 10 + 1 = 31 configurations
  ResumableSearch search;
  search.on_sample = [&](const Sample&) { ++*measured; };
  try {
    exhaustive_search(p, space, evaluator, std::move(search));
  } catch (const EvaluatorError& e) {
    return e.what();
  }
  return "(no EvaluatorError)";
}

TEST(ExternalEvaluator, AnswersComeBackAsMeasurements) {
  ExternalEvaluator evaluator(kFake);
  const Partition p = partition();
  const Measurement sequential = evaluator.evaluate(p, Config{1410, 30, -1, -1});
  EXPECT_NEAR(sequential.time_s, 1e-3 * (1.0 + 0.5 / 30), 1e-12);
  EXPECT_NEAR(sequential.static_j, 70.0 * sequential.time_s, 1e-12);
  const Measurement overlapped = evaluator.evaluate(p, Config{705, 10, 1, 2});
  EXPECT_NEAR(overlapped.time_s, 2e-3 * 1.05 / 1.2, 1e-12);
  EXPECT_NEAR(overlapped.dynamic_j, 300.0 * 0.25 * overlapped.time_s, 1e-12);
  EXPECT_EQ(evaluator.name(), "external: " + kFake);
}

TEST(ExternalEvaluator, EveryFailureIsAClearErrorAndKeepsWhatWasMeasured) {
  std::size_t measured = 0;
  std::string e = error_of("--crash-after 5", &measured);
  EXPECT_NE(e.find("ended without answering"), std::string::npos) << e;
  EXPECT_EQ(measured, 5u);
  measured = 0;
  e = error_of("--garbage-after 2", &measured);
  EXPECT_NE(e.find("not JSON: 'Traceback"), std::string::npos) << e;
  EXPECT_EQ(measured, 2u);
  measured = 0;
  e = error_of("--error-after 0", &measured);
  EXPECT_NE(e.find("GPU 3 fell off the bus"), std::string::npos) << e;
  EXPECT_EQ(measured, 0u);
  measured = 0;
  e = error_of("--bad-after 7", &measured);
  EXPECT_NE(e.find("without numbers"), std::string::npos) << e;
  EXPECT_EQ(measured, 7u);
  measured = 0;
  const auto start = std::chrono::steady_clock::now();
  e = error_of("--hang-after 3", &measured, 0.5);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(e.find("no answer within 0.5 s"), std::string::npos) << e;
  EXPECT_EQ(measured, 3u);
  EXPECT_LT(waited, 5.0);  // the hung command was killed, not waited for
  // The error names the configuration it was measuring.
  EXPECT_NE(e.find("MHz"), std::string::npos) << e;
  // A command that cannot run at all ends at its first answer.
  measured = 0;
  ExternalEvaluator missing("/nonexistent/evaluator", 5.0);
  EXPECT_THROW(missing.evaluate(partition(), Config{1410, 3, -1, -1}), EvaluatorError);
}

TEST(ExternalEvaluator, ASearchResumesFromItsKnownSamples) {
  ExternalEvaluator evaluator(kFake);
  const Partition p = partition();
  const KnobSpace space(std::vector<int>{1410, 1395}, 3, 4);
  std::vector<Sample> first_half;
  {
    ExternalEvaluator crashing(kFake + " --crash-after 20", 5.0);
    ResumableSearch search;
    search.on_sample = [&](const Sample& s) { first_half.push_back(s); };
    EXPECT_THROW(exhaustive_search(p, space, crashing, std::move(search)), EvaluatorError);
  }
  ASSERT_EQ(first_half.size(), 20u);
  std::size_t fresh = 0;
  ResumableSearch resume;
  resume.known = first_half;
  resume.on_sample = [&](const Sample&) { ++fresh; };
  const PartitionFrontier resumed = exhaustive_search(p, space, evaluator, std::move(resume));
  EXPECT_EQ(fresh, space.size() - 20);
  EXPECT_EQ(resumed.samples.size(), space.size());
  const PartitionFrontier whole = exhaustive_search(p, space, evaluator);
  EXPECT_DOUBLE_EQ(resumed.hypervolume_total, whole.hypervolume_total);
  // A known sample that is not this space's is refused.
  ResumableSearch wrong;
  wrong.known = {Sample{0, Config{1200, 1, 0, 0}, {}}};
  EXPECT_THROW(exhaustive_search(p, space, evaluator, std::move(wrong)), InputError);
}

}  // namespace
}  // namespace perseus::kareus
