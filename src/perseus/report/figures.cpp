#include "perseus/report/figures.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <span>

#include <fmt/format.h>

#include "perseus/report/svg.hpp"

namespace perseus::report {
namespace {

const char* kStyle =
    "<style>text{font-family:sans-serif;font-size:12px;fill:#222}.small{font-size:10px}"
    ".axis{stroke:#444;fill:none}.grid{stroke:#e3e3e3}.title{font-size:14px;font-weight:bold}</style>";

const char* colour_of(const std::string& method) {
  if (method == kPerseus) return "#d62728";
  if (method == kZeusGlobal) return "#1f77b4";
  if (method == kZeusPerStage) return "#2ca02c";
  if (method == kEnvPipe) return "#9467bd";
  return "#7f7f7f";
}

std::string css_of(const std::string& name) {
  std::string out;
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : '-';
  return out;
}

// A frame with grid, ticks and axis titles; the caller draws inside [left, w - right] x [top, h - bottom].
struct Frame {
  double w, h, left, right, top, bottom;
  LinearScale x, y;
  std::string svg;
};

Frame open_frame(const std::string& cls, const std::string& title, double w, double h, double right,
                 std::pair<double, double> xs, std::pair<double, double> ys, const std::string& x_title,
                 const std::string& y_title, bool x_ticks = true, bool integer_x = false) {
  const double left = 64, top = 34, bottom = 50;
  Frame f{w, h, left, right, top, bottom, LinearScale(xs.first, xs.second, left, w - right),
          LinearScale(ys.first, ys.second, h - bottom, top), {}};
  f.svg = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" class="{0}" viewBox="0 0 {1} {2}" width="{1}" height="{2}" role="img">)",
      cls, px(w), px(h));
  f.svg += "<title>" + escape_xml(title) + "</title>" + kStyle;
  f.svg += R"(<rect x="0" y="0" width="100%" height="100%" fill="#fff"/>)";
  f.svg += fmt::format(R"(<text x="{}" y="20" class="title">{}</text>)", px(left), escape_xml(title));
  const auto yt = nice_ticks(f.y.lo(), f.y.hi(), 6);
  const double y_step = yt.size() > 1 ? yt[1] - yt[0] : 1.0;
  for (double v : yt) {
    f.svg += fmt::format(R"(<line class="grid" x1="{0}" x2="{1}" y1="{2}" y2="{2}"/>)", px(left), px(w - right), px(f.y(v)));
    f.svg += fmt::format(R"(<text x="{}" y="{}" text-anchor="end">{}</text>)", px(left - 6), px(f.y(v) + 4),
                         tick_label(v, y_step));
  }
  if (x_ticks) {
    auto xt = nice_ticks(f.x.lo(), f.x.hi(), 7);
    double x_step = xt.size() > 1 ? xt[1] - xt[0] : 1.0;
    if (integer_x && x_step < 1.0) {  // a count: no tick between two whole numbers
      std::erase_if(xt, [](double v) { return std::abs(v - std::round(v)) > 1e-9; });
      x_step = 1.0;
    }
    for (double v : xt) {
      f.svg += fmt::format(R"(<line class="grid" x1="{0}" x2="{0}" y1="{1}" y2="{2}"/>)", px(f.x(v)), px(top), px(h - bottom));
      f.svg += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle">{}</text>)", px(f.x(v)), px(h - bottom + 16),
                           tick_label(v, x_step));
    }
  }
  f.svg += fmt::format(R"(<rect class="axis" x="{}" y="{}" width="{}" height="{}"/>)", px(left), px(top),
                       px(w - right - left), px(h - bottom - top));
  f.svg += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle">{}</text>)", px((left + w - right) / 2), px(h - 12),
                       escape_xml(x_title));
  f.svg += fmt::format(R"~(<text transform="translate(16,{}) rotate(-90)" text-anchor="middle">{}</text>)~",
                       px((top + h - bottom) / 2), escape_xml(y_title));
  return f;
}

const StragglerRow& nearest_row(const Comparison& c, double ratio) {
  if (c.stragglers.empty()) throw InputError("the comparison has no straggler rows to plot");
  return *std::min_element(c.stragglers.begin(), c.stragglers.end(), [&](const StragglerRow& a, const StragglerRow& b) {
    return std::abs(a.ratio - ratio) < std::abs(b.ratio - ratio);
  });
}

}  // namespace

