#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "perseus/model/errors.hpp"
#include "perseus/report/figures.hpp"
#include "perseus/report/html_report.hpp"
#include "perseus/report/plots.hpp"
#include "perseus/report/svg.hpp"
#include "perseus/report/tables.hpp"
#include "perseus/report/trace.hpp"
#include "report_fixture.hpp"
#include "xml.hpp"

namespace perseus::report {
namespace {

using perseus::testing::parse_xml;
using perseus::testing::solved_fixture;
using perseus::testing::XmlElement;

std::vector<const XmlElement*> with_class(const std::vector<XmlElement>& elements, const std::string& name,
                                          const std::string& cls) {
  std::vector<const XmlElement*> out;
  for (const XmlElement& e : elements) {
    if (e.name == name && e.has_class(cls)) out.push_back(&e);
  }
  return out;
}

std::vector<std::pair<double, double>> polyline_points(const XmlElement& e) {
  std::vector<std::pair<double, double>> points;
  std::istringstream in(e.attributes.at("points"));
  std::string pair;
  while (in >> pair) {
    const auto comma = pair.find(',');
    points.emplace_back(std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1)));
  }
  return points;
}

// Checks that `pixel = a + b * value` for every pair, with a and b from the extreme pairs;
// coordinates are written with 2 decimals.
void expect_linear(const std::vector<std::pair<double, double>>& value_pixel, const std::string& what) {
  ASSERT_GE(value_pixel.size(), 2u) << what;
  auto [lo, hi] = std::minmax_element(value_pixel.begin(), value_pixel.end());
  ASSERT_GT(hi->first, lo->first) << what;
  const double b = (hi->second - lo->second) / (hi->first - lo->first);
  for (const auto& [value, pixel] : value_pixel) {
    EXPECT_NEAR(pixel, lo->second + b * (value - lo->first), 0.011) << what << " at " << value;
  }
}

// ---------------------------------------------------------------- svg helpers

