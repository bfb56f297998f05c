// The summary figures (figures.hpp) against the comparison they draw, and the PNG/PDF export
// (image_export.hpp) decoded back.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "headless_chromium.hpp"
#include "perseus/model/errors.hpp"
#include "perseus/report/figures.hpp"
#include "perseus/report/geo_figures.hpp"
#include "perseus/report/image_export.hpp"
#include "perseus/report/plots.hpp"
#include "report_fixture.hpp"
#include "xml.hpp"

namespace perseus::report {
namespace {

using perseus::testing::decode_png;
using perseus::testing::parse_xml;
using perseus::testing::solved_fixture;
using perseus::testing::XmlElement;

int count_class(const std::vector<XmlElement>& elements, const std::string& name, const std::string& cls) {
  int n = 0;
  for (const XmlElement& e : elements) n += e.name == name && e.has_class(cls);
  return n;
}

TEST(SavingsBreakdown, SplitsEachMethodsStragglerSavingsIntoIntrinsicAndExtrinsic) {
  const Comparison& c = solved_fixture().comparison;
  ASSERT_FALSE(c.stragglers.empty());
  const std::vector<SavingsSplit> splits = savings_split(c, 1.2);
  const StragglerRow* row = nullptr;
  for (const StragglerRow& r : c.stragglers) {
    if (std::abs(r.ratio - 1.2) < 1e-12) row = &r;
  }
  ASSERT_NE(row, nullptr);
  const double window = energy_over_window(c.all_max_time_s, c.all_max_energy_j, row->t_prime_s, c.p_blocking_w,
                                           c.gpus_per_pipeline);
  ASSERT_EQ(splits.size(), row->methods.size() - 1);  // every method but AllMax
  for (const SavingsSplit& s : splits) {
    const MethodRow* m = nullptr;
    for (const MethodRow& r : row->methods) {
      if (r.method == s.method) m = &r;
    }
    ASSERT_NE(m, nullptr) << s.method;
    EXPECT_EQ(s.available, m->available);
    if (!s.available) continue;
    EXPECT_NEAR(s.total_fraction(), m->savings_fraction, 1e-12) << s.method;
    EXPECT_GE(s.intrinsic_fraction, 0.0);
    EXPECT_GE(s.extrinsic_fraction, 0.0);
    // Intrinsic: what its plan within T saves, measured against AllMax over the window T'.
    for (const MethodRow& iso : c.iso_time) {
      if (iso.method == s.method && iso.available && iso.savings_j / window <= m->savings_fraction) {
        EXPECT_NEAR(s.intrinsic_fraction, iso.savings_j / window, 1e-12) << s.method;
      }
    }
  }
  // Perseus answers the straggler: it saves more than its intrinsic part.
  EXPECT_GT(splits.front().extrinsic_fraction, 0.0);
  EXPECT_EQ(splits.front().method, kPerseus);

  const auto svg = parse_xml(savings_breakdown_svg(c, 1.2));
  EXPECT_EQ(count_class(svg, "rect", "intrinsic"), static_cast<int>(splits.size()));
  EXPECT_EQ(count_class(svg, "rect", "extrinsic"), static_cast<int>(splits.size()));

  Comparison none = c;
  none.stragglers.clear();
  EXPECT_THROW(savings_breakdown_svg(none), InputError);
  EXPECT_THROW(straggler_savings_svg(none), InputError);
}

TEST(StragglerSavingsPlot, OneLinePerMethodAndTheStarAtTStarOverT) {
  const Comparison& c = solved_fixture().comparison;
  const std::string text = straggler_savings_svg(c);
  const auto svg = parse_xml(text);
  int lines = 0, points = 0;
  for (const XmlElement& e : svg) {
    lines += e.name == "polyline" && e.has_class("series");
    points += e.name == "circle";
  }
  EXPECT_EQ(lines, 4);  // Perseus and the three baselines with a curve
  EXPECT_LE(points, 4 * static_cast<int>(c.stragglers.size()));
  EXPECT_GE(points, static_cast<int>(c.stragglers.size()));
  EXPECT_EQ(count_class(svg, "g", "t-star"), 1);
  EXPECT_NE(text.find(fmt::format("T*/T = {:.3f}", c.t_star_s / c.all_max_time_s)), std::string::npos);
}

// Two workloads at 12, 24 and 48 microbatches (1,536 in all, pipelines of 64 GPUs), each row
// then filled by `fill`.
template <typename Fill>
std::vector<LargeScaleRow> large_scale_rows(Fill fill) {
  std::vector<LargeScaleRow> rows;
  for (const char* workload : {"a", "b"}) {
    for (int m : {12, 24, 48}) {
      LargeScaleRow r;
      r.workload = workload;
      r.microbatches = m;
      r.pipelines = 1536 / m;
      r.gpus = r.pipelines * 64;
      fill(r);
      rows.push_back(r);
    }
  }
  return rows;
}

TEST(LargeScalePlot, OneLinePerWorkloadAtIsoTimeAndAtTStar) {
  const std::vector<LargeScaleRow> rows = large_scale_rows([](LargeScaleRow& r) {
    r.savings_fraction = 0.1 + 0.01 * r.microbatches / 12;
    r.t_star_savings_fraction = 0.2;
  });
  const auto svg = parse_xml(large_scale_svg(rows));
  EXPECT_EQ(count_class(svg, "polyline", "iso-time"), 2);
  EXPECT_EQ(count_class(svg, "polyline", "t-star"), 2);
  EXPECT_EQ(count_class(svg, "g", "workload"), 2);
  EXPECT_THROW(large_scale_svg({}), InputError);
}

// Energy per iteration: a line per workload for AllMax, Perseus at iso-time and at T*, each at
// its energy on one linear axis (less energy lower on the page, the same MJ the same height).
TEST(LargeScalePlot, EnergyDrawsAllMaxIsoTimeAndTStarToScale) {
  const std::vector<LargeScaleRow> rows = large_scale_rows([](LargeScaleRow& r) {
    r.all_max_energy_j = 100e6 + 1e6 * r.microbatches;
    r.perseus_energy_j = 0.9 * r.all_max_energy_j;
    r.t_star_energy_j = 0.8 * r.all_max_energy_j;
  });
  const auto svg = parse_xml(large_scale_energy_svg(rows));
  for (const char* series : {"all-max", "iso-time", "t-star"}) EXPECT_EQ(count_class(svg, "polyline", series), 2) << series;
  // The y of a series' first point (m = 12) of workload "a", from its polyline.
  const auto first_y = [&](const char* series) {
    for (const XmlElement& e : svg) {
      if (e.name == "polyline" && e.has_class(series)) {
        const std::string points = e.attributes.at("points");
        return std::stod(points.substr(points.find(',') + 1));
      }
    }
    return -1.0;
  };
  const double all_max = first_y("all-max"), iso = first_y("iso-time"), star = first_y("t-star");
  EXPECT_LT(all_max, iso);  // more energy: higher up
  EXPECT_LT(iso, star);
  // Linear in MJ: 112, 100.8 and 89.6 MJ are evenly spaced.
  EXPECT_NEAR(iso - all_max, star - iso, 0.02);
  EXPECT_THROW(large_scale_energy_svg({}), InputError);
}

TEST(LineChart, DrawsEverySeriesToScale) {
  LineChart chart{"chart", "A title", "x", "y", {}, true};
  chart.series.push_back({"straight", {{3, 30}, {1, 10}, {2, 20}}, false, -1});
  chart.series.push_back({"dashed", {{1, 5}, {3, 5}}, true, 0});
  const auto svg = parse_xml(line_chart_svg(chart));
  std::vector<const XmlElement*> lines, straight;
  for (const XmlElement& e : svg) {
    if (e.name == "polyline") lines.push_back(&e);
    if (e.name == "circle" && e.ancestors.size() > 1 && e.ancestors.back() == "g" && straight.size() < 3) straight.push_back(&e);
  }
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1]->attributes.count("stroke-dasharray"), 1u);
  EXPECT_EQ(lines[0]->attributes.count("stroke-dasharray"), 0u);
  EXPECT_EQ(lines[0]->attributes.at("stroke"), lines[1]->attributes.at("stroke"));  // colour 0 asked for both
  // Drawn in x order, equally spaced values equally spaced on the page, larger values higher.
  ASSERT_EQ(straight.size(), 3u);
  const double x1 = straight[0]->number("cx"), x2 = straight[1]->number("cx"), x3 = straight[2]->number("cx");
  const double y1 = straight[0]->number("cy"), y2 = straight[1]->number("cy"), y3 = straight[2]->number("cy");
  EXPECT_LT(x1, x2);
  EXPECT_NEAR(x2 - x1, x3 - x2, 0.02);
  EXPECT_NEAR(y1 - y2, y2 - y3, 0.02);
  EXPECT_GT(y1, y2);
  EXPECT_THROW(line_chart_svg(LineChart{"c", "empty", "x", "y", {}, false}), InputError);
}

