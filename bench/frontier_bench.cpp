// Bench command: solves every shared profile x {12, 24, 48, 96} microbatches (8 stages,
// 1F1B) and prints, per case, DAG size, crawl steps, crawl and frontier time (median of
// --repeat runs), time per step, and the process's peak RSS. Single-threaded.
//   ./build/bench/frontier_bench [--repeat 3] [--profile NAME] [--microbatches M] [--csv]
// Wall time is what a user waits; CPU time (getrusage) is also shown because on a shared
// machine it moves less.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "perseus/solver/crawl.hpp"
#include "perseus/solver/frontier.hpp"
#include "workloads.hpp"

using namespace perseus;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// CPU time of this process: on a shared machine it moves less than wall time does.
double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Frontier benchmark over the shared profiles"};
  int repeat = 3;
  std::string only_profile;
  std::vector<int> microbatches = {12, 24, 48, 96};
  bool csv = false;
  std::string dump_crawl;
  app.add_option("--repeat", repeat, "Runs per case; the median is reported");
  app.add_option("--profile", only_profile, "Only this profile (e.g. gpt3-175b+a40)");
  app.add_option("--microbatches", microbatches, "Microbatch counts to run");
  app.add_flag("--csv", csv, "CSV output");
  app.add_option("--dump-crawl", dump_crawl,
                 "Write every case's crawl (steps and duration changes) to this file, to compare two builds");
  CLI11_PARSE(app, argc, argv);

  if (csv) {
    fmt::print("profile,microbatches,nodes,edges,steps,points,crawl_s,frontier_s,total_s,total_cpu_s,us_per_step\n");
  } else {
    fmt::print("{:<22} {:>4} {:>6} {:>6} {:>7} {:>6} {:>9} {:>10} {:>9} {:>9} {:>9}\n", "profile", "M", "nodes",
               "edges", "steps", "points", "crawl s", "frontier s", "total s", "cpu s", "us/step");
  }
  double sum_total = 0.0, sum_cpu = 0.0;
  std::FILE* dump = dump_crawl.empty() ? nullptr : std::fopen(dump_crawl.c_str(), "w");
  for (const bench::Workload& w : bench::shared_workloads()) {
    if (!only_profile.empty() && w.name != only_profile) continue;
    const Profile profile = Profile::read_csv(bench::profile_path(w));
    for (int m : microbatches) {
      const EnergyProblem problem = bench::make_workload_problem(w, profile, 8, m);
      std::vector<double> crawl_s, frontier_s, total_s, cpu_s;
      std::size_t steps = 0, points = 0;
      for (int r = 0; r < repeat; ++r) {
        const double cpu_start = cpu_seconds();
        auto start = Clock::now();
        const CrawlResult crawl = crawl_frontier(problem);
        crawl_s.push_back(seconds_since(start));
        start = Clock::now();
        const Frontier frontier = build_frontier(problem, crawl);
        frontier_s.push_back(seconds_since(start));
        total_s.push_back(crawl_s.back() + frontier_s.back());
        cpu_s.push_back(cpu_seconds() - cpu_start);
        steps = crawl.steps.size();
        points = frontier.points.size();
        if (dump && r == 0) {
          fmt::print(dump, "case {} {} stop {}\n", w.name, m, crawl.stop_reason);
          for (std::size_t k = 0; k < crawl.steps.size(); ++k) {
            fmt::print(dump, "{} {:.17g} {:.17g}", crawl.steps[k].time_q, crawl.steps[k].fitted_cost,
                       crawl.steps[k].cost_change);
            for (std::size_t i = crawl.change_begin[k]; i < crawl.change_begin[k + 1]; ++i) {
              fmt::print(dump, " {}:{}", crawl.changes[i].node, crawl.changes[i].duration_q);
            }
            fmt::print(dump, "\n");
          }
        }
      }
      const double c = median(crawl_s), f = median(frontier_s), t = median(total_s), cpu = median(cpu_s);
      sum_total += t;
      sum_cpu += cpu;
      const double us_per_step = 1e6 * c / static_cast<double>(std::max<std::size_t>(steps, 1));
      if (csv) {
        fmt::print("{},{},{},{},{},{},{:.4f},{:.4f},{:.4f},{:.4f},{:.1f}\n", w.name, m, problem.dag.num_nodes(),
                   problem.dag.num_edges(), steps, points, c, f, t, cpu, us_per_step);
      } else {
        fmt::print("{:<22} {:>4} {:>6} {:>6} {:>7} {:>6} {:>9.3f} {:>10.3f} {:>9.3f} {:>9.3f} {:>9.1f}\n", w.name, m,
                   problem.dag.num_nodes(), problem.dag.num_edges(), steps, points, c, f, t, cpu, us_per_step);
      }
      std::fflush(stdout);
    }
  }
  if (dump) std::fclose(dump);
  fmt::print(stderr, "sum of medians: {:.2f} s wall, {:.2f} s CPU; peak RSS {:.0f} MB\n", sum_total, sum_cpu,
             peak_rss_mb());
}
