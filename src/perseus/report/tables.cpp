#include "perseus/report/tables.hpp"

#include <iterator>

#include <fmt/format.h>

#include "perseus/report/svg.hpp"

namespace perseus::report {
namespace {

std::string percent(double fraction) { return fmt::format("{:.2f}%", 100.0 * fraction); }

std::string g17(double v) { return fmt::format("{:.17g}", v); }

// A CSV field: quoted when it holds a comma or a quote.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

nlohmann::json row_json(const MethodRow& r) {
  return {{"method", r.method},         {"available", r.available},
          {"setting", r.setting},       {"time_s", r.time_s},
          {"energy_j", r.energy_j},     {"savings_j", r.savings_j},
          {"savings_fraction", r.savings_fraction}, {"slowdown_fraction", r.slowdown_fraction}};
}

std::string method_rows_text(const std::vector<MethodRow>& rows, bool slowdown) {
  std::string out = fmt::format("  {:<13} {:<34} {:>10} {:>9} {:>13} {:>22}\n", "method", "plan", "time (s)",
                                slowdown ? "slowdown" : "", "energy (J)", "savings vs AllMax");
  for (const MethodRow& r : rows) {
    if (!r.available) {
      out += fmt::format("  {:<13} {:<34}\n", r.method, "(no plan fits)");
      continue;
    }
    out += fmt::format("  {:<13} {:<34} {:>10.4f} {:>9} {:>13.1f} {:>22}\n", r.method,
                       r.setting.size() > 34 ? r.setting.substr(0, 31) + "..." : r.setting, r.time_s,
                       slowdown ? percent(r.slowdown_fraction) : "", r.energy_j,
                       fmt::format("{:.1f} J ({})", r.savings_j, percent(r.savings_fraction)));
  }
  return out;
}

std::string method_rows_html(const std::vector<MethodRow>& rows, bool slowdown) {
  std::string out = "<table class=\"methods\"><thead><tr><th>method</th><th>plan</th><th>time (s)</th>";
  if (slowdown) out += "<th>slowdown</th>";
  out += "<th>energy (J)</th><th>savings vs AllMax</th></tr></thead><tbody>";
  for (const MethodRow& r : rows) {
    if (!r.available) {
      out += fmt::format("<tr><td>{}</td><td colspan=\"{}\">no plan fits</td></tr>", escape_xml(r.method),
                         slowdown ? 5 : 4);
      continue;
    }
    out += fmt::format("<tr><td>{}</td><td class=\"text\">{}</td><td>{:.4f}</td>", escape_xml(r.method),
                       escape_xml(r.setting), r.time_s);
    if (slowdown) out += "<td>" + percent(r.slowdown_fraction) + "</td>";
    out += fmt::format("<td>{:.1f}</td><td>{:.1f} J ({})</td></tr>", r.energy_j, r.savings_j, percent(r.savings_fraction));
  }
  return out + "</tbody></table>";
}

}  // namespace

std::string methods_text(const Comparison& c) {
  std::string out = fmt::format("AllMax: {:.4f} s, {:.1f} J per iteration ({} GPUs per pipeline)\n", c.all_max_time_s,
                                c.all_max_energy_j, c.gpus_per_pipeline);
  out += fmt::format("Perseus: T_min {:.4f} s, T* {:.4f} s\n\n", c.t_min_s, c.t_star_s);
  out += fmt::format("At iso-time (least energy within AllMax's {:.4f} s, energy over that window):\n", c.all_max_time_s);
  out += method_rows_text(c.iso_time, false);
  out += "\nLeast energy of each method (over its own iteration):\n";
  out += method_rows_text(c.min_energy, true);
  return out;
}

std::string stragglers_text(const Comparison& c) {
  if (c.stragglers.empty()) return "";
  std::string out =
      "Energy savings of the non-straggler pipelines versus AllMax, when one pipeline takes T' = ratio x T:\n";
  out += fmt::format("  {:>6} {:>9}", "T'/T", "T' (s)");
  for (const MethodRow& m : c.stragglers.front().methods) out += fmt::format(" {:>13}", m.method);
  out += "\n";
  for (const StragglerRow& row : c.stragglers) {
    out += fmt::format("  {:>6.2f} {:>9.4f}", row.ratio, row.t_prime_s);
    for (const MethodRow& m : row.methods) out += fmt::format(" {:>13}", m.available ? percent(m.savings_fraction) : "-");
    out += "\n";
  }
  return out;
}

std::string large_scale_text(std::span<const LargeScaleRow> rows) {
  if (rows.empty()) return "";
  std::string out = "Large scale, no straggler (every pipeline emulated; savings versus AllMax):\n";
  out += fmt::format("  {:<22} {:>6} {:>5} {:>4} {:>10} {:>13} {:>13} {:>9} {:>17} {:>8}\n", "workload", "GPUs", "D",
                     "M", "T (s)", "AllMax (MJ)", "Perseus (MJ)", "savings", "at T* (slowdown)", "solve s");
  for (const LargeScaleRow& r : rows) {
    out += fmt::format("  {:<22} {:>6} {:>5} {:>4} {:>10.4f} {:>13.3f} {:>13.3f} {:>9} {:>17} {:>8.2f}\n", r.workload,
                       r.gpus, r.pipelines, r.microbatches, r.all_max_time_s, r.all_max_energy_j / 1e6,
                       r.perseus_energy_j / 1e6, percent(r.savings_fraction),
                       fmt::format("{} ({})", percent(r.t_star_savings_fraction),
                                   percent(r.t_star_time_s / r.all_max_time_s - 1.0)),
                       r.solve_s);
  }
  return out;
}

void write_methods_csv(std::ostream& out, const Comparison& c) {
  out << "window,method,available,setting,time_s,energy_j,savings_j,savings_fraction,slowdown_fraction\n";
  for (const auto& [window, rows] : {std::pair{"iso_time", &c.iso_time}, std::pair{"min_energy", &c.min_energy}}) {
    for (const MethodRow& r : *rows) {
      out << fmt::format("{},{},{},{},{},{},{},{},{}\n", window, r.method, r.available ? 1 : 0, csv_field(r.setting),
                         g17(r.time_s), g17(r.energy_j), g17(r.savings_j), g17(r.savings_fraction),
                         g17(r.slowdown_fraction));
    }
  }
}

void write_stragglers_csv(std::ostream& out, const Comparison& c) {
  out << "ratio,t_prime_s,method,available,setting,time_s,energy_j,savings_j,savings_fraction\n";
  for (const StragglerRow& row : c.stragglers) {
    for (const MethodRow& r : row.methods) {
      out << fmt::format("{},{},{},{},{},{},{},{},{}\n", g17(row.ratio), g17(row.t_prime_s), r.method,
                         r.available ? 1 : 0, csv_field(r.setting), g17(r.time_s), g17(r.energy_j), g17(r.savings_j),
                         g17(r.savings_fraction));
    }
  }
}

void write_points_csv(std::ostream& out, const Comparison& c) {
  out << "method,setting,time_s,energy_j,planned_time_s,planned_energy_j,late_switches,pareto\n";
  for (const MethodCurve& curve : c.methods) {
    for (const MethodPoint& p : curve.points) {
      out << fmt::format("{},{},{},{},{},{},{},{}\n", curve.method, csv_field(p.setting), g17(p.time_s), g17(p.energy_j),
                         g17(p.planned_time_s), g17(p.planned_energy_j), p.late_switches, p.pareto ? 1 : 0);
    }
  }
}

void write_large_scale_csv(std::ostream& out, std::span<const LargeScaleRow> rows) {
  out << "workload,microbatches,pipelines,gpus,crawl_steps,frontier_points,solve_s,all_max_time_s,all_max_energy_j,"
         "perseus_time_s,perseus_energy_j,savings_fraction,t_star_time_s,t_star_energy_j,t_star_savings_fraction\n";
  for (const LargeScaleRow& r : rows) {
    out << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", csv_field(r.workload), r.microbatches,
                       r.pipelines, r.gpus, r.crawl_steps, r.frontier_points, g17(r.solve_s), g17(r.all_max_time_s),
                       g17(r.all_max_energy_j), g17(r.perseus_time_s), g17(r.perseus_energy_j),
                       g17(r.savings_fraction), g17(r.t_star_time_s), g17(r.t_star_energy_j),
                       g17(r.t_star_savings_fraction));
  }
}

