// One self-contained HTML page (inline CSS and SVG, no script, nothing fetched) with the
// summary, the frontier plot, the timelines of the T_min and T* plans and the tables.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "perseus/emulator/comparison.hpp"
#include "perseus/emulator/emulator.hpp"
#include "perseus/model/errors.hpp"
#include "perseus/report/figures.hpp"

namespace perseus::report {

// A section after Perseus's own: a heading, a note, tables (HTML) and figures (SVG).
struct ReportSection {
  std::string id, title, note;
  std::string tables_html;
  std::vector<std::string> figures;
};

struct ReportInput {
  std::string title;
  // What was run, shown first as (label, value) rows: profile, schedule, p_blocking, ...
  std::vector<std::pair<std::string, std::string>> facts;
  const Comparison* comparison = nullptr;      // required
  const EmulationResult* t_min_run = nullptr;  // the T_min plan emulated (optional)
  const EmulationResult* t_star_run = nullptr; // the T* plan emulated (optional)
  std::vector<LargeScaleRow> large_scale;      // optional
  // Optional: iteration frontiers of several methods to draw on one plot (perseus kareus
  // compare's), with the section's title.
  std::vector<TradeoffSeries> method_frontiers;
  std::string method_frontiers_title;
  std::vector<ReportSection> sections;  // optional, last
  std::vector<std::string> warnings;
};

// Throws InputError without a comparison.
std::string html_report(const ReportInput& input);

// A page of sections only (the same style), for results that are not Perseus's comparison:
// `perseus cluster simulate --out`.
std::string html_page(const std::string& title, const std::string& lead,
                      const std::vector<std::pair<std::string, std::string>>& facts, const std::vector<ReportSection>& sections);

}  // namespace perseus::report