TEST(Svg, EscapesFormatsAndTicks) {
  EXPECT_EQ(escape_xml("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  EXPECT_EQ(px(1.0), "1");
  EXPECT_EQ(px(2.345), "2.35");
  EXPECT_EQ(px(-0.001), "0");
  EXPECT_EQ(px(10.5), "10.5");
  for (auto [lo, hi] : {std::pair{0.0, 1.0}, {2.797, 3.436}, {5400.0, 7300.0}, {-3.0, 17.0}, {0.0001, 0.00037}}) {
    const std::vector<double> ticks = nice_ticks(lo, hi, 6);
    ASSERT_GE(ticks.size(), 2u) << lo << ".." << hi;
    const double step = ticks[1] - ticks[0];
    const double mantissa = step / std::pow(10.0, std::floor(std::log10(step)));
    EXPECT_TRUE(std::abs(mantissa - 1) < 1e-9 || std::abs(mantissa - 2) < 1e-9 || std::abs(mantissa - 5) < 1e-9) << step;
    for (std::size_t i = 0; i < ticks.size(); ++i) {
      EXPECT_GE(ticks[i], lo - 1e-12);
      EXPECT_LE(ticks[i], hi + 1e-12);
      if (i > 0) {
        EXPECT_NEAR(ticks[i] - ticks[i - 1], step, step * 1e-6);
      }
    }
    EXPECT_LE(ticks.size(), 13u);
  }
  EXPECT_EQ(power_colour(80, 80, 400), "#440154");   // viridis ends
  EXPECT_EQ(power_colour(400, 80, 400), "#fde725");
  EXPECT_EQ(power_colour(9999, 80, 400), "#fde725");  // clamped
  EXPECT_NE(power_colour(200, 80, 400), power_colour(300, 80, 400));
}

// ---------------------------------------------------------------- frontier plot

TEST(FrontierPlot, DrawsEveryMethodToScaleWithTminAndTstar) {
  const Comparison& c = solved_fixture().comparison;
  const std::string svg = frontier_svg(c, {"frontier <of> & test", 800, 450});
  const std::vector<XmlElement> elements = parse_xml(svg);
  ASSERT_EQ(elements.front().name, "svg");
  EXPECT_EQ(elements.front().attributes.at("viewBox"), "0 0 800 450");
  EXPECT_NE(svg.find("frontier &lt;of&gt; &amp; test"), std::string::npos);
  // The plan of least energy per iteration is marked and named apart from T*.
  const MethodCurve& perseus = c.method(kPerseus);
  const MethodPoint& least = *std::min_element(perseus.points.begin(), perseus.points.end(),
                                               [](const MethodPoint& a, const MethodPoint& b) { return a.energy_j < b.energy_j; });
  EXPECT_EQ(with_class(elements, "g", "least-energy").size(), 1u);
  EXPECT_NE(svg.find(fmt::format("at {:.3f} s</text>", least.time_s)), std::string::npos);
  EXPECT_NE(svg.find("(least effective energy)"), std::string::npos);

  // Perseus's line joins its Pareto-optimal points, in time order, on linear axes.
  const auto lines = with_class(elements, "polyline", "perseus");
  ASSERT_EQ(lines.size(), 1u);
  const auto drawn = polyline_points(*lines.front());
  std::vector<const MethodPoint*> pareto;
  for (const MethodPoint& p : c.method(kPerseus).points) {
    if (p.pareto) pareto.push_back(&p);
  }
  ASSERT_EQ(drawn.size(), pareto.size());
  std::vector<std::pair<double, double>> tx, ey;
  for (std::size_t i = 0; i < drawn.size(); ++i) {
    tx.emplace_back(pareto[i]->time_s, drawn[i].first);
    ey.emplace_back(pareto[i]->energy_j, drawn[i].second);
    if (i > 0) {
      EXPECT_GE(drawn[i].first, drawn[i - 1].first);
    }
  }
  // Under it, the proven lower bound at every Perseus plan's (planned) time, on the same
  // scales, never above the plan's own (planned) energy.
  const auto bound_lines = with_class(elements, "polyline", "lower-bound");
  ASSERT_EQ(bound_lines.size(), 1u);
  const auto bound_drawn = polyline_points(*bound_lines.front());
  std::vector<const MethodPoint*> bounded;
  for (const MethodPoint& p : c.method(kPerseus).points) {
    if (!p.lower_bound_j) continue;
    EXPECT_LE(*p.lower_bound_j, p.planned_energy_j * (1 + 1e-9)) << p.setting;
    bounded.push_back(&p);
  }
  ASSERT_EQ(bound_drawn.size(), bounded.size());
  ASSERT_GT(bounded.size(), 0u);
  std::vector<std::pair<double, double>> all_tx = tx, all_ey = ey;
  for (std::size_t i = 0; i < bounded.size(); ++i) {
    all_tx.emplace_back(bounded[i]->planned_time_s, bound_drawn[i].first);
    all_ey.emplace_back(*bounded[i]->lower_bound_j, bound_drawn[i].second);
  }
  expect_linear(all_tx, "time -> x");
  expect_linear(all_ey, "energy -> y");
  // Higher energy is drawn higher up (smaller y).
  const auto [low_e, high_e] = std::minmax_element(ey.begin(), ey.end());
  EXPECT_GT(low_e->second, high_e->second);

  // T_min and T* lines sit where the time scale puts them.
  const double b = (tx.back().second - tx.front().second) / (tx.back().first - tx.front().first);
  for (const auto& [cls, t] : {std::pair{"t-min", c.t_min_s}, {"t-star", c.t_star_s}}) {
    const auto marker = with_class(elements, "g", cls);
    ASSERT_EQ(marker.size(), 1u) << cls;
    const XmlElement* line = nullptr;
    for (const XmlElement& e : elements) {
      if (e.name == "line" && &e > marker.front() && !line) line = &e;
    }
    ASSERT_NE(line, nullptr);
    EXPECT_NEAR(line->number("x1"), tx.front().second + b * (t - tx.front().first), 0.011) << cls;
  }
  // Every baseline point is drawn, each with a tooltip.
  EXPECT_EQ(with_class(elements, "rect", "zeus-global").size(), c.method(kZeusGlobal).points.size());
  EXPECT_EQ(with_class(elements, "path", "zeus-per-stage").size(), c.method(kZeusPerStage).points.size());
  EXPECT_EQ(with_class(elements, "path", "envpipe").size(), 1u);
  EXPECT_EQ(with_class(elements, "path", "all-max").size(), 1u);
  std::size_t titles = 0;
  for (const XmlElement& e : elements) titles += e.name == "title" && e.depth > 1;
  EXPECT_GE(titles, c.method(kZeusGlobal).points.size() + c.method(kZeusPerStage).points.size() + 2);
}

// ---------------------------------------------------------------- timeline

TEST(TimelinePlot, DrawsEveryInstructionToScaleColouredByPowerWithTheCriticalPath) {
  const EmulationResult& r = solved_fixture().cluster_run;
  for (int pipeline : {0, 2}) {  // a normal pipeline and the straggler
    TimelinePlotOptions options;
    options.pipeline = pipeline;
    options.power_lo_w = 60;
    options.power_hi_w = 420;
    options.title = "pipeline " + std::to_string(pipeline);
    const std::vector<XmlElement> elements = parse_xml(timeline_svg(r, options));
    const auto rects = with_class(elements, "rect", "instruction");
    std::vector<const ExecutedInstruction*> executed;
    for (int s = 0; s < r.stages; ++s) {
      for (const ExecutedInstruction& e : r.device_timeline(pipeline, s)) executed.push_back(&e);
    }
    ASSERT_EQ(rects.size(), executed.size());
    std::vector<std::pair<double, double>> start_x, row_y;
    double scale = 0.0;
    for (std::size_t i = 0; i < rects.size(); ++i) {
      const ExecutedInstruction& e = *executed[i];
      start_x.emplace_back(e.start_s, rects[i]->number("x"));
      row_y.emplace_back(e.instruction.stage, rects[i]->number("y"));
      EXPECT_EQ(rects[i]->attributes.at("fill"), power_colour(e.power_w(), 60, 420));
      EXPECT_TRUE(rects[i]->has_class(std::string(to_string(e.instruction.kind))));
      if (e.end_s - e.start_s > 0.02) scale = rects[i]->number("width") / (e.end_s - e.start_s);
    }
    expect_linear(start_x, "start -> x");
    expect_linear(row_y, "stage -> row");
    // Widths follow durations at the same scale as positions.
    const double b = (start_x.back().second - start_x.front().second) / (start_x.back().first - start_x.front().first);
    EXPECT_NEAR(scale, b, b * 0.01);

    // The critical path: a polyline through its instructions' rows, from start to end.
    const auto path = critical_path(r, pipeline);
    const auto lines = with_class(elements, "polyline", "critical-path");
    ASSERT_EQ(lines.size(), 1u);
    const auto points = polyline_points(*lines.front());
    ASSERT_EQ(points.size(), 2 * path.size());
    for (std::size_t k = 0; k < path.size(); ++k) {
      const ExecutedInstruction& e = r.timeline[path[k]];
      for (std::size_t i = 0; i < executed.size(); ++i) {
        if (executed[i] != &e) continue;
        EXPECT_NEAR(points[2 * k].first, rects[i]->number("x"), 0.011);
        EXPECT_GT(points[2 * k].second, rects[i]->number("y"));
        // In the block's top fifth: above its label (10 px text centred in the block).
        EXPECT_LT(points[2 * k].second, rects[i]->number("y") + 0.2 * rects[i]->number("height"));
      }
    }
  }
  EXPECT_THROW(timeline_svg(r, {"", 3}), InputError);
}

// Every block with room for a letter is labelled at its centre: its name at the small size
// where it fits, else at the tiny size, else its kind's letter; never wider than the block
// at its size's character width. A narrow plot exercises the smaller sizes.
TEST(TimelinePlot, LabelsEveryBlockThatHasRoomAtTheLargestSizeThatFits) {
  const EmulationResult& r = solved_fixture().cluster_run;
  std::vector<const ExecutedInstruction*> executed;
  for (int s = 0; s < r.stages; ++s) {
    for (const ExecutedInstruction& e : r.device_timeline(0, s)) executed.push_back(&e);
  }
  for (const double width : {900.0, 160.0}) {
    TimelinePlotOptions options;
    options.width = width;
    const std::vector<XmlElement> elements = parse_xml(timeline_svg(r, options));
    const auto rects = with_class(elements, "rect", "instruction");
    const auto labels = with_class(elements, "text", "label");
    ASSERT_EQ(rects.size(), executed.size());
    std::size_t labelled = 0, smaller = 0, unlabelled = 0;
    for (std::size_t i = 0; i < rects.size(); ++i) {
      const double x0 = rects[i]->number("x"), w = rects[i]->number("width"), y0 = rects[i]->number("y");
      const XmlElement* found = nullptr;
      for (const XmlElement* t : labels) {
        if (std::abs(t->number("x") - (x0 + w / 2)) < 0.02 && t->number("y") > y0 &&
            t->number("y") < y0 + rects[i]->number("height")) {
          found = t;
        }
      }
      if (w < 7.0) {  // no room even for a letter: the tooltip holds the name
        unlabelled += found == nullptr;
        continue;
      }
      ASSERT_NE(found, nullptr) << "block " << i << " of width " << w << " has no label";
      ++labelled;
      const std::string name = label(executed[i]->instruction);
      EXPECT_TRUE(found->text == name || found->text == name.substr(0, 1)) << found->text << " for " << name;
      const double per_char = found->has_class("small") ? 6.0 : 4.2;
      EXPECT_LE(per_char * static_cast<double>(found->text.size()), w - 2.0 + 1e-9) << found->text;
      smaller += found->text != name || !found->has_class("small");
    }
    EXPECT_GT(labelled, 0u) << width;
    if (width < 200) {
      EXPECT_GT(smaller + unlabelled, 0u) << "the narrow plot has narrow blocks";
    }
  }
}

// ---------------------------------------------------------------- Perfetto trace

TEST(ChromeTrace, HoldsEveryInstructionTransferAndAllReduceInMicroseconds) {
  const EmulationResult& r = solved_fixture().cluster_run;
  std::ostringstream out;
  write_chrome_trace(out, r);
  const nlohmann::json trace = nlohmann::json::parse(out.str());
  EXPECT_EQ(trace["displayTimeUnit"], "ms");
  EXPECT_EQ(trace["otherData"]["gpus"], r.num_gpus());
  std::size_t instructions = 0, transfers = 0, allreduces = 0, critical = 0;
  std::set<std::string> process_names;
  std::map<std::pair<int, int>, double> last_power;  // (pipeline, stage) -> last counter value
  std::map<std::pair<int, int>, double> last_power_ts;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "M" && e["name"] == "process_name") process_names.insert(e["args"]["name"].get<std::string>());
    if (ph == "C") {
      const std::string name = e["name"];
      const std::pair<int, int> key{e["pid"].get<int>(), std::stoi(name.substr(name.rfind(' ') + 1))};
      if (e["ts"].get<double>() >= last_power_ts[key]) {
        last_power_ts[key] = e["ts"];
        last_power[key] = e["args"]["W"];
      }
    }
    if (ph != "X") continue;
    const std::string cat = e["cat"];
    if (cat == "transfer") {
      ++transfers;
      continue;
    }
    if (cat == "allreduce") {
      ++allreduces;
      continue;
    }
    // An instruction: find it in the timeline and compare.
    const int p = e["pid"], s = e["tid"];
    const auto timeline = r.device_timeline(p, s);
    const auto it = std::find_if(timeline.begin(), timeline.end(), [&](const ExecutedInstruction& x) {
      return label(x.instruction) == e["name"].get<std::string>();
    });
    ASSERT_NE(it, timeline.end()) << e.dump();
    EXPECT_NEAR(e["ts"].get<double>(), it->start_s * 1e6, 1e-3);
    EXPECT_NEAR(e["dur"].get<double>(), (it->end_s - it->start_s) * 1e6, 2e-3);
    EXPECT_EQ(e["args"]["frequency_mhz"], it->frequency_mhz);
    EXPECT_NEAR(e["args"]["energy_j_per_gpu"].get<double>(), it->energy_j, 1e-6);
    EXPECT_EQ(cat, to_string(it->instruction.kind));
    critical += e["args"]["critical"].get<bool>();
    ++instructions;
  }
  EXPECT_EQ(instructions, r.timeline.size());
  EXPECT_EQ(transfers, r.transfers.size());
  EXPECT_GT(transfers, 0u);
  EXPECT_EQ(allreduces, r.allreduces.size());
  std::size_t path_lengths = 0;
  for (int p = 0; p < r.data_parallel; ++p) path_lengths += critical_path(r, p).size();
  EXPECT_EQ(critical, path_lengths);
  EXPECT_TRUE(process_names.count("pipeline 0"));
  EXPECT_TRUE(process_names.count("pipeline 2 (straggler x1.2, +0.05 s)"));
  EXPECT_TRUE(process_names.count("gradient all-reduce"));
  ASSERT_EQ(last_power.size(), static_cast<std::size_t>(r.data_parallel * r.stages));
  for (const auto& [key, watts] : last_power) EXPECT_DOUBLE_EQ(watts, std::round(r.p_blocking_w * 1000) / 1000);
}

