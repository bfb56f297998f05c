// Bench command: how far perseus's plans are from the exact optimum (a MILP solved by CBC),
// and from the reference's plans, on the 4-stage pipelines made from the last four stages
// of each shared profile with 4 and 8 microbatches.
//   ./build/bench/optimality_bench [--samples 12] [--time-limit 60]
// For each sampled frontier point at measured time T: gap = E_perseus(T) / E_opt(T) - 1.
// The reference's plan at each crawl step (its frequencies, measured) is compared with
// perseus's plan selected for the same T: perseus must never use more energy.
#include <algorithm>
#include <chrono>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "exact_milp.hpp"
#include "perseus/solver/crawl.hpp"
#include "perseus/solver/frontier.hpp"
#include "workloads.hpp"

using namespace perseus;

int main(int argc, char** argv) {
  CLI::App app{"Optimality gap against CBC on small pipelines"};
  std::size_t samples = 12;
  double time_limit = 60.0;
  std::vector<int> microbatches = {4, 8};
  app.add_option("--samples", samples, "Frontier points per case checked against CBC");
  app.add_option("--time-limit", time_limit, "CBC seconds per point");
  app.add_option("--microbatches", microbatches, "Microbatch counts");
  CLI11_PARSE(app, argc, argv);

  fmt::print("{:<22} {:>2} {:>6} {:>8} {:>12} {:>12} {:>12} {:>10}\n", "profile (last 4 st.)", "M", "points",
             "checked", "worst gap %", "ref worst %", "ref median %", "vs ref J");
  double overall_worst = 0.0;
  bool ever_worse_than_reference = false;
  for (const bench::Workload& w : bench::shared_workloads()) {
    const Profile profile = bench::last_stages(Profile::read_csv(bench::profile_path(w)), 4);
    for (int m : microbatches) {
      const EnergyProblem problem = bench::make_workload_problem(w, profile, 4, m);
      const CrawlResult crawl = crawl_frontier(problem);
      const Frontier frontier = build_frontier(problem, crawl);
      FrontierOptions raw_options;
      raw_options.refine = false;
      // The reference's plans: each crawl step's frequencies, as they are.
      std::vector<MeasuredFigures> reference;
      CrawlCursor cursor(crawl);
      for (std::size_t k = 0; k < crawl.steps.size(); ++k) {
        reference.push_back(evaluate_measured(problem, choice_for_durations(problem, cursor.advance_to(k))));
      }
      // Perseus vs the reference at the reference's own times.
      double most_worse = -1e300;
      for (const MeasuredFigures& ref : reference) {
        const FrontierPoint* ours = select_for_deadline(frontier, ref.time_s);
        if (!ours) continue;
        most_worse = std::max(most_worse, energy_at(problem, *ours, ref.time_s) - ref.energy_j);
      }
      ever_worse_than_reference |= most_worse > 1e-9;
      // Exact optimum at sampled frontier times.
      const std::size_t count = frontier.points.size();
      std::vector<double> gaps, ref_gaps;
      for (std::size_t s = 0; s < std::min(samples, count); ++s) {
        const std::size_t i = samples >= count ? s : s * (count - 1) / (samples - 1);
        const FrontierPoint& point = frontier.points[i];
        const auto exact = testing::solve_exact(problem, point.measured.time_s, time_limit);
        if (!exact) continue;
        const double optimum = exact->measured.energy_j + problem.p_blocking * problem.num_gpus() *
                                                              (point.measured.time_s - exact->measured.time_s);
        gaps.push_back(point.measured.energy_j / optimum - 1.0);
        // The reference's best plan within the same time, counted over that time.
        double best_reference = 1e300;
        for (const MeasuredFigures& ref : reference) {
          if (ref.time_s <= point.measured.time_s + 1e-12) {
            best_reference = std::min(best_reference, ref.energy_j + problem.p_blocking * problem.num_gpus() *
                                                                         (point.measured.time_s - ref.time_s));
          }
        }
        if (best_reference < 1e300) ref_gaps.push_back(best_reference / optimum - 1.0);
      }
      std::sort(ref_gaps.begin(), ref_gaps.end());
      const double worst = gaps.empty() ? 0.0 : *std::max_element(gaps.begin(), gaps.end());
      overall_worst = std::max(overall_worst, worst);
      fmt::print("{:<22} {:>2} {:>6} {:>8} {:>12.4f} {:>12.4f} {:>12.4f} {:>10.4f}\n", w.name, m, count, gaps.size(),
                 100 * worst, ref_gaps.empty() ? 0.0 : 100 * ref_gaps.back(),
                 ref_gaps.empty() ? 0.0 : 100 * ref_gaps[ref_gaps.size() / 2], most_worse);
      std::fflush(stdout);
    }
  }
  fmt::print("worst gap to the exact optimum: {:.4f}%; perseus ever worse than the reference: {}\n",
             100 * overall_worst, ever_worse_than_reference ? "yes" : "no");
  return 0;
}