std::vector<SavingsSplit> savings_split(const Comparison& c, double ratio) {
  const StragglerRow& row = nearest_row(c, ratio);
  // AllMax over the window T' on one pipeline: the savings of a plan within T count there too.
  const double window_all_max =
      energy_over_window(c.all_max_time_s, c.all_max_energy_j, row.t_prime_s, c.p_blocking_w, c.gpus_per_pipeline);
  std::vector<SavingsSplit> out;
  for (const MethodRow& m : row.methods) {
    if (m.method == kAllMax) continue;
    SavingsSplit split{m.method, m.available, 0.0, 0.0};
    for (const MethodRow& iso : c.iso_time) {
      if (iso.method == m.method && iso.available && window_all_max > 0.0) split.intrinsic_fraction = iso.savings_j / window_all_max;
    }
    if (m.available) {
      split.intrinsic_fraction = std::min(split.intrinsic_fraction, m.savings_fraction);
      split.extrinsic_fraction = std::max(0.0, m.savings_fraction - split.intrinsic_fraction);
    }
    out.push_back(split);
  }
  return out;
}

std::string savings_breakdown_svg(const Comparison& c, double ratio) {
  const std::vector<SavingsSplit> splits = savings_split(c, ratio);
  const StragglerRow& row = nearest_row(c, ratio);
  double top_value = 1.0;
  for (const SavingsSplit& s : splits) top_value = std::max(top_value, 100 * s.total_fraction());
  const double w = 620, h = 380;
  Frame f = open_frame("savings-breakdown",
                       fmt::format("Energy savings vs AllMax, one straggler at T'/T = {:g}", row.ratio), w, h, 150,
                       {0.0, static_cast<double>(splits.size())}, {0.0, top_value * 1.15}, "method",
                       "savings (% of AllMax's energy)", false);
  std::string out = std::move(f.svg);
  const double slot = (f.x(1.0) - f.x(0.0));
  for (std::size_t i = 0; i < splits.size(); ++i) {
    const SavingsSplit& s = splits[i];
    const double x0 = f.x(static_cast<double>(i)) + slot * 0.2, bw = slot * 0.6;
    out += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle">{}</text>)", px(x0 + bw / 2), px(h - f.bottom + 16),
                       escape_xml(s.method));
    out += fmt::format(R"(<g class="bar {}">)", css_of(s.method));
    if (!s.available) {
      out += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle" class="small">no plan fits</text>)", px(x0 + bw / 2),
                         px(f.y(0.0) - 6));
    } else {
      const double y_intrinsic = f.y(100 * s.intrinsic_fraction), y_total = f.y(100 * s.total_fraction());
      out += fmt::format(
          R"(<rect class="intrinsic" x="{}" y="{}" width="{}" height="{}" fill="{}"><title>{} intrinsic {:.2f}%</title></rect>)",
          px(x0), px(y_intrinsic), px(bw), px(f.y(0.0) - y_intrinsic), colour_of(s.method), escape_xml(s.method),
          100 * s.intrinsic_fraction);
      out += fmt::format(
          R"(<rect class="extrinsic" x="{}" y="{}" width="{}" height="{}" fill="{}" fill-opacity="0.35" stroke="{}"><title>{} extrinsic {:.2f}%</title></rect>)",
          px(x0), px(y_total), px(bw), px(y_intrinsic - y_total), colour_of(s.method), colour_of(s.method),
          escape_xml(s.method), 100 * s.extrinsic_fraction);
      out += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle" class="small">{:.1f}%</text>)", px(x0 + bw / 2),
                         px(y_total - 4), 100 * s.total_fraction());
    }
    out += "</g>";
  }
  const double lx = w - f.right + 14;
  out += fmt::format(
      R"(<g class="legend"><rect x="{0}" y="{1}" width="14" height="12" fill="#555"/><text x="{2}" y="{3}">intrinsic</text><rect x="{0}" y="{4}" width="14" height="12" fill="#555" fill-opacity="0.35" stroke="#555"/><text x="{2}" y="{5}">extrinsic</text></g>)",
      px(lx), px(f.top + 4), px(lx + 20), px(f.top + 14), px(f.top + 26), px(f.top + 36));
  return out + "</svg>";
}

