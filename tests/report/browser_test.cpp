// The HTML report of a bundled profile opened in headless Chromium: it must render (a
// screenshot that is not blank and shows the plots' colours), every SVG must lay out with
// a nonzero size and its elements, and the page must log nothing to the console.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>

#include <nlohmann/json.hpp>

#include "headless_chromium.hpp"
#include "perseus/emulator/comparison.hpp"
#include "perseus/report/html_report.hpp"
#include "perseus/report/svg.hpp"
#include "perseus/solver/crawl.hpp"
#include "perseus/solver/frontier.hpp"
#include "temp_dir.hpp"

namespace perseus::report {
namespace {

namespace fs = std::filesystem;
using perseus::testing::BrowserRun;
using perseus::testing::read_png;
using perseus::testing::find_chromium;
using perseus::testing::open_in_chromium;
using perseus::testing::TempDir;

void write_file(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

// Measures every SVG as laid out and writes the figures into the page as JSON.
const char* kMeasure = R"(<script>
const measured = [];
for (const svg of document.querySelectorAll('svg')) {
  const box = svg.getBoundingClientRect();
  const content = svg.getBBox();
  const drawn = [...svg.querySelectorAll('rect.instruction')].filter(r => r.getBBox().width > 0).length;
  measured.push({cls: svg.getAttribute('class'), width: box.width, height: box.height,
                 content_width: content.width, content_height: content.height,
                 elements: svg.querySelectorAll('*').length, instructions_drawn: drawn,
                 series: svg.querySelectorAll('polyline.series').length});
}
const pre = document.createElement('pre');
pre.id = 'measured';
pre.textContent = JSON.stringify(measured);
document.body.appendChild(pre);
</script>)";

struct Page {
  std::string html;
  std::size_t instructions = 0;      // per timeline (one pipeline)
  std::string busiest_fill;          // the fill of the T_min timeline's widest instruction
};

Page bloom_report() {
  const Profile profile = Profile::read_csv(PERSEUS_SOURCE_DIR "/data/profiles/bloom-176b+a100-sxm.csv");
  std::vector<Warning> warnings;
  const EnergyProblem problem =
      make_problem(profile, {ScheduleKind::k1F1B, 8, 12, 1, false}, {0.001, 83.64, {}}, &warnings);
  const Frontier frontier = build_frontier(problem, crawl_frontier(problem));
  const Comparison comparison = compare_methods(problem, frontier);
  const EmulationResult t_min = emulate(problem, plan_from_choice(problem, frontier.t_min_point().option_choice()), {});
  const EmulationResult t_star = emulate(problem, plan_from_choice(problem, frontier.t_star_point().option_choice()), {});
  ReportInput input;
  input.title = "bloom-176b+a100-sxm, 1F1B 8 x 12";
  input.facts = {{"profile", "bloom-176b+a100-sxm.csv"}};
  input.comparison = &comparison;
  input.t_min_run = &t_min;
  input.t_star_run = &t_star;
  Page page{html_report(input), problem.dag.num_nodes(), ""};
  // The report draws both timelines on one power scale: reproduce it for the widest rect.
  double lo = t_min.p_blocking_w, hi = 0.0;
  const ExecutedInstruction* widest = &t_min.timeline.front();
  for (const EmulationResult* r : {&t_min, &t_star}) {
    for (const ExecutedInstruction& e : r->timeline) {
      lo = std::min(lo, e.power_w());
      hi = std::max(hi, e.power_w());
    }
  }
  for (const ExecutedInstruction& e : t_min.timeline) {
    if (e.end_s - e.start_s > widest->end_s - widest->start_s) widest = &e;
  }
  page.busiest_fill = power_colour(widest->power_w(), lo, hi);
  return page;
}

TEST(ReportInChromium, RendersThePlotsWithoutConsoleErrors) {
  const std::string chromium = find_chromium();
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs it)";
  TempDir dir;
  const Page page = bloom_report();
  write_file(dir.path() / "report.html", page.html);
  const std::string url = "file://" + (dir.path() / "report.html").string();

