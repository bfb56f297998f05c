#include "perseus/report/cluster_figures.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "perseus/model/errors.hpp"
#include "perseus/report/figures.hpp"
#include "perseus/report/svg.hpp"

namespace perseus::report {
namespace {

using cluster::ExperimentRun;

std::string key(const ExperimentRun& r) { return cluster::variant_name(r.variant); }

// Variants in the order they first appear.
std::vector<std::string> variants(const std::vector<ExperimentRun>& runs) {
  std::vector<std::string> out;
  for (const ExperimentRun& r : runs)
    if (std::find(out.begin(), out.end(), key(r)) == out.end()) out.push_back(key(r));
  return out;
}

// The variant's first run (first seed) at `rate`; nullptr if none.
const ExperimentRun* first_run(const std::vector<ExperimentRun>& runs, const std::string& variant, double rate) {
  const auto it = std::find_if(runs.begin(), runs.end(),
                               [&](const ExperimentRun& r) { return key(r) == variant && r.jobs_per_hour == rate; });
  return it == runs.end() ? nullptr : &*it;
}

double highest_rate(const std::vector<ExperimentRun>& runs) {
  double rate = 0.0;
  for (const ExperimentRun& r : runs) rate = std::max(rate, r.jobs_per_hour);
  return rate;
}

std::string td(const std::string& text) { return "<td>" + escape_xml(text) + "</td>"; }

}  // namespace

std::vector<std::pair<std::string, std::string>> cluster_figures(const std::vector<ExperimentRun>& runs,
                                                                 const cluster::ThroughputMatrix& matrix) {
  std::vector<std::pair<std::string, std::string>> out;
  if (runs.empty()) return out;
  const std::vector<std::string> names = variants(runs);
  std::map<double, int> rates;
  for (const ExperimentRun& r : runs) rates[r.jobs_per_hour] = 1;

  if (rates.size() >= 2) {
    LineChart chart{"cluster-load", "Average JCT against the input load (mean over seeds)", "input job rate (jobs/hour)",
                    "average JCT (hours)", {}, true};
    for (std::size_t v = 0; v < names.size(); ++v) {
      ChartSeries s{names[v], {}, false, static_cast<int>(v)};
      for (const auto& [rate, unused] : rates) {
        double sum = 0.0;
        int n = 0;
        for (const ExperimentRun& r : runs)
          if (key(r) == names[v] && r.jobs_per_hour == rate) sum += r.result.average_jct_s / 3600.0, ++n;
        if (n > 0) s.points.emplace_back(rate, sum / n);
      }
      chart.series.push_back(std::move(s));
    }
    out.emplace_back("jct_vs_load", line_chart_svg(chart));
  }

  const double top = highest_rate(runs);
  // The CDF over the measured window's finished jobs of value(job), each variant's first run at
  // the highest rate.
  const auto cdf = [&](const std::string& id, const std::string& what, const std::string& x_label, auto value) {
    LineChart chart{id, top > 0.0 ? fmt::format("CDF of {} at {:g} jobs/hour (first seed)", what, top) : "CDF of " + what,
                    x_label, "fraction of jobs", {}, true, false, false};
    for (std::size_t v = 0; v < names.size(); ++v) {
      const ExperimentRun* it = first_run(runs, names[v], top);
      if (!it) continue;
      std::vector<double> values;
      for (const cluster::JobOutcome& o : it->result.jobs)
        if (o.finished() && o.measured) values.push_back(value(o));
      std::sort(values.begin(), values.end());
      ChartSeries series{names[v], {}, false, static_cast<int>(v)};
      const std::size_t step = std::max<std::size_t>(1, values.size() / 200);  // at most ~200 points drawn
      for (std::size_t i = 0; i < values.size(); i += step)
        series.points.emplace_back(values[i], static_cast<double>(i + 1) / static_cast<double>(values.size()));
      if (!values.empty()) series.points.emplace_back(values.back(), 1.0);
      if (!series.points.empty()) chart.series.push_back(std::move(series));
    }
    return chart;
  };
  if (LineChart chart = cdf("cluster-cdf", "job completion times", "JCT (hours)", [](const cluster::JobOutcome& o) { return o.jct_s() / 3600.0; });
      !chart.series.empty())
    out.emplace_back("jct_cdf", line_chart_svg(chart));
  // Fig. 5.11b: rho = JCT / the time on 1/n of the cluster.
  if (LineChart chart = cdf("cluster-ftf-cdf", "finish-time fairness", "finish-time fairness rho (JCT / time on 1/n of the cluster)",
                            [](const cluster::JobOutcome& o) { return o.finish_time_fairness(); });
      !chart.series.empty())
    out.emplace_back("ftf_cdf", line_chart_svg(chart));

  if (matrix.has_energy()) {
    // The cluster's power over time, each variant's first run at the highest rate, averaged in
    // buckets of rounds (busy GPUs only: idle ones are not counted).
    LineChart chart{"cluster-power",
                    top > 0.0 ? fmt::format("Power of the jobs' GPUs over time at {:g} jobs/hour (first seed)", top)
                              : std::string("Power of the jobs' GPUs over time"),
                    "time (hours)", "power (kW)", {}, true, false, false};
    for (std::size_t v = 0; v < names.size(); ++v) {
      const ExperimentRun* it = first_run(runs, names[v], top);
      if (!it || it->result.rounds.empty()) continue;
      const auto& rounds = it->result.rounds;
      const std::size_t bucket = std::max<std::size_t>(1, rounds.size() / 300);
      ChartSeries series{names[v], {}, false, static_cast<int>(v)};
      for (std::size_t b = 0; b < rounds.size(); b += bucket) {
        double sum = 0.0;
        const std::size_t end = std::min(rounds.size(), b + bucket);
        for (std::size_t k = b; k < end; ++k) sum += rounds[k].power_w;
        series.points.emplace_back(rounds[b].start_s / 3600.0, sum / static_cast<double>(end - b) / 1000.0);
      }
      chart.series.push_back(std::move(series));
    }
    if (!chart.series.empty()) out.emplace_back("power", line_chart_svg(chart));
  }

  for (std::size_t v = 0; v < names.size(); ++v) {
    const ExperimentRun* it = first_run(runs, names[v], top);
    if (!it || it->result.rounds.empty()) continue;
    const auto& rounds = it->result.rounds;
    LineChart chart{"cluster-busy", fmt::format("Busy GPUs per type over time: {}", names[v]), "time (hours)", "busy GPUs", {}, true, false, false};
    const std::size_t bucket = std::max<std::size_t>(1, rounds.size() / 300);  // averaged to at most ~300 points
    for (int j = 0; j < matrix.num_gpu_types(); ++j) {
      ChartSeries s{matrix.gpu_types[static_cast<std::size_t>(j)], {}, false, j};
      for (std::size_t b = 0; b < rounds.size(); b += bucket) {
        double sum = 0.0;
        const std::size_t end = std::min(rounds.size(), b + bucket);
        for (std::size_t k = b; k < end; ++k) sum += rounds[k].busy_gpus[static_cast<std::size_t>(j)];
        s.points.emplace_back(rounds[b].start_s / 3600.0, sum / static_cast<double>(end - b));
      }
      chart.series.push_back(std::move(s));
    }
    out.emplace_back(fmt::format("busy_gpus_{}", v + 1), line_chart_svg(chart));
  }
  return out;
}

std::string cluster_report_html(const std::vector<ExperimentRun>& runs, const cluster::ThroughputMatrix& matrix,
                                const cluster::ExperimentSpec& spec) {
  if (runs.empty()) throw InputError("the cluster report needs at least one run");
  std::vector<std::pair<std::string, std::string>> facts;
  std::string cluster;
  for (int j = 0; j < matrix.num_gpu_types(); ++j)
    cluster += fmt::format("{}{} {}", j ? ", " : "", spec.simulation.workers[static_cast<std::size_t>(j)], matrix.gpu_types[j]);
  facts.emplace_back("cluster", fmt::format("{} ({} GPUs per server)", cluster, spec.simulation.gpus_per_server));
  facts.emplace_back("trace", spec.trace == cluster::TraceKind::kFile ? spec.trace_file : std::string(to_string(spec.trace)));
  facts.emplace_back("rounds", fmt::format("{:g} s, restart overhead {:g} s", spec.simulation.round_s, spec.simulation.restart_overhead_s));
  if (spec.trace == cluster::TraceKind::kContinuousSingle || spec.trace == cluster::TraceKind::kContinuousMultiple)
    facts.emplace_back("measured jobs", fmt::format("arrivals {} to {}", spec.window_begin, spec.window_end));
  facts.emplace_back("seeds", fmt::format("{} from {}", spec.seeds, spec.first_seed));
  for (const ExperimentRun& r : runs) {
    if (r.variant.policy != cluster::PolicyKind::kHierarchical) continue;
    std::string entities;
    for (const cluster::Entity& e : cluster::entities_of(r.variant))
      entities += fmt::format("{}{} (weight {:g}, {})", entities.empty() ? "" : ", ", e.name, e.weight, to_string(e.policy));
    facts.emplace_back("entities (hierarchical)", entities);
    break;
  }

  // One row per variant and rate: means over seeds.
  std::string table = "<table><thead><tr><th>policy</th><th>jobs/hour</th><th>seeds</th><th>average JCT (h)</th>"
                      "<th>average FTF rho</th><th>makespan (h)</th><th>unfinished</th>";
  for (const std::string& g : matrix.gpu_types) table += "<th>" + escape_xml(g) + " busy</th>";
  table += "<th>allocation gap</th><th>renewed leases</th>";
  if (matrix.has_energy()) table += "<th>energy (kWh)</th>";
  table += "</tr></thead><tbody>";
  std::map<std::pair<std::string, double>, std::vector<const ExperimentRun*>> groups;
  std::vector<std::pair<std::string, double>> order;
  for (const ExperimentRun& r : runs) {
    auto& g = groups[{key(r), r.jobs_per_hour}];
    if (g.empty()) order.emplace_back(key(r), r.jobs_per_hour);
    g.push_back(&r);
  }
  for (const auto& k : order) {
    const auto& g = groups[k];
    const double n = static_cast<double>(g.size());
    double jct = 0.0, rho = 0.0, makespan = 0.0, gap = 0.0, renewed = 0.0, kwh = 0.0;
    int unfinished = 0;
    std::vector<double> util(static_cast<std::size_t>(matrix.num_gpu_types()), 0.0);
    for (const ExperimentRun* r : g) {
      jct += r->result.average_jct_s / 3600.0 / n;
      rho += r->result.average_finish_time_fairness / n;
      makespan += r->result.makespan_s / 3600.0 / n;
      gap += r->result.allocation_gap / n;
      renewed += (r->result.leases ? static_cast<double>(r->result.renewals) / r->result.leases : 0.0) / n;
      unfinished += r->result.window_unfinished;
      kwh += r->result.energy_j / 3.6e6 / n;
      for (std::size_t j = 0; j < util.size(); ++j) util[j] += r->result.utilisation[j] / n;
    }
    table += "<tr>" + td(k.first) + td(k.second > 0.0 ? fmt::format("{:g}", k.second) : "-") + td(fmt::format("{}", g.size())) +
             td(fmt::format("{:.2f}", jct)) + td(fmt::format("{:.2f}", rho)) + td(fmt::format("{:.2f}", makespan)) +
             td(fmt::format("{}", unfinished));
    for (double u : util) table += td(fmt::format("{:.0f}%", 100.0 * u));
    table += td(fmt::format("{:.3f}", gap)) + td(fmt::format("{:.0f}%", 100.0 * renewed));
    if (matrix.has_energy()) table += td(fmt::format("{:.0f}", kwh));
    table += "</tr>";
  }
  table += "</tbody></table>";

  ReportSection results{"runs", "Runs",
                        "Average JCT over the measured jobs; FTF rho: a job's JCT over the time its steps would have taken on 1/n "
                        "of the cluster, n the jobs active as it ran (below 1: better than an equal split); busy: GPU-time leased over GPU-time available; allocation gap: "
                        "the mean over jobs of sum_j |realised - computed| share, averaged over allocations (0 is exact); "
                        "renewed: leases that kept the job's GPUs from the previous round; energy: the measured jobs' GPUs while they ran "
                        "(with energy figures in the matrix). Busy GPUs: lines of types equally busy lie on top of each other.",
                        table, {}};
  for (auto& [stem, svg] : cluster_figures(runs, matrix)) results.figures.push_back(std::move(svg));
  return html_page("perseus cluster simulate", "Simulated: jobs advance at the throughput matrix's rate on the GPU type they hold (or the energy stage's "
                   "slower operating points, or a pair's shared rates with space sharing); "
                   "a policy recomputes the allocation when jobs arrive or finish, and rounds realise it.",
                   facts, {results});
}

}  // namespace perseus::report
