#include "perseus/report/plots.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "perseus/model/errors.hpp"
#include "perseus/report/svg.hpp"

namespace perseus::report {
namespace {

struct MethodStyle {
  const char* css;
  const char* colour;
  const char* marker;  // circle, square, diamond, cross, triangle
};

MethodStyle style_of(const std::string& method) {
  if (method == kPerseus) return {"perseus", "#d62728", "circle"};
  if (method == kZeusGlobal) return {"zeus-global", "#1f77b4", "square"};
  if (method == kZeusPerStage) return {"zeus-per-stage", "#2ca02c", "triangle"};
  if (method == kEnvPipe) return {"envpipe", "#9467bd", "diamond"};
  if (method == kAllMax) return {"all-max", "#222222", "cross"};
  return {"other", "#7f7f7f", "circle"};
}

std::string marker(const char* shape, double x, double y, double r, const std::string& colour, const std::string& cls,
                   const std::string& tooltip) {
  const std::string t = "<title>" + escape_xml(tooltip) + "</title>";
  const std::string common = fmt::format(R"(class="{}" fill="{}" stroke="{}")", cls, colour, colour);
  const std::string_view s = shape;
  if (s == "square") {
    return fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" {} fill-opacity="0.35">{}</rect>)", px(x - r),
                       px(y - r), px(2 * r), px(2 * r), common, t);
  }
  if (s == "triangle") {
    return fmt::format(R"(<path d="M{} {}L{} {}L{} {}Z" {} fill-opacity="0.35">{}</path>)", px(x), px(y - r * 1.2),
                       px(x + r * 1.1), px(y + r * 0.8), px(x - r * 1.1), px(y + r * 0.8), common, t);
  }
  if (s == "diamond") {
    return fmt::format(R"(<path d="M{} {}L{} {}L{} {}L{} {}Z" {} stroke-width="1.5">{}</path>)", px(x), px(y - r * 1.5),
                       px(x + r * 1.5), px(y), px(x), px(y + r * 1.5), px(x - r * 1.5), px(y), common, t);
  }
  if (s == "cross") {
    return fmt::format(R"(<path d="M{} {}L{} {}M{} {}L{} {}" {} stroke-width="2.5">{}</path>)", px(x - r * 1.4),
                       px(y - r * 1.4), px(x + r * 1.4), px(y + r * 1.4), px(x - r * 1.4), px(y + r * 1.4),
                       px(x + r * 1.4), px(y - r * 1.4), common, t);
  }
  return fmt::format(R"(<circle cx="{}" cy="{}" r="{}" {} fill-opacity="0.6">{}</circle>)", px(x), px(y), px(r), common, t);
}

const char* kStyle =
    "<style>text{font-family:sans-serif;font-size:12px;fill:#222}.small{font-size:10px}.tiny{font-size:7px}"
    ".axis{stroke:#444;fill:none}.grid{stroke:#e3e3e3}.title{font-size:14px;font-weight:bold}</style>";

}  // namespace