std::string straggler_savings_svg(const Comparison& c) {
  if (c.stragglers.empty()) throw InputError("the comparison has no straggler rows to plot");
  std::map<std::string, std::vector<std::pair<double, double>>> lines;  // method -> (T'/T, %)
  std::vector<std::string> order;
  double r_lo = std::numeric_limits<double>::infinity(), r_hi = -r_lo, s_hi = 1.0, s_lo = 0.0;
  for (const StragglerRow& row : c.stragglers) {
    r_lo = std::min(r_lo, row.ratio);
    r_hi = std::max(r_hi, row.ratio);
    for (const MethodRow& m : row.methods) {
      if (m.method == kAllMax || !m.available) continue;
      if (!lines.count(m.method)) order.push_back(m.method);
      lines[m.method].emplace_back(row.ratio, 100 * m.savings_fraction);
      s_hi = std::max(s_hi, 100 * m.savings_fraction);
      s_lo = std::min(s_lo, 100 * m.savings_fraction);
    }
  }
  const double star = c.all_max_time_s > 0.0 ? c.t_star_s / c.all_max_time_s : 0.0;
  const auto xs = padded(std::min(r_lo, star > 0.0 ? star : r_lo), std::max(r_hi, star), 0.04);
  const double w = 620, h = 380;
  Frame f = open_frame("straggler-savings", "Energy savings vs AllMax as the straggler slows down", w, h, 150, xs,
                       {s_lo, s_hi * 1.12}, "straggler slowdown T'/T", "savings (% of AllMax's energy)");
  std::string out = std::move(f.svg);
  double legend_y = f.top + 8;
  for (const std::string& method : order) {
    const auto& points = lines[method];
    std::string poly;
    for (const auto& [r, s] : points) poly += px(f.x(r)) + "," + px(f.y(s)) + " ";
    poly.pop_back();
    const char* colour = colour_of(method);
    out += fmt::format(R"(<g class="method {}"><polyline class="series" points="{}" fill="none" stroke="{}" stroke-width="{}"/>)",
                       css_of(method), poly, colour, method == kPerseus ? 2.2 : 1.4);
    for (const auto& [r, s] : points) {
      out += fmt::format(R"(<circle cx="{}" cy="{}" r="3" fill="{}"><title>{} at T'/T = {:g}: {:.2f}%</title></circle>)",
                         px(f.x(r)), px(f.y(s)), colour, escape_xml(method), r, s);
    }
    out += "</g>";
    out += fmt::format(R"(<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="{}" stroke-width="2"/><text x="{}" y="{}">{}</text>)",
                       px(w - f.right + 12), px(w - f.right + 28), px(legend_y), px(legend_y), colour,
                       px(w - f.right + 34), px(legend_y + 4), escape_xml(method));
    legend_y += 20;
  }
  if (star > 0.0) {
    // The paper's star: where T' reaches T*, beyond which waiting only adds blocking energy.
    // Labelled low in the frame, on the side with room (never over the legend).
    const bool near_right = f.x(star) > w - f.right - 110;
    out += fmt::format(
        R"(<g class="marker t-star"><line x1="{0}" x2="{0}" y1="{1}" y2="{2}" stroke="#d62728" stroke-dasharray="5,4"/><text x="{3}" y="{4}" class="small" text-anchor="{5}" style="fill:#d62728">★ T*/T = {6:.3f}</text></g>)",
        px(f.x(star)), px(f.top), px(h - f.bottom), px(f.x(star) + (near_right ? -4 : 4)), px(h - f.bottom - 8),
        near_right ? "end" : "start", star);
  }
  return out + "</svg>";
}

