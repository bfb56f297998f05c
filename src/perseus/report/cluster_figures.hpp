// Cluster scheduling in pictures (docs/cluster.md): average JCT against the input load per
// policy (the dissertation's Figs. 5.9a and 5.10a), the CDFs of job completion times (5.9b,
// 5.10b) and of finish-time fairness rho (5.11b) at one load, the jobs' power over time (with
// energy figures) and the busy GPUs of each type over a run; for `perseus cluster simulate --out`.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "perseus/cluster/experiment.hpp"
#include "perseus/report/html_report.hpp"

namespace perseus::report {

// (file stem, SVG), in the order the page shows them: jct_vs_load (two or more rates), jct_cdf,
// ftf_cdf, power (a matrix with energy figures), then busy_gpus_<n> for each variant's run at the highest
// rate and first seed.
std::vector<std::pair<std::string, std::string>> cluster_figures(const std::vector<cluster::ExperimentRun>& runs,
                                                                 const cluster::ThroughputMatrix& matrix);

// The page: what was run, a table of runs (means over seeds) and the figures. InputError for no runs.
std::string cluster_report_html(const std::vector<cluster::ExperimentRun>& runs, const cluster::ThroughputMatrix& matrix,
                                const cluster::ExperimentSpec& spec);

}  // namespace perseus::report
