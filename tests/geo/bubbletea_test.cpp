#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "perseus/geo/bubbletea.hpp"
#include "perseus/geo/reproduce.hpp"

namespace perseus::geo {
namespace {

TEST(BubbleTea, PrefillsStayInTheBubblesAndTrainingIsUnchanged) {
  const TestbedTraining t = testbed_training();
  BubbleTeaSpec spec;
  spec.arrival_rate = 40.0;
  const BubbleTeaResult r = fill_bubbles(t.training, t.network, spec);
  ASSERT_GT(r.served, 100);
  // Training replayed with the GPUs held by every prefill: the same iteration, to the bit.
  const GeoEmulation with = replay(t.workload, t.network, t.training, r.held);
  EXPECT_EQ(with.iteration_time_s, t.training.iteration_time_s);
  for (std::size_t g = 0; g < t.training.tasks.size(); ++g)
    for (std::size_t i = 0; i < t.training.tasks[g].size(); ++i) EXPECT_EQ(with.tasks[g][i].start_s, t.training.tasks[g][i].start_s);
  // Every part in a bubble, `guard` clear of the next computation; no two overlap on a GPU.
  const double T = t.training.iteration_time_s;
  const auto idle = bubbles(t.training);
  std::vector<std::vector<Interval>> booked(t.training.tasks.size());
  for (const PrefillRequest& q : r.requests) {
    if (!q.served) continue;
    EXPECT_GE(q.parts.front().start_s, q.arrival_s);
    EXPECT_LE(q.parts.front().start_s - q.arrival_s, spec.max_wait_s + 1e-9);
    EXPECT_GE(q.ttft_s, spec.reference_s * q.tokens / spec.reference_tokens - 1e-12);
    for (const PrefillPart& part : q.parts) {
      // Folded into one iteration (a part starting right at k T belongs to iteration k).
      const double start = part.start_s - std::floor((part.start_s + 1e-9) / T) * T;
      const double end = start + (part.end_s - part.start_s);
      const bool inside = std::any_of(idle[part.gpu].begin(), idle[part.gpu].end(), [&](const Interval& b) {
        return b.start_s <= start + 1e-9 && end <= b.end_s - spec.guard_s + 1e-9;
      });
      EXPECT_TRUE(inside) << "request " << q.id << " gpu " << part.gpu << " " << start << "-" << end << " T " << T;
      for (const Interval& other : booked[part.gpu])
        EXPECT_TRUE(part.end_s <= other.start_s + 1e-12 || other.end_s <= part.start_s + 1e-12)
            << part.gpu << ": " << part.start_s << "-" << part.end_s << " vs " << other.start_s << "-" << other.end_s;
      booked[part.gpu].push_back({part.start_s, part.end_s});
    }
  }
  EXPECT_GT(r.utilization, r.training_utilization + 0.2);
  EXPECT_LE(r.utilization, 1.0);
}

TEST(BubbleTea, DeclinesWhatDoesNotFitAndPipelinesAddHops) {
  const TestbedTraining t = testbed_training();
  BubbleTeaSpec spec;
  spec.arrival_rate = 400.0;  // far beyond the bubbles
  spec.iterations = 3;
  const BubbleTeaResult busy = fill_bubbles(t.training, t.network, spec);
  EXPECT_GT(busy.declined, busy.served);
  spec.arrival_rate = 5.0;
  spec.max_wait_s = 0.0;
  const BubbleTeaResult strict = fill_bubbles(t.training, t.network, spec);
  for (const PrefillRequest& q : strict.requests)
    if (q.served) {
      EXPECT_DOUBLE_EQ(q.parts.front().start_s, q.arrival_s);
    }
  // K = 2: each GPU holds half the model; one hop of 8K tokens x 4096 x 2 bytes at 100 Gbps.
  spec.inference_stages = 2;
  const BubbleTeaResult two = fill_bubbles(t.training, t.network, spec);
  EXPECT_NEAR(two.hop_overhead_s, 2.0 * 8192 * 4096 / (100e9 / 8), 1e-12);
  EXPECT_LT(two.inference_memory_bytes, fill_bubbles(t.training, t.network, BubbleTeaSpec{}).inference_memory_bytes);
  spec.inference_stages = 33;  // Llama 3 8B has 32 layers
  EXPECT_THROW(fill_bubbles(t.training, t.network, spec), InputError);
  spec.inference_stages = 1;
  spec.arrival_rate = 0.0;
  EXPECT_THROW(fill_bubbles(t.training, t.network, spec), InputError);
}

}  // namespace
}  // namespace perseus::geo
