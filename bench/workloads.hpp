// The bundled workloads the benchmarks run: each bundled profile with its unit time.
#pragma once

#include <string>
#include <vector>

#include "perseus/profile/bundled_profiles.hpp"
#include "perseus/profile/profile.hpp"
#include "perseus/solver/problem.hpp"

namespace perseus::bench {

struct Workload {
  std::string name;        // profile file stem, e.g. "bloom-176b+a100-sxm"
  double unit_time = 0.0;  // 1 ms on A100-SXM, 0.1 ms on A40 (the reference runs)
  double p_blocking = 0.0;
};

inline std::vector<Workload> bundled_workloads() {
  std::vector<Workload> workloads;
  for (const BundledProfile& b : kBundledProfiles) workloads.push_back({b.name, b.unit_time, b.p_blocking});
  return workloads;
}

inline std::string profile_path(const Workload& w) {
  return std::string(PERSEUS_SOURCE_DIR) + "/data/profiles/" + w.name + ".csv";
}

// The last `stages` stages of a profile, renumbered from 0.
inline Profile last_stages(const Profile& profile, int stages) {
  std::vector<OperationProfile> kept;
  const int first = profile.num_stages() - stages;
  for (OperationProfile op : profile.operations()) {
    if (op.stage < first) continue;
    op.stage -= first;
    kept.push_back(std::move(op));
  }
  return Profile::from_operations(profile.source() + " (last " + std::to_string(stages) + " stages)", std::move(kept));
}

// The profile's stages `times` times over, renumbered: a long pipeline (32 stages from 8, as
// 175B-class models are planned) from measured operations.
inline Profile repeated_stages(const Profile& profile, int times) {
  std::vector<OperationProfile> kept;
  const int stages = profile.num_stages();
  for (int k = 0; k < times; ++k) {
    for (OperationProfile op : profile.operations()) {
      op.stage += k * stages;
      kept.push_back(std::move(op));
    }
  }
  return Profile::from_operations(profile.source() + " (x" + std::to_string(times) + ")", std::move(kept));
}

inline EnergyProblem make_workload_problem(const Workload& w, const Profile& profile, int stages, int microbatches) {
  std::vector<Warning> warnings;
  return make_problem(profile, {ScheduleKind::k1F1B, stages, microbatches, 1, false},
                      {w.unit_time, w.p_blocking, {}}, &warnings);
}

}  // namespace perseus::bench