nlohmann::json comparison_to_json(const Comparison& c, bool with_points) {
  nlohmann::json out = {{"schema", "perseus.comparison/1"},
                        {"gpus_per_pipeline", c.gpus_per_pipeline},
                        {"p_blocking_w", c.p_blocking_w},
                        {"all_max", {{"time_s", c.all_max_time_s}, {"energy_j", c.all_max_energy_j}}},
                        {"t_min_s", c.t_min_s},
                        {"t_star_s", c.t_star_s}};
  nlohmann::json& iso = out["iso_time"] = nlohmann::json::array();
  for (const MethodRow& r : c.iso_time) iso.push_back(row_json(r));
  nlohmann::json& least = out["min_energy"] = nlohmann::json::array();
  for (const MethodRow& r : c.min_energy) least.push_back(row_json(r));
  nlohmann::json& stragglers = out["stragglers"] = nlohmann::json::array();
  for (const StragglerRow& row : c.stragglers) {
    nlohmann::json methods = nlohmann::json::array();
    for (const MethodRow& r : row.methods) methods.push_back(row_json(r));
    stragglers.push_back({{"ratio", row.ratio}, {"t_prime_s", row.t_prime_s}, {"methods", std::move(methods)}});
  }
  nlohmann::json& curves = out["methods"] = nlohmann::json::array();
  for (const MethodCurve& curve : c.methods) {
    nlohmann::json entry = {{"method", curve.method}, {"plans", curve.points.size()}};
    if (with_points) {
      nlohmann::json& points = entry["points"] = nlohmann::json::array();
      for (const MethodPoint& p : curve.points) {
        points.push_back({{"setting", p.setting},
                          {"time_s", p.time_s},
                          {"energy_j", p.energy_j},
                          {"planned_time_s", p.planned_time_s},
                          {"planned_energy_j", p.planned_energy_j},
                          {"late_switches", p.late_switches},
                          {"pareto", p.pareto}});
      }
    }
    curves.push_back(std::move(entry));
  }
  return out;
}

