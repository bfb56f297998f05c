// The comparison tables, presented: as text for a terminal, as CSV, as JSON and as HTML.
#pragma once

#include <ostream>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "perseus/emulator/comparison.hpp"

namespace perseus::report {

// Fixed-width text: the method table (iso-time and least-energy rows), the straggler table
// and the large-scale table.
std::string methods_text(const Comparison& comparison);
std::string stragglers_text(const Comparison& comparison);
std::string large_scale_text(std::span<const LargeScaleRow> rows);

// CSV with a header row.
// window,method,available,setting,time_s,energy_j,savings_j,savings_fraction,slowdown_fraction
void write_methods_csv(std::ostream& out, const Comparison& comparison);
// ratio,t_prime_s,method,available,setting,time_s,energy_j,savings_j,savings_fraction
void write_stragglers_csv(std::ostream& out, const Comparison& comparison);
// method,setting,time_s,energy_j,planned_time_s,planned_energy_j,late_switches,pareto
void write_points_csv(std::ostream& out, const Comparison& comparison);
// workload,microbatches,pipelines,gpus,crawl_steps,frontier_points,solve_s,all_max_time_s,
// all_max_energy_j,perseus_time_s,perseus_energy_j,savings_fraction,t_star_time_s,
// t_star_energy_j,t_star_savings_fraction
void write_large_scale_csv(std::ostream& out, std::span<const LargeScaleRow> rows);

// {"schema": "perseus.comparison/1", "all_max": {...}, "t_min_s", "t_star_s", "iso_time": [...],
//  "min_energy": [...], "stragglers": [...], "methods": [{"method", "points": [...]}]}
// (`points` only with `with_points`).
nlohmann::json comparison_to_json(const Comparison& comparison, bool with_points = false);
nlohmann::json large_scale_to_json(std::span<const LargeScaleRow> rows);

// <table> elements for the HTML report.
std::string methods_html(const Comparison& comparison);
std::string stragglers_html(const Comparison& comparison);
std::string large_scale_html(std::span<const LargeScaleRow> rows);

}  // namespace perseus::report
