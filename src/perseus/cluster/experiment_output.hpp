// An experiment's results as files (docs/cluster.md): a JSON summary, one CSV row per run, one per
// job (replayable as a trace: read_trace_csv ignores the columns it does not need) and the
// cluster's busy GPUs per round.
#pragma once

#include <string>
#include <vector>

#include "perseus/cluster/experiment.hpp"

namespace perseus::cluster {

std::string experiment_json(const std::vector<ExperimentRun>& runs, const ThroughputMatrix& matrix, const ExperimentSpec& spec);
// policy,aware,space_sharing,energy_slack,jobs_per_hour,seed,window_jobs,unfinished,average_jct_h,makespan_h,util_<gpu>...,
// allocation_gap,cost_dollars,energy_kwh,... (cost and energy empty where unknown)
std::string runs_csv(const std::vector<ExperimentRun>& runs, const ThroughputMatrix& matrix);
// policy,aware,space_sharing,energy_slack,jobs_per_hour,seed,id,job,scale_factor,arrival_s,steps,weight,
// slo_s,entity (the hierarchical policy's; empty for others),start_s,completion_s,jct_s,gpu_s_<gpu>...,
// energy_j,rounds,preemptions,migrations,measured
std::string jobs_csv(const std::vector<ExperimentRun>& runs, const ThroughputMatrix& matrix);
// policy,aware,space_sharing,energy_slack,jobs_per_hour,seed,round,start_s,active_jobs,busy_<gpu>...,power_w
std::string rounds_csv(const std::vector<ExperimentRun>& runs, const ThroughputMatrix& matrix);

}  // namespace perseus::cluster
