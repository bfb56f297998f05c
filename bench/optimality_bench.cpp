// Bench command: how close perseus's plans are to the exact optimum, and to the reference's
// plans, on the 4-stage pipelines made from the last four stages of each bundled profile
// with 4 and 8 microbatches (the yardstick).
//   ./build/bench/optimality_bench [--samples 8] [--deadlines 11] [--steep 0] [--time-limit 60]
//                                  [--cache FILE] [--csv FILE] [--profile NAME] [--certify S]
//                                  [--certify-worst-gap G] [--certify-search-points N] [--certify-search-share X]
// --steep N adds N deadlines evenly over the first 30% of the span (its ends included), where the frontier falls
// steeply and plans are hardest; --cache keeps CBC's results (by profile, M and deadline) in a
// file, so that a rerun of the same deadlines after a change to the solver costs seconds.
//
// The exact optimum at a time T is the least energy of any plan of the problem's options
// whose measured iteration time is at most T, counted over T (its GPUs block until T): a
// MILP solved by COIN-OR CBC (solver/exact_milp.hpp). Where CBC does not prove optimality
// within the time limit, its best plan stands in for the optimum and its best bound gives a
// proven floor; both are reported.
//
// Three comparisons per case:
//  - points:    sampled frontier points, each against the optimum at its own measured time;
//  - deadlines: evenly spread deadlines from the all-max to the all-slowest time, each with
//               the plan `perseus select` picks for it (blocking until the deadline);
//  - reference: every crawl step's plan as the reference runs it (its frequencies, measured);
//               perseus's plan for that step's measured time must never use more energy.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "perseus/solver/crawl.hpp"
#include "perseus/solver/exact_milp.hpp"
#include "perseus/solver/frontier.hpp"
#include "workloads.hpp"

using namespace perseus;

