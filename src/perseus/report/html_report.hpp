// One self-contained HTML page (inline CSS and SVG, no script, nothing fetched) with the
// summary, the frontier plot, the timelines of the T_min and T* plans and the tables.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "perseus/emulator/comparison.hpp"
#include "perseus/emulator/emulator.hpp"
#include "perseus/model/errors.hpp"

namespace perseus::report {

struct ReportInput {
  std::string title;
  // What was run, shown first as (label, value) rows: profile, schedule, p_blocking, ...
  std::vector<std::pair<std::string, std::string>> facts;
  const Comparison* comparison = nullptr;      // required
  const EmulationResult* t_min_run = nullptr;  // the T_min plan emulated (optional)
  const EmulationResult* t_star_run = nullptr; // the T* plan emulated (optional)
  std::vector<LargeScaleRow> large_scale;      // optional
  std::vector<std::string> warnings;
};

// Throws InputError without a comparison.
std::string html_report(const ReportInput& input);

}  // namespace perseus::report