std::string frontier_svg(const Comparison& c, const FrontierPlotOptions& options) {
  const double left = 78, right = 190, top = 34, bottom = 52;
  const double w = options.width, h = options.height;
  double t_lo = std::numeric_limits<double>::infinity(), t_hi = -t_lo, e_lo = t_lo, e_hi = -t_lo;
  for (const MethodCurve& curve : c.methods) {
    for (const MethodPoint& p : curve.points) {
      t_lo = std::min(t_lo, p.time_s);
      t_hi = std::max(t_hi, p.time_s);
      e_lo = std::min(e_lo, p.energy_j);
      e_hi = std::max(e_hi, p.energy_j);
      if (p.lower_bound_j) e_lo = std::min(e_lo, *p.lower_bound_j);
    }
  }
  if (!std::isfinite(t_lo)) t_lo = t_hi = e_lo = e_hi = 0.0;
  const bool kilo = e_hi >= 1e4;
  const double unit = kilo ? 1e3 : 1.0;
  const auto [x_lo, x_hi] = padded(t_lo, t_hi, 0.04);
  const auto [y_lo, y_hi] = padded(e_lo / unit, e_hi / unit, 0.06);
  const LinearScale x(x_lo, x_hi, left, w - right);
  const LinearScale y(y_lo, y_hi, h - bottom, top);

  std::string out = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" class="frontier-plot" viewBox="0 0 {0} {1}" width="{0}" height="{1}" role="img">)",
      px(w), px(h));
  out += "<title>" + escape_xml(options.title) + "</title>" + kStyle;
  out += fmt::format(R"(<text x="{}" y="20" class="title">{}</text>)", px(left), escape_xml(options.title));
  // Grid, axes and ticks.
  const auto xt = nice_ticks(x.lo(), x.hi(), 8), yt = nice_ticks(y.lo(), y.hi(), 6);
  const double x_step = xt.size() > 1 ? xt[1] - xt[0] : 1.0, y_step = yt.size() > 1 ? yt[1] - yt[0] : 1.0;
  for (double t : xt) {
    out += fmt::format(R"(<line class="grid" x1="{0}" x2="{0}" y1="{1}" y2="{2}"/>)", px(x(t)), px(top), px(h - bottom));
    out += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle">{}</text>)", px(x(t)), px(h - bottom + 16),
                       tick_label(t, x_step));
  }
  for (double e : yt) {
    out += fmt::format(R"(<line class="grid" x1="{0}" x2="{1}" y1="{2}" y2="{2}"/>)", px(left), px(w - right), px(y(e)));
    out += fmt::format(R"(<text x="{}" y="{}" text-anchor="end">{}</text>)", px(left - 6), px(y(e) + 4),
                       tick_label(e, y_step));
  }
  out += fmt::format(R"(<rect class="axis" x="{}" y="{}" width="{}" height="{}"/>)", px(left), px(top),
                     px(w - right - left), px(h - bottom - top));
  out += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle">iteration time (s)</text>)",
                     px((left + w - right) / 2), px(h - 12));
  out += fmt::format(R"~(<text transform="translate(16,{}) rotate(-90)" text-anchor="middle">energy per iteration ({})</text>)~",
                     px((top + h - bottom) / 2), kilo ? "kJ" : "J");

  // T_min and T*.
  const auto vertical = [&](double t, const char* cls, const std::string& label, double dy) {
    const bool near_right = x(t) > w - right - 90;  // keep the label inside the frame
    out += fmt::format(
        R"(<g class="marker {0}"><line x1="{1}" x2="{1}" y1="{2}" y2="{3}" stroke="#d62728" stroke-dasharray="5,4"/><text x="{4}" y="{5}" class="small" text-anchor="{6}" style="fill:#d62728">{7}</text></g>)",
        cls, px(x(t)), px(top), px(h - bottom), px(x(t) + (near_right ? -4 : 4)), px(top + 12 + dy),
        near_right ? "end" : "start", escape_xml(label));
  };
  vertical(c.t_min_s, "t-min", fmt::format("T_min {:.3f} s", c.t_min_s), 0);
  vertical(c.t_star_s, "t-star", fmt::format("T* {:.3f} s (least effective energy)", c.t_star_s), 14);

  // Series: baselines first, Perseus on top.
  std::vector<const MethodCurve*> order;
  for (const MethodCurve& curve : c.methods) {
    if (curve.method != kPerseus) order.push_back(&curve);
  }
  for (const MethodCurve& curve : c.methods) {
    if (curve.method == kPerseus) order.push_back(&curve);
  }
  std::string legend;
  double legend_y = top + 8;
  for (const MethodCurve* curve : order) {
    const MethodStyle s = style_of(curve->method);
    std::string line;
    for (const MethodPoint& p : curve->points) {
      if (p.pareto) line += px(x(p.time_s)) + "," + px(y(p.energy_j / unit)) + " ";
    }
    out += fmt::format(R"(<g class="method {}">)", s.css);
    if (curve->points.size() > 1 && !line.empty()) {
      line.pop_back();
      out += fmt::format(R"(<polyline class="series {}" points="{}" fill="none" stroke="{}" stroke-width="{}"/>)", s.css,
                         line, s.colour, curve->method == kPerseus ? 2.2 : 1.4);
    }
    // Thousands of Perseus points would only blur the line: mark about a hundred.
    const std::size_t every = curve->points.size() > 120 ? curve->points.size() / 100 : 1;
    for (std::size_t i = 0; i < curve->points.size(); ++i) {
      const MethodPoint& p = curve->points[i];
      if (i % every != 0 && i + 1 != curve->points.size()) continue;
      out += marker(s.marker, x(p.time_s), y(p.energy_j / unit), curve->method == kPerseus ? 2.5 : 4.0, s.colour,
                    std::string("point ") + s.css,
                    fmt::format("{} {}: {:.4f} s, {:.1f} J", curve->method, p.setting, p.time_s, p.energy_j));
    }
    out += "</g>";
    legend += marker(s.marker, w - right + 22, legend_y, 4.5, s.colour, "legend-marker", curve->method);
    legend += fmt::format(R"(<text x="{}" y="{}">{}</text>)", px(w - right + 34), px(legend_y + 4), escape_xml(curve->method));
    legend_y += 20;
  }
  // Under Perseus's line, the proven lower bound on any plan's energy at each plan's time
  // (docs/solver.md, "Certified frontier"): how far the plans could still come down.
  std::string bound;
  for (const MethodCurve& curve : c.methods) {
    if (curve.method != kPerseus) continue;
    for (const MethodPoint& p : curve.points) {
      if (p.lower_bound_j) bound += px(x(p.planned_time_s)) + "," + px(y(*p.lower_bound_j / unit)) + " ";
    }
  }
  if (!bound.empty()) {
    bound.pop_back();
    const MethodStyle s = style_of(kPerseus);
    out += fmt::format(
        R"(<g class="lower-bound"><title>proven lower bound on the energy of any plan as fast</title><polyline class="series lower-bound" points="{}" fill="none" stroke="{}" stroke-width="1.2" stroke-dasharray="4,3" opacity="0.8"/></g>)",
        bound, s.colour);
    legend += fmt::format(R"(<line class="legend-marker" x1="{}" x2="{}" y1="{}" y2="{}" stroke="{}" stroke-width="1.2" stroke-dasharray="4,3"/>)",
                          px(w - right + 15), px(w - right + 29), px(legend_y), px(legend_y), s.colour);
    legend += fmt::format(R"(<text x="{}" y="{}">lower bound</text>)", px(w - right + 34), px(legend_y + 4));
  }
  // The least-energy plan per iteration: not T* (the least *effective* energy, what counts while
  // waiting for a straggler), so marked apart and named.
  for (const MethodCurve& curve : c.methods) {
    if (curve.method != kPerseus || curve.points.empty()) continue;
    const MethodPoint& least = *std::min_element(curve.points.begin(), curve.points.end(),
                                                 [](const MethodPoint& a, const MethodPoint& b) { return a.energy_j < b.energy_j; });
    const double cx = x(least.time_s), cy = y(least.energy_j / unit);
    const bool near_right = cx > w - right - 170;
    out += fmt::format(
        R"(<g class="marker least-energy"><circle cx="{0}" cy="{1}" r="7" fill="none" stroke="#111" stroke-width="1.6"/><line x1="{0}" x2="{0}" y1="{2}" y2="{3}" stroke="#111" stroke-width="1"/><text x="{4}" y="{5}" class="small" text-anchor="{6}">least energy per iteration: {7:.4g} {8} at {9:.3f} s</text><title>Perseus's plan of least energy per iteration</title></g>)",
        px(cx), px(cy), px(cy + 7), px(std::max(cy + 7, h - bottom - 4)), px(cx + (near_right ? -6 : 6)),
        px(h - bottom - 5), near_right ? "end" : "start",
        least.energy_j / unit, kilo ? "kJ" : "J", least.time_s);
  }
  out += R"(<g class="legend">)" + legend + "</g></svg>";
  return out;
}