nlohmann::json large_scale_to_json(std::span<const LargeScaleRow> rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const LargeScaleRow& r : rows) {
    out.push_back({{"workload", r.workload},
                   {"microbatches", r.microbatches},
                   {"pipelines", r.pipelines},
                   {"gpus", r.gpus},
                   {"crawl_steps", r.crawl_steps},
                   {"frontier_points", r.frontier_points},
                   {"solve_s", r.solve_s},
                   {"all_max_time_s", r.all_max_time_s},
                   {"all_max_energy_j", r.all_max_energy_j},
                   {"perseus_time_s", r.perseus_time_s},
                   {"perseus_energy_j", r.perseus_energy_j},
                   {"savings_fraction", r.savings_fraction},
                   {"t_star_time_s", r.t_star_time_s},
                   {"t_star_energy_j", r.t_star_energy_j},
                   {"t_star_savings_fraction", r.t_star_savings_fraction}});
  }
  return out;
}

std::string methods_html(const Comparison& c) {
  return fmt::format("<h3>At iso-time</h3><p>Each method's least energy among its plans that finish within AllMax's "
                     "{:.4f} s, counted over that window (a plan that finishes early blocks at p_blocking).</p>{}"
                     "<h3>Least energy</h3><p>Each method's least-energy plan over its own iteration.</p>{}",
                     c.all_max_time_s, method_rows_html(c.iso_time, false), method_rows_html(c.min_energy, true));
}

std::string stragglers_html(const Comparison& c) {
  if (c.stragglers.empty()) return "";
  std::string out = "<table class=\"stragglers\"><thead><tr><th>T'/T</th><th>T' (s)</th>";
  for (const MethodRow& m : c.stragglers.front().methods) out += "<th>" + escape_xml(m.method) + "</th>";
  out += "</tr></thead><tbody>";
  for (const StragglerRow& row : c.stragglers) {
    out += fmt::format("<tr><td>{:.2f}</td><td>{:.4f}</td>", row.ratio, row.t_prime_s);
    for (const MethodRow& m : row.methods) {
      out += "<td title=\"" + escape_xml(m.setting) + "\">" + (m.available ? percent(m.savings_fraction) : "-") + "</td>";
    }
    out += "</tr>";
  }
  return out + "</tbody></table>";
}

std::string large_scale_html(std::span<const LargeScaleRow> rows) {
  if (rows.empty()) return "";
  std::string out =
      "<table class=\"large-scale\"><thead><tr><th>workload</th><th>GPUs</th><th>pipelines</th><th>microbatches</th>"
      "<th>T (s)</th><th>AllMax (MJ)</th><th>Perseus (MJ)</th><th>savings</th><th>at T* (slowdown)</th>"
      "<th>frontier points</th><th>solve (s)</th></tr></thead><tbody>";
  for (const LargeScaleRow& r : rows) {
    out += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.4f}</td><td>{:.3f}</td><td>{:.3f}</td><td>{}</td>"
        "<td>{} ({})</td><td>{}</td><td>{:.2f}</td></tr>",
        escape_xml(r.workload), r.gpus, r.pipelines, r.microbatches, r.all_max_time_s, r.all_max_energy_j / 1e6,
        r.perseus_energy_j / 1e6, percent(r.savings_fraction), percent(r.t_star_savings_fraction),
        percent(r.t_star_time_s / r.all_max_time_s - 1.0), r.frontier_points, r.solve_s);
  }
  return out + "</tbody></table>";
}

}  // namespace perseus::report
