// The status page in headless Chromium: it must draw (a screenshot that is not blank),
// build its SVG (frontier line, current point, plan timeline) from the server's data, and
// follow the server's state without being reloaded.
#include <atomic>
#include <chrono>
#include <map>
#include <regex>

#include <gtest/gtest.h>

#include "perseus/server/frontier_table.hpp"
#include "perseus/server/http_server.hpp"
#include "perseus/server/service.hpp"
#include "headless_chromium.hpp"
#include "server_test_support.hpp"
#include "synthetic.hpp"

namespace perseus::server {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using perseus::testing::find_chromium;
using perseus::testing::open_in_chromium;
using testing::TempDir;

TEST(WebPage, DrawsJobsFrontiersAndTimelinesInHeadlessChromium) {
  const std::string chromium = find_chromium();
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed (apt-get install chromium)";

  ServiceOptions options;
  options.scheduler = parse_scheduler_config("Frontier", json::object());
  options.barrier_timeout_s = 10.0;
  Service service(options);
  HttpOptions http;
  http.port = 0;
  HttpServer server(service, http);
  server.start();

  // Metadata is any string, as zeus takes it (markup, '/' and '\\' included): it reaches the
  // page as text.
  const std::string job = testing::register_job(service, 2, 2, 1, {{"job_metadata", "page<test>&</b>/\\x"}});
  testing::register_ranks(service, job, 2, 2, 1, {1410, 1350, 1290, 1230, 1170, 1110});
  const ApiResponse uploaded = testing::call(service, "POST", "/profile/" + job,
                                             profile_to_csv(perseus::testing::synthetic_profile(2, 6, 9)),
                                             {{"p_blocking", "80"}, {"microbatches", "4"}});
  ASSERT_EQ(uploaded.status, 202) << uploaded.body;
  ASSERT_TRUE(service.wait_until_idle(60s));
  ASSERT_EQ(testing::call(service, "POST", "/straggler", json({{"job_id", job}, {"id", 1}, {"degree", 1.3}}).dump()).status,
            200);

  TempDir dir;
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port()) + "/";
  const perseus::testing::BrowserRun shot = open_in_chromium(chromium, url, dir.path(), false, 1200, 900, 3000);
  ASSERT_TRUE(std::filesystem::exists(shot.screenshot)) << "chromium wrote no screenshot (exit " << shot.exit_code << ")";
  const perseus::testing::Image image = perseus::testing::read_png(shot.screenshot);
  EXPECT_EQ(image.width, 1200u);
  EXPECT_EQ(image.height, 900u);
  std::map<std::uint32_t, std::size_t> counts;
  for (std::uint32_t p : image.pixels) ++counts[p];
  std::size_t background = 0;
  for (const auto& [colour, n] : counts) background = std::max(background, n);
  EXPECT_GT(counts.size(), 50u) << "too few colours: a blank page?";
  EXPECT_GT(image.pixels.size() - background, image.pixels.size() / 20) << "almost every pixel is the background";
  EXPECT_GT(counts[0x3b7dd8] + counts[0x2e9e5b], 0u) << "no frontier or forward/backward colour drawn";

  const std::string dom = open_in_chromium(chromium, url, dir.path(), true, 1200, 900, 3000).dom;
  ASSERT_NE(dom.find("</html>"), std::string::npos) << dom.substr(0, 500);
  // The frontier: a polyline with many points and the current point marked.
  const std::regex polyline(R"re(<polyline points="([0-9., ]+)"[^>]*class="frontier-line")re");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(dom, m, polyline)) << dom.substr(0, 2000);
  EXPECT_GT(std::count(m[1].first, m[1].second, ','), 3);
  EXPECT_NE(dom.find("class=\"current-point\""), std::string::npos);
  // The timeline: one rect per instruction of the plan in force (2 stages x 8) plus none else.
  const std::size_t timeline = dom.find("class=\"timeline\"");
  ASSERT_NE(timeline, std::string::npos);
  const std::string timeline_svg = dom.substr(timeline, dom.find("</svg>", timeline) - timeline);
  std::size_t rects = 0;
  for (std::size_t at = timeline_svg.find("<rect"); at != std::string::npos; at = timeline_svg.find("<rect", at + 1)) ++rects;
  EXPECT_EQ(rects, 16u);
  // Client text is shown as text, escaped, and the straggler table is there.
  EXPECT_NE(dom.find("page&lt;test&gt;&amp;&lt;/b&gt;/\\x"), std::string::npos);
  EXPECT_EQ(dom.find("page<test>"), std::string::npos);
  EXPECT_NE(dom.find("<th>degree</th>"), std::string::npos);
  server.stop();
}

TEST(WebPage, FollowsTheServerWithoutReloading) {
  const std::string chromium = find_chromium();
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed (apt-get install chromium)";
  // A job registers while the page is open: when the page first polls /api/jobs.
  std::atomic<int> polls{0};
  Service* service_ptr = nullptr;
  ServiceOptions options;
  options.scheduler = parse_scheduler_config("Frontier", json::object());
  options.on_request = [&](const ApiRequest& request) {
    if (request.path == "/api/jobs" && polls++ == 0) {
      testing::register_job(*service_ptr, 1, 1, 1, {{"job_metadata", "arrived-later"}});
    }
  };
  Service service(options);
  service_ptr = &service;
  HttpOptions http;
  http.port = 0;
  HttpServer server(service, http);
  server.start();
  testing::register_job(service, 2, 1, 1, {{"job_metadata", "there-first"}});

  TempDir dir;
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port()) + "/";
  const std::string dom = open_in_chromium(chromium, url, dir.path(), true, 1280, 2000, 5000).dom;
  ASSERT_NE(dom.find("</html>"), std::string::npos) << dom.substr(0, 500);
  EXPECT_GE(polls.load(), 1) << "the page never polled /api/jobs";
  // The page was served with one job; polling brought the second onto it.
  const std::size_t data_at = dom.find("id=\"initial-data\"");
  ASSERT_NE(data_at, std::string::npos);
  const std::string initial = dom.substr(data_at, dom.find("</script>", data_at) - data_at);
  EXPECT_NE(initial.find("there-first"), std::string::npos);
  EXPECT_EQ(initial.find("arrived-later"), std::string::npos);
  const std::string rendered = dom.substr(dom.find("id=\"jobs\""));
  EXPECT_NE(rendered.find("there-first"), std::string::npos);
  EXPECT_NE(rendered.find("arrived-later"), std::string::npos) << rendered.substr(0, 2000);
  EXPECT_NE(dom.find("2 job(s), updated"), std::string::npos);
  server.stop();
}

}  // namespace
}  // namespace perseus::server
