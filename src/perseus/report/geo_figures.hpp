// Geo-distributed training in pictures (docs/geo.md): Atlas's Figs. 8-11 as perseus reran them,
// BubbleTea's utilisation against the request rate, and the fill-or-slow policies side by side;
// for `perseus report --geo` and `perseus geo reproduce --out`.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "perseus/geo/reproduce.hpp"
#include "perseus/report/html_report.hpp"

namespace perseus::report {

// (file stem, SVG), in the order the section shows them.
std::vector<std::pair<std::string, std::string>> geo_figures(const geo::GeoEvaluation& evaluation);

// The report's section: a note with the paper's numbers beside ours, the tables and the figures.
ReportSection geo_section(const geo::GeoEvaluation& evaluation);

}  // namespace perseus::report