  // 1. A screenshot: a drawn page, with the plots' colours in it.
  const BrowserRun shot = open_in_chromium(chromium, url, dir.path(), false, 1280, 2400);
  ASSERT_TRUE(fs::exists(shot.screenshot)) << "chromium wrote no screenshot (exit " << shot.exit_code << ")";
  const auto image = read_png(shot.screenshot);
  EXPECT_EQ(image.width, 1280u);
  EXPECT_EQ(image.height, 2400u);
  std::map<std::uint32_t, std::size_t> counts;
  for (std::uint32_t p : image.pixels) ++counts[p];
  std::size_t background = 0;
  for (const auto& [colour, n] : counts) background = std::max(background, n);
  EXPECT_GT(counts.size(), 100u) << "too few colours: a blank page?";
  EXPECT_GT(image.pixels.size() - background, image.pixels.size() / 10) << "almost every pixel is the background";
  const auto colour = [](const std::string& hex) { return static_cast<std::uint32_t>(std::stoul(hex.substr(1), nullptr, 16)); };
  EXPECT_GT(counts[colour("#d62728")], 50u) << "Perseus's frontier line (red) is not on screen";
  EXPECT_GT(counts[colour(page.busiest_fill)], 100u) << "the T_min timeline's widest instruction is not on screen";
  EXPECT_TRUE(shot.console.empty()) << joined(shot.console);

  // 2. The laid-out SVGs, measured by a script added to a copy of the page.
  std::string instrumented = page.html;
  instrumented.insert(instrumented.rfind("</body>"), kMeasure);
  write_file(dir.path() / "measured.html", instrumented);
  const BrowserRun dom = open_in_chromium(chromium, "file://" + (dir.path() / "measured.html").string(), dir.path(), true);
  EXPECT_TRUE(dom.console.empty()) << joined(dom.console);
  const std::size_t at = dom.dom.find("<pre id=\"measured\">");
  ASSERT_NE(at, std::string::npos) << dom.dom.substr(0, 500);
  const std::size_t begin = at + std::string("<pre id=\"measured\">").size();
  const nlohmann::json measured = nlohmann::json::parse(dom.dom.substr(begin, dom.dom.find("</pre>", begin) - begin));
  // Frontier, two timelines, the savings breakdown and the straggler savings.
  ASSERT_EQ(measured.size(), 5u) << measured.dump();
  for (const nlohmann::json& svg : measured) {
    SCOPED_TRACE(svg.dump());
    EXPECT_GT(svg["width"].get<double>(), 500);
    EXPECT_GT(svg["height"].get<double>(), 200);
    EXPECT_GT(svg["content_width"].get<double>(), 400);
    EXPECT_GT(svg["content_height"].get<double>(), 150);
    if (svg["cls"] == "timeline") {
      EXPECT_EQ(svg["instructions_drawn"].get<std::size_t>(), page.instructions);
    } else if (svg["cls"] == "savings-breakdown" || svg["cls"] == "straggler-savings") {
      EXPECT_GT(svg["elements"].get<int>(), 40);
      if (svg["cls"] == "straggler-savings") {
        EXPECT_GE(svg["series"].get<int>(), 3);
      }
    } else {
      EXPECT_EQ(svg["cls"], "frontier-plot");
      EXPECT_GE(svg["series"].get<int>(), 3);  // Perseus, ZeusGlobal, ZeusPerStage lines
      EXPECT_GT(svg["elements"].get<int>(), 200);
    }
  }
}

// The console check must be able to fail: a page that logs an error and throws is caught.
TEST(ReportInChromium, ConsoleErrorsOfAPageAreSeen) {
  const std::string chromium = find_chromium();
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs it)";
  TempDir dir;
  write_file(dir.path() / "broken.html",
             "<!DOCTYPE html><html><body><svg width=\"10\" height=\"10\"></svg><script>console.error('broken-page');"
             "no_such_function();</script></body></html>");
  const BrowserRun run = open_in_chromium(chromium, "file://" + (dir.path() / "broken.html").string(), dir.path(), true);
  const std::string console = joined(run.console);
  EXPECT_NE(console.find("broken-page"), std::string::npos) << console;
  EXPECT_NE(console.find("no_such_function"), std::string::npos) << console;
}

}  // namespace
}  // namespace perseus::report