TEST(BarChart, BarHeightsAreProportionalFromZero) {
  const BarChart chart{"bars", "Bars", "kJ", {"a", "b"}, {"one", "two"}, {{1.0, 2.0}, {4.0, 0.0}}};
  const auto svg = parse_xml(bar_chart_svg(chart));
  std::vector<double> heights;
  for (const XmlElement& e : svg)
    if (e.name == "rect" && e.has_class("bar")) heights.push_back(e.number("height"));
  ASSERT_EQ(heights.size(), 4u);  // group a (one, two), group b (one, two)
  EXPECT_NEAR(heights[1], 4 * heights[0], 0.02);
  EXPECT_NEAR(heights[2], 2 * heights[0], 0.02);
  EXPECT_NEAR(heights[3], 0.0, 1e-9);
  EXPECT_THROW(bar_chart_svg(BarChart{"bars", "Bad", "kJ", {"a", "b"}, {"one"}, {{1.0}}}), InputError);
}

TEST(GeoFigures, EveryFigureAndTheSection) {
  geo::GeoEvaluation e;
  e.fig8 = geo::testbed_sweep(1);
  e.fig9 = geo::testbed_sweep(64);
  for (int set : {1, 2})
    for (int ratio : {2, 3})
      for (int dcs : {1, 2}) e.fig10.push_back({set, dcs, ratio, 600 * dcs, 25.0 * dcs, 26.0 * dcs, 10, 600 * dcs});
  e.fig11 = geo::balance_sweep();
  e.bubbletea = geo::bubbletea_sweep({10.0, 40.0});
  e.fill_or_slow = geo::testbed_fill_or_slow(20.0, geo::BubbleObjective::kEnergyPerFlop);
  const auto figures = geo_figures(e);
  ASSERT_EQ(figures.size(), 9u);
  for (const auto& [name, svg] : figures) EXPECT_GT(parse_xml(svg).size(), 10u) << name;
  // Fig. 8: three baselines at two M for each model.
  EXPECT_EQ(count_class(parse_xml(figures[0].second), "g", "series"), 6);
  // Fig. 10's x is a count of datacentres (1 and 2 here): its ticks are whole numbers only.
  ASSERT_EQ(figures[4].first, "fig10_dc_set_1");
  EXPECT_NE(figures[4].second.find(R"(text-anchor="middle">1</text>)"), std::string::npos);
  EXPECT_NE(figures[4].second.find(R"(text-anchor="middle">2</text>)"), std::string::npos);
  EXPECT_EQ(figures[4].second.find(R"(text-anchor="middle">1.5</text>)"), std::string::npos);
  const ReportSection section = geo_section(e);
  EXPECT_EQ(section.figures.size(), 9u);
  for (const char* policy : {"none", "fill", "slow", "mixed"})
    EXPECT_NE(section.tables_html.find(fmt::format("<td>{}</td>", policy)), std::string::npos) << policy;
  EXPECT_EQ(section.tables_html.find("NO"), std::string::npos);  // training unchanged everywhere
}