namespace {

// One quantity of the large-scale rows on a log2 axis of microbatches (strong scaling: the GPU
// count under each), a colour per workload and a line style per series.
struct LargeScaleSeries {
  const char* cls;    // css class of the polyline
  const char* label;  // for the legend and the tooltip
  double (*value)(const LargeScaleRow&);
  double width;
  const char* dash;   // "" for solid
};

std::string large_scale_plot(const std::vector<LargeScaleRow>& rows, const std::string& cls, const std::string& title,
                             const std::string& y_title, const char* unit, double y_floor,
                             std::span<const LargeScaleSeries> series) {
  if (rows.empty()) throw InputError("no large-scale rows to plot");
  std::map<std::string, std::vector<const LargeScaleRow*>> by_workload;
  std::vector<std::string> order;
  double m_lo = std::numeric_limits<double>::infinity(), m_hi = -m_lo, y_lo = m_lo, y_hi = -m_lo;
  for (const LargeScaleRow& r : rows) {
    if (!by_workload.count(r.workload)) order.push_back(r.workload);
    by_workload[r.workload].push_back(&r);
    m_lo = std::min(m_lo, std::log2(r.microbatches));
    m_hi = std::max(m_hi, std::log2(r.microbatches));
    for (const LargeScaleSeries& s : series) {
      y_lo = std::min(y_lo, s.value(r));
      y_hi = std::max(y_hi, s.value(r));
    }
  }
  const double w = 680, h = 400;
  const std::pair<double, double> ys = y_floor == 0.0 ? std::pair{0.0, std::max(1.0, y_hi) * 1.12} : padded(y_lo, y_hi, 0.08);
  Frame f = open_frame(cls, title, w, h, 230, padded(m_lo, m_hi, 0.06), ys, "microbatches per pipeline (pipelines x M fixed)",
                       y_title, false);
  std::string out = std::move(f.svg);
  std::map<int, bool> ticked;
  for (const LargeScaleRow& r : rows) {
    if (ticked[r.microbatches]) continue;
    ticked[r.microbatches] = true;
    const double x = f.x(std::log2(r.microbatches));
    out += fmt::format(R"(<line class="grid" x1="{0}" x2="{0}" y1="{1}" y2="{2}"/>)", px(x), px(f.top), px(h - f.bottom));
    out += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle">{} ({} GPUs)</text>)", px(x), px(h - f.bottom + 16),
                       r.microbatches, r.gpus);
  }
  static const char* kPalette[] = {"#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};
  double legend_y = f.top + 8;
  for (std::size_t k = 0; k < order.size(); ++k) {
    auto points = by_workload[order[k]];
    std::sort(points.begin(), points.end(), [](auto* a, auto* b) { return a->microbatches < b->microbatches; });
    const char* colour = kPalette[k % 6];
    out += fmt::format(R"(<g class="workload {}">)", css_of(order[k]));
    for (const LargeScaleSeries& s : series) {
      std::string line;
      for (const LargeScaleRow* r : points) line += px(f.x(std::log2(r->microbatches))) + "," + px(f.y(s.value(*r))) + " ";
      line.pop_back();
      out += fmt::format(R"(<polyline class="series {}" points="{}" fill="none" stroke="{}" stroke-width="{}"{}/>)", s.cls,
                         line, colour, s.width, *s.dash ? fmt::format(R"( stroke-dasharray="{}")", s.dash) : "");
    }
    // Markers on the first series, with every series' value in the tooltip.
    for (const LargeScaleRow* r : points) {
      std::string values;
      for (const LargeScaleSeries& s : series) values += fmt::format(", {} {:.2f}{}", s.label, s.value(*r), unit);
      out += fmt::format(R"(<circle cx="{}" cy="{}" r="3.5" fill="{}"><title>{}, {} microbatches, {} GPUs{}</title></circle>)",
                         px(f.x(std::log2(r->microbatches))), px(f.y(series.front().value(*r))), colour,
                         escape_xml(r->workload), r->microbatches, r->gpus, values);
    }
    out += "</g>";
    out += fmt::format(R"(<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="{}" stroke-width="2"/><text x="{}" y="{}">{}</text>)",
                       px(w - f.right + 12), px(w - f.right + 28), px(legend_y), px(legend_y), colour,
                       px(w - f.right + 34), px(legend_y + 4), escape_xml(order[k]));
    legend_y += 20;
  }
  for (const LargeScaleSeries& s : series) {
    legend_y += 14;
    out += fmt::format(R"(<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="#444" stroke-width="{}"{}/><text x="{}" y="{}" class="small">{}</text>)",
                       px(w - f.right + 12), px(w - f.right + 28), px(legend_y - 3), px(legend_y - 3), s.width,
                       *s.dash ? fmt::format(R"( stroke-dasharray="{}")", s.dash) : "", px(w - f.right + 34),
                       px(legend_y), s.label);
  }
  return out + "</svg>";
}

}  // namespace

