// The status page in headless Chromium: it must draw (a screenshot that is not blank),
// build its SVG (frontier line, current point, plan timeline) from the server's data, and
// follow the server's state without being reloaded.
#include <zlib.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <set>

#include <gtest/gtest.h>

#include "perseus/server/frontier_table.hpp"
#include "perseus/server/http_server.hpp"
#include "perseus/server/service.hpp"
#include "server_test_support.hpp"
#include "synthetic.hpp"

namespace perseus::server {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using testing::TempDir;

std::string find_chromium() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    const std::string probe = std::string("command -v ") + name + " >/dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) return name;
  }
  return "";
}

std::string run_command(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return out;
  std::array<char, 4096> buffer;
  std::size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) out.append(buffer.data(), n);
  ::pclose(pipe);
  return out;
}

std::uint32_t big_endian(const std::string& s, std::size_t at) {
  return (std::uint32_t(static_cast<unsigned char>(s[at])) << 24) | (std::uint32_t(static_cast<unsigned char>(s[at + 1])) << 16) |
         (std::uint32_t(static_cast<unsigned char>(s[at + 2])) << 8) | std::uint32_t(static_cast<unsigned char>(s[at + 3]));
}

struct Image {
  std::uint32_t width = 0, height = 0;
  std::vector<std::uint32_t> pixels;  // 0xRRGGBB
};

// Decodes an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes); throws otherwise.
Image decode_png(const std::string& png) {
  if (png.size() < 8 || png.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) throw std::runtime_error("not a PNG");
  Image image;
  int channels = 0;
  std::string compressed;
  for (std::size_t at = 8; at + 8 <= png.size();) {
    const std::uint32_t length = big_endian(png, at);
    const std::string type = png.substr(at + 4, 4);
    const std::string data = png.substr(at + 8, length);
    if (type == "IHDR") {
      image.width = big_endian(data, 0);
      image.height = big_endian(data, 4);
      if (data[8] != 8 || (data[9] != 2 && data[9] != 6) || data[12] != 0) throw std::runtime_error("unsupported PNG");
      channels = data[9] == 2 ? 3 : 4;
    } else if (type == "IDAT") {
      compressed += data;
    }
    at += 12 + length;
  }
  const std::size_t stride = image.width * channels;
  std::string raw((stride + 1) * image.height, '\0');
  uLongf raw_size = raw.size();
  if (uncompress(reinterpret_cast<Bytef*>(raw.data()), &raw_size, reinterpret_cast<const Bytef*>(compressed.data()),
                 compressed.size()) != Z_OK ||
      raw_size != raw.size()) {
    throw std::runtime_error("bad PNG data");
  }
  std::vector<std::uint8_t> previous(stride, 0), row(stride);
  for (std::uint32_t y = 0; y < image.height; ++y) {
    const auto* line = reinterpret_cast<const std::uint8_t*>(raw.data()) + y * (stride + 1);
    const int filter = line[0];
    for (std::size_t x = 0; x < stride; ++x) {
      const int a = x >= static_cast<std::size_t>(channels) ? row[x - channels] : 0, b = previous[x];
      const int c = x >= static_cast<std::size_t>(channels) ? previous[x - channels] : 0;
      int predictor = 0;
      switch (filter) {
        case 0: predictor = 0; break;
        case 1: predictor = a; break;
        case 2: predictor = b; break;
        case 3: predictor = (a + b) / 2; break;
        case 4: {
          const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
          predictor = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
          break;
        }
        default: throw std::runtime_error("bad PNG filter");
      }
      row[x] = static_cast<std::uint8_t>(line[1 + x] + predictor);
    }
    for (std::uint32_t x = 0; x < image.width; ++x) {
      const std::uint8_t* p = row.data() + x * channels;
      image.pixels.push_back((std::uint32_t(p[0]) << 16) | (std::uint32_t(p[1]) << 8) | p[2]);
    }
    previous = row;
  }
  return image;
}

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
  const std::string common = "timeout 90 " + chromium +
                             " --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars"
                             " --user-data-dir=" + (dir.path() / "profile").string() +
                             " --window-size=1200,900 --virtual-time-budget=3000 ";
  const auto screenshot = dir.path() / "page.png";
  run_command(common + "--screenshot=" + screenshot.string() + " " + url + " 2>/dev/null");
  ASSERT_TRUE(std::filesystem::exists(screenshot)) << "chromium wrote no screenshot";
  const Image image = decode_png(run_command("cat " + screenshot.string()));
  EXPECT_EQ(image.width, 1200u);
  EXPECT_EQ(image.height, 900u);
  std::map<std::uint32_t, std::size_t> counts;
  for (std::uint32_t p : image.pixels) ++counts[p];
  std::size_t background = 0;
  for (const auto& [colour, n] : counts) background = std::max(background, n);
  EXPECT_GT(counts.size(), 50u) << "too few colours: a blank page?";
  EXPECT_GT(image.pixels.size() - background, image.pixels.size() / 20) << "almost every pixel is the background";
  EXPECT_GT(counts[0x3b7dd8] + counts[0x2e9e5b], 0u) << "no frontier or forward/backward colour drawn";

  const std::string dom = run_command(common + "--dump-dom " + url + " 2>/dev/null");
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
  const std::string dom = run_command("timeout 90 " + chromium +
                                      " --headless --no-sandbox --disable-gpu --disable-dev-shm-usage"
                                      " --user-data-dir=" + (dir.path() / "profile").string() +
                                      " --virtual-time-budget=5000 --dump-dom " + url + " 2>/dev/null");
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