// ---------------------------------------------------------------- tables

std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells;
    std::string cell;
    bool quoted = false;
    for (char ch : line) {
      if (ch == '"') quoted = !quoted;
      else if (ch == ',' && !quoted) {
        cells.push_back(cell);
        cell.clear();
      } else cell += ch;
    }
    cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

TEST(Tables, CsvJsonAndTextCarryTheComparison) {
  const Comparison& c = solved_fixture().comparison;
  std::ostringstream methods, stragglers, points;
  write_methods_csv(methods, c);
  write_stragglers_csv(stragglers, c);
  write_points_csv(points, c);
  const auto m = parse_csv(methods.str());
  ASSERT_EQ(m.size(), 1 + c.iso_time.size() + c.min_energy.size());
  for (std::size_t i = 0; i < c.iso_time.size(); ++i) {
    const auto& row = m[1 + i];
    ASSERT_EQ(row.size(), 9u);
    EXPECT_EQ(row[0], "iso_time");
    EXPECT_EQ(row[1], c.iso_time[i].method);
    if (c.iso_time[i].available) {
      EXPECT_EQ(std::stod(row[5]), c.iso_time[i].energy_j);  // 17 digits: exact
      EXPECT_EQ(std::stod(row[7]), c.iso_time[i].savings_fraction);
    }
  }
  const auto s = parse_csv(stragglers.str());
  EXPECT_EQ(s.size(), 1 + c.stragglers.size() * c.methods.size());
  std::size_t all_points = 0;
  for (const MethodCurve& curve : c.methods) all_points += curve.points.size();
  EXPECT_EQ(parse_csv(points.str()).size(), 1 + all_points);

  const nlohmann::json j = comparison_to_json(c, true);
  EXPECT_EQ(j["schema"], "perseus.comparison/1");
  EXPECT_DOUBLE_EQ(j["all_max"]["energy_j"].get<double>(), c.all_max_energy_j);
  ASSERT_EQ(j["stragglers"].size(), c.stragglers.size());
  EXPECT_DOUBLE_EQ(j["stragglers"][0]["ratio"].get<double>(), 1.05);
  EXPECT_EQ(j["methods"][0]["points"].size(), c.methods[0].points.size());

  const std::string text = methods_text(c) + stragglers_text(c);
  for (const MethodCurve& curve : c.methods) EXPECT_NE(text.find(curve.method), std::string::npos) << curve.method;
  EXPECT_NE(text.find("1.50"), std::string::npos);

  LargeScaleRow row;
  row.workload = "w,1";
  row.microbatches = 12;
  row.pipelines = 128;
  row.gpus = 8192;
  row.all_max_time_s = 2.0;
  row.all_max_energy_j = 4e6;
  row.perseus_energy_j = 3.6e6;
  row.savings_fraction = 0.1;
  const std::vector<LargeScaleRow> rows = {row};
  std::ostringstream large;
  write_large_scale_csv(large, rows);
  const auto l = parse_csv(large.str());
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[1][0], "w,1");  // quoted, read back whole
  EXPECT_EQ(l[1][3], "8192");
  EXPECT_NE(large_scale_text(rows).find("10.00%"), std::string::npos);
  EXPECT_EQ(large_scale_to_json(rows)[0]["gpus"], 8192);
}

