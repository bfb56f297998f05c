// One solved, compared and emulated problem shared by the report tests: a synthetic
// 4-stage profile (tests/support/synthetic.hpp), 1F1B with 6 microbatches.
#pragma once

#include <memory>

#include "perseus/emulator/comparison.hpp"
#include "perseus/solver/crawl.hpp"
#include "perseus/solver/frontier.hpp"
#include "synthetic.hpp"

namespace perseus::testing {

struct SolvedFixture {
  EnergyProblem problem;
  Frontier frontier;
  Comparison comparison;
  EmulationResult t_min_run;   // one pipeline
  EmulationResult cluster_run; // 3 pipelines, TP 2, a straggler, slow links, an all-reduce
};

inline const SolvedFixture& solved_fixture() {
  static const std::unique_ptr<SolvedFixture> fixture = [] {
    auto f = std::make_unique<SolvedFixture>(SolvedFixture{
        synthetic_problem({ScheduleKind::k1F1B, 4, 6, 1, false}, 8, 11), {}, {}, {}, {}});
    FrontierOptions quick;
    quick.local_search_max_nodes = 0;  // any frontier will do for drawing it
    f->frontier = build_frontier(f->problem, crawl_frontier(f->problem), quick);
    f->comparison = compare_methods(f->problem, f->frontier);
    const ExecutionPlan plan = plan_from_choice(f->problem, f->frontier.t_min_point().option_choice());
    f->t_min_run = emulate(f->problem, plan, {});
    EmulationConfig cluster;
    cluster.data_parallel = 3;
    cluster.tensor_parallel = 2;
    cluster.stragglers = {{2, 1.2, 0.05}};
    cluster.p2p = {0.002, 1e10};
    cluster.activation_bytes = 1e7;
    cluster.gradient_bytes = 1e7;
    cluster.allreduce = {1e-4, 1e10};
    cluster.allreduce_bytes = 1e9;
    f->cluster_run = emulate(f->problem, plan, cluster);
    return f;
  }();
  return *fixture;
}

}  // namespace perseus::testing