namespace {

// CBC's figures at a deadline (ExactSolution's, without the plan).
struct Exact {
  double energy_at_deadline_j = 0.0, lower_bound_j = 0.0;
  bool proven_optimal = false;
};

struct Gap {
  double to_best = 0.0;   // ours / CBC's best plan - 1
  double to_floor = 0.0;  // ours / CBC's proven bound - 1 (an upper bound on the true gap)
  bool proven = false;
};

Gap compare(double ours_j, const Exact& exact) {
  return {ours_j / exact.energy_at_deadline_j - 1.0, ours_j / exact.lower_bound_j - 1.0, exact.proven_optimal};
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Optimality of perseus's frontier against CBC and the reference, on small pipelines"};
  std::size_t samples = 8;
  int deadlines = 11;
  double time_limit = 60.0;
  std::vector<int> microbatches = {4, 8};
  std::string csv_path;
  app.add_option("--samples", samples, "Frontier points per case checked against CBC");
  app.add_option("--deadlines", deadlines, "Deadlines per case, from all-max to all-slowest, checked against CBC");
  app.add_option("--time-limit", time_limit, "CBC seconds per solve");
  app.add_option("--microbatches", microbatches, "Microbatch counts");
  app.add_option("--csv", csv_path, "Also write every comparison to this CSV file");
  std::string only_profile;
  app.add_option("--profile", only_profile, "Only this bundled profile (e.g. gpt3-175b+a40)");
  int steep = 0;
  app.add_option("--steep", steep, "Also this many deadlines evenly over the first 30% of the span (counted as deadlines)")
      ->check(CLI::NonNegativeNumber);
  std::string cache_path;
  FrontierOptions frontier_options;
  double certify_seconds = 0.0;
  app.add_option("--certify", certify_seconds, "Seconds of certification beyond its default solves (optimize --certify)");
  app.add_option("--certify-worst-gap", frontier_options.certify_worst_gap,
                 "Gap above the bound beyond which certification solves and searches (FrontierOptions::certify_worst_gap)");
  app.add_option("--certify-search-points", frontier_options.certify_search_points,
                 "Points given a round of local search by certification (FrontierOptions::certify_search_points)");
  app.add_option("--certify-search-share", frontier_options.certify_search_share,
                 "Budget share of that search (FrontierOptions::certify_search_share)");
  app.add_option("--cache", cache_path, "CBC's results by profile, M and deadline: read, and appended to");
  CLI11_PARSE(app, argc, argv);

  // CBC's results kept between runs: "key,best_j,bound_j[,proven]" per line.
  std::map<std::string, Exact> cache;
  if (!cache_path.empty()) {
    std::ifstream in(cache_path);
    for (std::string line; std::getline(in, line);) {
      std::istringstream fields(line);
      std::string key, best, bound, proven;
      std::getline(fields, key, ',');
      std::getline(fields, best, ',');
      std::getline(fields, bound, ',');
      std::getline(fields, proven, ',');
      if (!best.empty() && !bound.empty()) cache[key] = {std::stod(best), std::stod(bound), proven == "1"};
    }
  }
  std::ofstream cache_out;
  if (!cache_path.empty()) cache_out.open(cache_path, std::ios::app);

  std::ofstream csv;
  if (!csv_path.empty()) {
    csv.open(csv_path);
    csv << "profile,microbatches,kind,time_s,perseus_j,cbc_best_j,cbc_bound_j,cbc_proven,reference_j\n";
  }
  fmt::print("{:<20} {:>2} {:>6} {:>7} | {:>10} {:>10} {:>7} | {:>10} {:>9} {:>10} | {:>9} {:>10} | {:>7}\n",
             "profile (last 4)", "M", "points", "solve s", "pts worst%", "pts floor%", "proven", "ddl worst%", "ddl mean%",
             "ref worst%", "ref>ours", "max excess", "Tmin LB%");
  double worst_points = 0.0, worst_deadlines = 0.0, worst_excess = -1e300, deadline_means = 0.0;
  int cases = 0;
  int solves = 0, proven = 0;
  for (const bench::Workload& w : bench::bundled_workloads()) {
    if (!only_profile.empty() && w.name != only_profile) continue;
    const Profile profile = bench::last_stages(Profile::read_csv(bench::profile_path(w)), 4);
    for (int m : microbatches) {
      const EnergyProblem problem = bench::make_workload_problem(w, profile, 4, m);
      const double pS = problem.p_blocking * problem.num_gpus();
      const auto exact_at = [&](double deadline) -> std::optional<Exact> {
        const std::string key = fmt::format("{}-4-{}-{:.9f}", w.name, m, deadline);
        if (const auto it = cache.find(key); it != cache.end()) return it->second;
        const auto exact = solve_exact(problem, deadline, {.time_limit_s = time_limit, .start = {}});
        if (!exact) return std::nullopt;
        const Exact figures{exact->energy_at_deadline_j, exact->lower_bound_j, exact->proven_optimal};
        if (cache_out.is_open()) {
          cache_out << fmt::format("{},{:.9f},{:.9f},{}\n", key, figures.energy_at_deadline_j, figures.lower_bound_j,
                                   figures.proven_optimal ? 1 : 0)
                    << std::flush;
        }
        return cache[key] = figures;
      };
      const auto started = std::chrono::steady_clock::now();
      const CrawlResult crawl = crawl_frontier(problem);
      const Frontier frontier = build_frontier(problem, crawl, FrontierOptions(frontier_options).certify_for(certify_seconds));
      const double solve_s = seconds_since(started);
      const auto ours_at = [&](double deadline) {
        const FrontierPoint* point = select_for_deadline(frontier, deadline);
        return point ? energy_at(problem, *point, deadline) : 1e300;
      };

      // The reference's plans: each crawl step's frequencies, as they are.
      std::vector<MeasuredFigures> reference;
      CrawlCursor cursor(crawl);
      for (std::size_t k = 0; k < crawl.steps.size(); ++k) {
        reference.push_back(evaluate_measured(problem, choice_for_durations(problem, cursor.advance_to(k))));
      }
      reference.push_back(evaluate_measured(problem, choice_for_durations(problem, crawl.initial_durations)));
      const auto reference_at = [&](double deadline) {
        double best = 1e300;
        for (const MeasuredFigures& r : reference) {
          if (r.time_s <= deadline + 1e-12) best = std::min(best, r.energy_j + pS * (deadline - r.time_s));
        }
        return best;
      };
      int reference_worse = 0;
      double max_excess = -1e300;  // perseus - reference at the reference's own times (J)
      for (const MeasuredFigures& r : reference) {
        const double excess = ours_at(r.time_s) - r.energy_j;
        max_excess = std::max(max_excess, excess);
        reference_worse += excess < -1e-9;
      }
      worst_excess = std::max(worst_excess, max_excess);

      double case_points = 0.0, case_floor = 0.0, case_deadlines = 0.0, reference_worst = 0.0;
      int case_proven = 0, case_solves = 0;
      const auto record = [&](const char* kind, double time, double ours, const Exact& exact) {
        const Gap gap = compare(ours, exact);
        const double ref = reference_at(time);  // 1e300 when no reference plan is that fast
        if (ref < 1e300) reference_worst = std::max(reference_worst, ref / exact.energy_at_deadline_j - 1.0);
        ++case_solves;
        case_proven += gap.proven;
        if (csv.is_open()) {
          csv << fmt::format("{},{},{},{:.9f},{:.6f},{:.6f},{:.6f},{},{}\n", w.name, m, kind, time, ours,
                             exact.energy_at_deadline_j, exact.lower_bound_j, gap.proven ? 1 : 0,
                             ref < 1e300 ? fmt::format("{:.6f}", ref) : "");
        }
        return gap;
      };
      const std::size_t count = frontier.points.size();
      for (std::size_t s = 0; s < std::min(samples, count); ++s) {
        const std::size_t i = samples >= count ? s : s * (count - 1) / (samples - 1);
        const FrontierPoint& point = frontier.points[i];
        const auto exact = exact_at(point.measured.time_s);
        if (!exact) continue;
        const Gap gap = record("point", point.measured.time_s, point.measured.energy_j, *exact);
        case_points = std::max(case_points, gap.to_best);
        case_floor = std::max(case_floor, gap.to_floor);
      }
      const double fastest = frontier.all_max.time_s;
      const double slowest = evaluate_measured(problem, slowest_choice(problem)).time_s;
      std::vector<double> spread;
      for (int j = 0; j < deadlines; ++j) spread.push_back(fastest + (slowest - fastest) * j / std::max(1, deadlines - 1));
      for (int j = 0; j < steep; ++j) spread.push_back(fastest + 0.3 * (slowest - fastest) * j / std::max(1, steep - 1));
      double deadline_gaps = 0.0;
      int deadline_count = 0;
      for (const double deadline : spread) {
        const auto exact = exact_at(deadline);
        if (!exact) continue;
        const double gap = record("deadline", deadline, ours_at(deadline), *exact).to_best;
        case_deadlines = std::max(case_deadlines, gap);
        deadline_gaps += gap;
        ++deadline_count;
      }
      const double case_deadline_mean = deadline_count ? deadline_gaps / deadline_count : 0.0;
      worst_points = std::max(worst_points, case_points);
      worst_deadlines = std::max(worst_deadlines, case_deadlines);
      deadline_means += case_deadline_mean;
      ++cases;
      solves += case_solves;
      proven += case_proven;
      const FrontierPoint& t_min = frontier.t_min_point();
      const double t_min_bound = frontier.t_min_lower_bound_j.value_or(0.0);
      fmt::print("{:<20} {:>2} {:>6} {:>7.2f} | {:>10.4f} {:>10.4f} {:>3}/{:<3} | {:>10.4f} {:>9.4f} {:>10.4f} | {:>4}/{:<4} {:>10.4f} | {:>7.4f}\n",
                 w.name, m, count, solve_s, 100 * case_points, 100 * case_floor, case_proven, case_solves,
                 100 * case_deadlines, 100 * case_deadline_mean, 100 * reference_worst, reference_worse, reference.size(), max_excess,
                 t_min_bound > 0 ? 100 * (t_min.measured.energy_j / t_min_bound - 1.0) : 0.0);
      std::fflush(stdout);
    }
  }
  fmt::print(
      "worst gap to CBC's best plan: {:.4f}% at frontier points, {:.4f}% at deadlines (mean over the cases of their "
      "mean deadline gap {:.4f}%; {} of {} solves proven optimal); perseus ever worse than the reference: {} "
      "(largest excess {:.6f} J)\n",
      100 * worst_points, 100 * worst_deadlines, cases ? 100 * deadline_means / cases : 0.0, proven, solves,
      worst_excess > 1e-9 ? "yes" : "no", worst_excess);
  return 0;
}