// ---------------------------------------------------------------- the HTML page

TEST(HtmlReport, IsOneSelfContainedPageWithEverySection) {
  const auto& f = solved_fixture();
  ReportInput input;
  input.title = "report <&> test";
  input.facts = {{"profile", "a<b>.csv"}};
  input.comparison = &f.comparison;
  input.t_min_run = &f.t_min_run;
  input.t_star_run = &f.cluster_run;
  LargeScaleRow row;
  row.workload = "synthetic";
  row.all_max_time_s = 1.0;
  row.all_max_energy_j = 1.0;
  input.large_scale = {row};
  input.warnings = {"switches <late>"};
  const std::string html = html_report(input);
  const std::vector<XmlElement> elements = parse_xml(html, {"meta"});
  std::size_t svgs = 0, tables = 0;
  for (const XmlElement& e : elements) {
    svgs += e.name == "svg";
    tables += e.name == "table";
    EXPECT_NE(e.name, "script");
    EXPECT_NE(e.name, "img");
    EXPECT_NE(e.name, "link");
    for (const auto& [name, value] : e.attributes) {
      EXPECT_TRUE(name != "src" && name != "href") << name << "=" << value;
      if (value.find("http") != std::string::npos) {
        EXPECT_EQ(name, "xmlns");  // a namespace, not a fetch
      }
    }
  }
  EXPECT_EQ(svgs, 7u);  // frontier, two timelines, savings breakdown, straggler savings, large scale (savings, energy)
  EXPECT_EQ(tables, 5u);  // facts, iso-time, least energy, stragglers, large scale
  EXPECT_EQ(with_class(elements, "svg", "frontier-plot").size(), 1u);
  EXPECT_EQ(with_class(elements, "svg", "timeline").size(), 2u);
  EXPECT_EQ(with_class(elements, "svg", "savings-breakdown").size(), 1u);
  EXPECT_EQ(with_class(elements, "svg", "straggler-savings").size(), 1u);
  EXPECT_EQ(with_class(elements, "svg", "large-scale-savings").size(), 1u);
  EXPECT_EQ(with_class(elements, "svg", "large-scale-energy").size(), 1u);
  EXPECT_EQ(with_class(elements, "table", "stragglers").size(), 1u);
  EXPECT_EQ(with_class(elements, "table", "large-scale").size(), 1u);
  EXPECT_NE(html.find("report &lt;&amp;&gt; test"), std::string::npos);
  EXPECT_NE(html.find("a&lt;b&gt;.csv"), std::string::npos);
  EXPECT_NE(html.find("switches &lt;late&gt;"), std::string::npos);
  EXPECT_EQ(html.find("<late>"), std::string::npos);
  // The summary gives T*'s plan and the plan of least energy per iteration apart, each with
  // its own time and energy (the fixture's two are different points).
  const MethodCurve& perseus = f.comparison.method(kPerseus);
  const MethodPoint& least = *std::min_element(perseus.points.begin(), perseus.points.end(),
                                               [](const MethodPoint& a, const MethodPoint& b) { return a.energy_j < b.energy_j; });
  const MethodPoint& t_star = *std::find_if(perseus.points.begin(), perseus.points.end(),
                                            [&](const MethodPoint& p) { return p.time_s == f.comparison.t_star_s; });
  ASSERT_NE(least.time_s, t_star.time_s);
  const auto summary_row = [&](const std::string& label) {
    const std::size_t at = html.find("<td>" + label + "</td><td>");
    return at == std::string::npos ? std::string() : html.substr(at, html.find("</tr>", at) - at);
  };
  const std::string t_star_row = summary_row("Perseus at T*, per iteration");
  EXPECT_NE(t_star_row.find(fmt::format("{:.1f} J at {:.4f} s", t_star.energy_j, t_star.time_s)), std::string::npos) << t_star_row;
  const std::string least_row = summary_row("Perseus&#39;s least energy per iteration");
  EXPECT_NE(least_row.find(fmt::format("{:.1f} J at {:.4f} s", least.energy_j, least.time_s)), std::string::npos) << least_row;
  EXPECT_THROW(html_report(ReportInput{}), InputError);

  // A further section comes last, its title escaped, its figures whole.
  ReportSection geo{"geo", "Geo <WAN>", "a note", "<table class=\"extra\"><tr><td>1</td></tr></table>",
                    {line_chart_svg(LineChart{"extra-chart", "t", "x", "y", {{"s", {{0, 1}, {1, 2}}, false, -1}}, false})}};
  input.sections = {geo};
  const std::string with_section = html_report(input);
  const std::vector<XmlElement> more = parse_xml(with_section, {"meta"});
  EXPECT_EQ(with_class(more, "svg", "extra-chart").size(), 1u);
  EXPECT_EQ(with_class(more, "table", "extra").size(), 1u);
  EXPECT_NE(with_section.find("<h2 id=\"geo\">Geo &lt;WAN&gt;</h2>"), std::string::npos);
  EXPECT_GT(with_section.find("id=\"geo\""), with_section.find("id=\"large-scale\""));
}

}  // namespace
}  // namespace perseus::report
