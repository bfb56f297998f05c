// The Perseus paper's summary figures, from perseus's own comparison: where the savings come
// from (Fig. 7), how they move with the straggler's slowdown (Fig. 8), and the large-scale
// savings as the microbatch count grows (Table 6 as a plot). Standalone SVG, like plots.hpp.
#pragma once

#include <string>
#include <vector>

#include "perseus/emulator/comparison.hpp"
#include "perseus/model/errors.hpp"

namespace perseus::report {

// Per method, its savings versus AllMax when one pipeline straggles at T' = `ratio` x T (the
// straggler row nearest `ratio`), split into intrinsic (what its plan within T saves: after T
// both block alike) and extrinsic (the rest: slowing down into the straggler's wait), as
// stacked bars in percent of AllMax's energy over the window T'. Throws InputError when the
// comparison has no straggler row.
struct SavingsSplit {
  std::string method;
  bool available = false;
  double intrinsic_fraction = 0.0;
  double extrinsic_fraction = 0.0;  // 0 when slowing into the wait saves nothing more
  double total_fraction() const { return intrinsic_fraction + extrinsic_fraction; }
};
std::vector<SavingsSplit> savings_split(const Comparison& comparison, double ratio = 1.2);
std::string savings_breakdown_svg(const Comparison& comparison, double ratio = 1.2);

// Savings versus AllMax of every method against T'/T (the straggler table as lines), with T*/T
// marked on Perseus's line (the paper's star). Throws InputError when the comparison has no
// straggler row.
std::string straggler_savings_svg(const Comparison& comparison);

// Perseus's savings without stragglers (iso-time, and at T* for reference) against the
// microbatches per pipeline, one line per workload. Throws InputError for no rows.
std::string large_scale_svg(const std::vector<LargeScaleRow>& rows);
// The same rows as energy: the whole cluster's energy per iteration (MJ, every GPU of every
// pipeline) under AllMax, Perseus at iso-time and Perseus at T*. Throws InputError for no rows.
std::string large_scale_energy_svg(const std::vector<LargeScaleRow>& rows);

// Several methods' iteration time-energy frontiers on one plot (Kareus's comparison: Megatron-LM,
// + Perseus, Nanobatching + Perseus, Kareus); a method with one point is drawn as a marker.
struct TradeoffSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (time s, energy J), any order
};
std::string tradeoff_curves_svg(const std::string& title, const std::vector<TradeoffSeries>& series);

// General charts for the sections that are not Perseus's comparison (geo-distributed training).
struct ChartSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in x order
  bool dashed = false;
  int colour = -1;  // index into the palette; -1: the series' position
};
struct LineChart {
  std::string css_class, title, x_label, y_label;
  std::vector<ChartSeries> series;
  bool y_from_zero = false;
  bool mark_first_only = false;  // one marker per series, at its smallest x (a frontier's fastest point)
  bool markers = true;           // false: lines only (dense series)
  bool integer_x = false;        // x is a count: ticks at whole numbers only
};
// Lines with a marker at each point (or the first) and a legend on the right. Throws InputError
// for no points.
std::string line_chart_svg(const LineChart& chart);

struct BarChart {
  std::string css_class, title, y_label;
  std::vector<std::string> groups;                // along x
  std::vector<std::string> series;                // bars within a group, with a legend
  std::vector<std::vector<double>> values;        // [series][group]
};
// Grouped bars from zero. Throws InputError when values do not match groups x series.
std::string bar_chart_svg(const BarChart& chart);

}  // namespace perseus::report