std::string timeline_svg(const EmulationResult& result, const TimelinePlotOptions& options) {
  if (options.pipeline < 0 || options.pipeline >= result.data_parallel) {
    throw InputError(fmt::format("pipeline {} does not exist (there are {})", options.pipeline, result.data_parallel));
  }
  if (!result.has_detail(options.pipeline)) {
    throw InputError(fmt::format("pipeline {} kept no timeline to draw (emulated with EmulationConfig::detail "
                                 "not selecting it)",
                                 options.pipeline));
  }
  const int stages = result.stages;
  const int p = options.pipeline;
  const double left = 74, right = 24, top = options.title.empty() ? 14 : 34, bottom = 74;
  double t_end = options.time_hi_s > 0.0 ? options.time_hi_s : result.pipelines[p].time_s;
  double power_lo = options.power_lo_w, power_hi = options.power_hi_w;
  const bool auto_power = power_lo == 0.0 && power_hi == 0.0;
  if (auto_power) {
    power_lo = std::numeric_limits<double>::infinity();
    power_hi = -power_lo;
  }
  for (int s = 0; s < stages; ++s) {
    for (const ExecutedInstruction& e : result.device_timeline(p, s)) {
      if (options.time_hi_s <= 0.0) t_end = std::max(t_end, e.end_s);
      if (auto_power && e.end_s > e.start_s) {
        power_lo = std::min(power_lo, e.power_w());
        power_hi = std::max(power_hi, e.power_w());
      }
    }
  }
  if (auto_power) {
    power_lo = std::min(power_lo, result.p_blocking_w);
    if (!std::isfinite(power_hi)) power_lo = power_hi = result.p_blocking_w;
  }
  const double width = left + options.width + right;
  const double height = top + stages * options.row_height + bottom;
  const LinearScale x(0.0, t_end > 0.0 ? t_end : 1.0, left, left + options.width);
  const double bar = options.row_height * 0.78;

  std::string out = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" class="timeline" viewBox="0 0 {0} {1}" width="{0}" height="{1}" role="img">)",
      px(width), px(height));
  out += "<title>" + escape_xml(options.title.empty() ? "pipeline timeline" : options.title) + "</title>" + kStyle;
  if (!options.title.empty()) {
    out += fmt::format(R"(<text x="{}" y="20" class="title">{}</text>)", px(left), escape_xml(options.title));
  }
  const std::string idle = power_colour(result.p_blocking_w, power_lo, power_hi);
  for (int s = 0; s < stages; ++s) {
    const double row_y = top + s * options.row_height;
    out += fmt::format(R"(<text x="{}" y="{}" text-anchor="end">stage {}</text>)", px(left - 8),
                       px(row_y + bar / 2 + 4), s);
    // Idle time: blocked at p_blocking (drawn faded so the work stands out).
    out += fmt::format(R"(<rect class="idle" x="{}" y="{}" width="{}" height="{}" fill="{}" fill-opacity="0.25"/>)",
                       px(left), px(row_y), px(options.width), px(bar), idle);
  }
  out += R"(<g class="instructions">)";
  for (int s = 0; s < stages; ++s) {
    const double row_y = top + s * options.row_height;
    for (const ExecutedInstruction& e : result.device_timeline(p, s)) {
      const double x0 = x(e.start_s), x1 = x(e.end_s);
      const std::string name = label(e.instruction);
      const bool late = e.switch_outcome != SwitchOutcome::kNone;
      out += fmt::format(
          R"(<rect class="instruction {}" x="{}" y="{}" width="{}" height="{}" fill="{}" stroke="{}" stroke-width="{}"><title>{} stage {}: {:.4f}-{:.4f} s, {} MHz, {:.0f} W, {:.2f} J{}</title></rect>)",
          to_string(e.instruction.kind), px(x0), px(row_y), px(std::max(x1 - x0, 0.5)), px(bar),
          power_colour(e.power_w(), power_lo, power_hi), late ? "#ff7f0e" : "#ffffff", late ? 2 : 1.0, name, s,
          e.start_s, e.end_s, e.frequency_mhz, e.power_w(), e.energy_j, late ? ", clock switch late" : "");
      // Every block that has room for a label gets one: its name at the small size where it
      // fits (about 6 px a character), else at the tiny size (about 4.2 px), else its kind's
      // letter alone; a block narrower than that keeps its name in its tooltip only.
      const double room = x1 - x0 - 2.0;
      const char* size = "small";
      std::string text = name;
      if (room < 6.0 * static_cast<double>(name.size())) {
        size = "tiny";
        if (room < 4.2 * static_cast<double>(name.size())) text = room >= 5.0 ? name.substr(0, 1) : std::string();
      }
      if (!text.empty()) {
        const bool dark = e.power_w() < power_lo + 0.6 * (power_hi - power_lo);
        out += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle" class="{} label" style="fill:{}">{}</text>)",
                           px((x0 + x1) / 2), px(row_y + bar / 2 + (size[0] == 's' ? 3.5 : 2.5)), size,
                           dark ? "#fff" : "#000", text);
      }
    }
  }
  out += "</g>";
  if (options.critical_path) {
    std::string points;
    for (std::size_t i : critical_path(result, p)) {
      const ExecutedInstruction& e = result.timeline[i];
      // Along the top edge of the blocks: the labels sit in their middle and stay readable.
      const double y = top + e.instruction.stage * options.row_height + std::min(2.5, bar * 0.12);
      points += px(x(e.start_s)) + "," + px(y) + " " + px(x(e.end_s)) + "," + px(y) + " ";
    }
    if (!points.empty()) {
      points.pop_back();
      out += fmt::format(
          R"(<polyline class="critical-path" points="{}" fill="none" stroke="#e31a1c" stroke-width="2" stroke-linejoin="round"><title>critical path</title></polyline>)",
          points);
    }
  }
  // Time axis.
  const double axis_y = top + stages * options.row_height + 2;
  out += fmt::format(R"(<line class="axis" x1="{0}" x2="{1}" y1="{2}" y2="{2}"/>)", px(left), px(left + options.width),
                     px(axis_y));
  const auto ticks = nice_ticks(0.0, x.hi(), 10);
  const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : 1.0;
  for (double t : ticks) {
    out += fmt::format(R"(<line class="axis" x1="{0}" x2="{0}" y1="{1}" y2="{2}"/><text x="{0}" y="{3}" text-anchor="middle" class="small">{4}</text>)",
                       px(x(t)), px(axis_y), px(axis_y + 4), px(axis_y + 15), tick_label(t, step));
  }
  out += fmt::format(R"(<text x="{}" y="{}" text-anchor="middle">time (s)</text>)", px(left + options.width / 2),
                     px(axis_y + 30));
  out += colour_bar(left + 40, axis_y + 42, 220, 10, power_lo, power_hi, "W per GPU");
  if (options.critical_path) {
    out += fmt::format(R"(<line x1="{0}" x2="{1}" y1="{2}" y2="{2}" stroke="#e31a1c" stroke-width="2"/><text x="{3}" y="{4}" class="small">critical path</text>)",
                       px(left + 400), px(left + 430), px(axis_y + 47), px(left + 436), px(axis_y + 51));
  }
  out += "</svg>";
  return out;
}

}  // namespace perseus::report