std::string large_scale_svg(const std::vector<LargeScaleRow>& rows) {
  static constexpr LargeScaleSeries kSeries[] = {
      {"iso-time", "iso-time (as fast as AllMax)", [](const LargeScaleRow& r) { return 100 * r.savings_fraction; }, 2.0, ""},
      {"t-star", "at T* (slower, least effective energy)", [](const LargeScaleRow& r) { return 100 * r.t_star_savings_fraction; }, 1.2,
       "4,3"}};
  return large_scale_plot(rows, "large-scale-savings", "Perseus's savings without stragglers, strong scaling",
                          "savings (% of AllMax's energy)", "%", 0.0, kSeries);
}

std::string large_scale_energy_svg(const std::vector<LargeScaleRow>& rows) {
  static constexpr LargeScaleSeries kSeries[] = {
      {"all-max", "AllMax", [](const LargeScaleRow& r) { return r.all_max_energy_j / 1e6; }, 1.2, "1,3"},
      {"iso-time", "Perseus, iso-time", [](const LargeScaleRow& r) { return r.perseus_energy_j / 1e6; }, 2.0, ""},
      {"t-star", "Perseus at T*", [](const LargeScaleRow& r) { return r.t_star_energy_j / 1e6; }, 1.2, "4,3"}};
  return large_scale_plot(rows, "large-scale-energy", "Energy per iteration of the whole cluster, strong scaling",
                          "energy per iteration (MJ, every GPU)", " MJ", 1.0, kSeries);
}

std::string tradeoff_curves_svg(const std::string& title, const std::vector<TradeoffSeries>& series) {
  double e_hi = 0.0;
  for (const TradeoffSeries& s : series)
    for (const auto& [t, e] : s.points) e_hi = std::max(e_hi, e);
  const bool kilo = e_hi >= 1e4;
  const double unit = kilo ? 1e3 : 1.0;
  LineChart chart{"tradeoff-curves", title, "iteration time (s)", kilo ? "energy per iteration (kJ)" : "energy per iteration (J)",
                  {}, false, true};
  for (const TradeoffSeries& s : series) {
    ChartSeries line{s.name, {}, false, -1};
    for (const auto& [t, e] : s.points) line.points.emplace_back(t, e / unit);
    chart.series.push_back(std::move(line));
  }
  return line_chart_svg(chart);
}

namespace {
const char* const kChartPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#222222", "#17becf", "#8c564b"};
constexpr std::size_t kChartColours = sizeof(kChartPalette) / sizeof(kChartPalette[0]);
}  // namespace