TEST(ImageExport, PngAndPdfOfEveryFigure) {
  const Comparison& c = solved_fixture().comparison;
  const std::string frontier = frontier_svg(c, {"t", 800, 400});
  const std::string png = render_image(frontier, ImageFormat::kPng, 2.0);
  const auto image = decode_png(png);
  EXPECT_EQ(image.width, 1600u);
  EXPECT_EQ(image.height, 800u);
  // Perseus's red is drawn.
  int red = 0;
  for (std::uint32_t p : image.pixels) red += p == 0xd62728;
  EXPECT_GT(red, 100);
  const std::string pdf = render_image(frontier, ImageFormat::kPdf);
  EXPECT_EQ(pdf.rfind("%PDF-", 0), 0u);
  EXPECT_NE(pdf.find("/MediaBox [ 0 0 600 300 ]"), std::string::npos);  // 800 x 400 px at 0.75 pt
  EXPECT_EQ(render_image(frontier, ImageFormat::kSvg), frontier);
  for (const std::string& svg : {savings_breakdown_svg(c), straggler_savings_svg(c)}) {
    EXPECT_GT(decode_png(render_image(svg, ImageFormat::kPng)).width, 0u);
  }
  EXPECT_THROW(render_image("<svg", ImageFormat::kPng), InputError);
  EXPECT_EQ(parse_image_format("PNG"), ImageFormat::kPng);
  EXPECT_THROW(parse_image_format("gif"), InputError);
}

}  // namespace
}  // namespace perseus::report