std::string line_chart_svg(const LineChart& chart) {
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo, y_lo = x_lo, y_hi = -x_lo;
  for (const ChartSeries& s : chart.series)
    for (const auto& [x, y] : s.points) {
      x_lo = std::min(x_lo, x), x_hi = std::max(x_hi, x), y_lo = std::min(y_lo, y), y_hi = std::max(y_hi, y);
    }
  if (!std::isfinite(x_lo)) throw InputError(fmt::format("{}: no points to plot", chart.title));
  if (chart.y_from_zero) y_lo = std::min(0.0, y_lo);
  // The legend's column fits the longest name (about 7 px a character at the legend's size).
  std::size_t longest = 0;
  for (const ChartSeries& s : chart.series) longest = std::max(longest, s.name.size());
  const double legend = std::max(200.0, 48.0 + 7.0 * static_cast<double>(longest));
  const double w = 520 + legend, h = 400;
  Frame f = open_frame(chart.css_class, chart.title, w, h, legend, padded(x_lo, x_hi, 0.04),
                       padded(y_lo, y_hi, chart.y_from_zero ? 0.0 : 0.06), chart.x_label, chart.y_label, true,
                       chart.integer_x);
  std::string out = std::move(f.svg);
  double legend_y = f.top + 8;
  for (std::size_t k = 0; k < chart.series.size(); ++k) {
    std::vector<std::pair<double, double>> points = chart.series[k].points;
    std::sort(points.begin(), points.end());
    const std::size_t pick = chart.series[k].colour >= 0 ? static_cast<std::size_t>(chart.series[k].colour) : k;
    const char* colour = kChartPalette[pick % kChartColours];
    const char* dash = chart.series[k].dashed ? R"( stroke-dasharray="6 4")" : "";
    out += fmt::format(R"(<g class="series {}">)", css_of(chart.series[k].name));
    if (points.size() > 1) {
      std::string poly;
      for (const auto& [x, y] : points) poly += px(f.x(x)) + "," + px(f.y(y)) + " ";
      poly.pop_back();
      out += fmt::format(R"(<polyline points="{}" fill="none" stroke="{}" stroke-width="2"{}/>)", poly, colour, dash);
    }
    for (const auto& [x, y] : points) {
      if (!chart.markers && !chart.mark_first_only) break;
      out += fmt::format(R"(<circle cx="{}" cy="{}" r="{}" fill="{}"><title>{}: {:g}, {:.4g}</title></circle>)", px(f.x(x)),
                         px(f.y(y)), chart.mark_first_only && points.size() == 1 ? 5 : 3, colour,
                         escape_xml(chart.series[k].name), x, y);
      if (chart.mark_first_only) break;
    }
    out += "</g>";
    out += fmt::format(R"(<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="{}" stroke-width="2"{}/><text x="{}" y="{}">{}</text>)",
                       px(w - f.right + 12), px(w - f.right + 32), px(legend_y), px(legend_y), colour, dash,
                       px(w - f.right + 38), px(legend_y + 4), escape_xml(chart.series[k].name));
    legend_y += 20;
  }
  return out + "</svg>";
}

std::string bar_chart_svg(const BarChart& chart) {
  if (chart.groups.empty() || chart.series.empty() || chart.values.size() != chart.series.size())
    throw InputError(fmt::format("{}: one row of values per series expected", chart.title));
  double top_value = 0.0;
  for (const auto& row : chart.values) {
    if (row.size() != chart.groups.size()) throw InputError(fmt::format("{}: one value per group expected", chart.title));
    for (double v : row) top_value = std::max(top_value, v);
  }
  const double w = 720, h = 400;
  Frame f = open_frame(chart.css_class, chart.title, w, h, 200, {0.0, static_cast<double>(chart.groups.size())},
                       {0.0, top_value > 0.0 ? top_value * 1.1 : 1.0}, "", chart.y_label, false);
  std::string out = std::move(f.svg);
  const double slot = f.x(1.0) - f.x(0.0);
  const double bar = slot * 0.8 / static_cast<double>(chart.series.size());
  for (std::size_t g = 0; g < chart.groups.size(); ++g) {
    const double x0 = f.x(static_cast<double>(g)) + slot * 0.1;
    out += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle">{}</text>)", px(x0 + slot * 0.4), px(h - f.bottom + 16),
                       escape_xml(chart.groups[g]));
    for (std::size_t k = 0; k < chart.series.size(); ++k) {
      const double v = chart.values[k][g];
      out += fmt::format(R"(<rect class="bar" x="{}" y="{}" width="{}" height="{}" fill="{}"><title>{}, {}: {:.4g}</title></rect>)",
                         px(x0 + bar * static_cast<double>(k)), px(f.y(v)), px(bar * 0.92), px(f.y(0.0) - f.y(v)),
                         kChartPalette[k % kChartColours], escape_xml(chart.series[k]), escape_xml(chart.groups[g]), v);
    }
  }
  double legend_y = f.top + 8;
  for (std::size_t k = 0; k < chart.series.size(); ++k) {
    out += fmt::format(R"(<rect x="{}" y="{}" width="14" height="10" fill="{}"/><text x="{}" y="{}">{}</text>)",
                       px(w - f.right + 12), px(legend_y - 6), kChartPalette[k % kChartColours], px(w - f.right + 32),
                       px(legend_y + 4), escape_xml(chart.series[k]));
    legend_y += 20;
  }
  return out + "</svg>";
}

}  // namespace perseus::report
