#include "headless_chromium.hpp"

#include <sys/wait.h>
#include <zlib.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace perseus::testing {
namespace {

std::uint32_t big_endian(const std::string& s, std::size_t at) {
  return (std::uint32_t(static_cast<unsigned char>(s[at])) << 24) | (std::uint32_t(static_cast<unsigned char>(s[at + 1])) << 16) |
         (std::uint32_t(static_cast<unsigned char>(s[at + 2])) << 8) | std::uint32_t(static_cast<unsigned char>(s[at + 3]));
}

std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

}  // namespace

std::string find_chromium() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    const std::string probe = std::string("command -v ") + name + " >/dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) return name;
  }
  return "";
}

CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return result;
  std::array<char, 4096> buffer;
  std::size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.output.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

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
  const std::size_t stride = static_cast<std::size_t>(image.width) * channels;
  std::string raw((stride + 1) * image.height, '\0');
  uLongf raw_size = raw.size();
  if (uncompress(reinterpret_cast<Bytef*>(raw.data()), &raw_size, reinterpret_cast<const Bytef*>(compressed.data()),
                 compressed.size()) != Z_OK ||
      raw_size != raw.size()) {
    throw std::runtime_error("bad PNG data");
  }
  std::vector<std::uint8_t> previous(stride, 0), row(stride);
  image.pixels.reserve(static_cast<std::size_t>(image.width) * image.height);
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
      const std::uint8_t* p = row.data() + static_cast<std::size_t>(x) * channels;
      image.pixels.push_back((std::uint32_t(p[0]) << 16) | (std::uint32_t(p[1]) << 8) | p[2]);
    }
    previous = row;
  }
  return image;
}

Image read_png(const std::filesystem::path& path) { return decode_png(read_all(path)); }

BrowserRun open_in_chromium(const std::string& chromium, const std::string& url, const std::filesystem::path& work_dir,
                            bool dump_dom, int width, int height, int virtual_time_ms) {
  static int runs = 0;
  const std::filesystem::path profile = work_dir / ("chromium-profile-" + std::to_string(runs));
  const std::filesystem::path log = work_dir / ("chromium-log-" + std::to_string(runs) + ".txt");
  BrowserRun run;
  run.screenshot = work_dir / ("screenshot-" + std::to_string(runs) + ".png");
  ++runs;
  std::string command = "timeout 120 " + chromium +
                        " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
                        " --disable-background-networking --disable-component-update --disable-sync"
                        " --disable-dev-shm-usage --hide-scrollbars --enable-logging=stderr --v=0"
                        " --user-data-dir=" + quoted(profile.string()) +
                        " --window-size=" + std::to_string(width) + "," + std::to_string(height);
  if (virtual_time_ms > 0) command += " --virtual-time-budget=" + std::to_string(virtual_time_ms);
  command += dump_dom ? " --dump-dom" : " --screenshot=" + quoted(run.screenshot.string());
  command += " " + quoted(url) + " 2>" + quoted(log.string());
  const CommandResult result = run_command(command);
  run.exit_code = result.exit_code;
  if (dump_dom) run.dom = result.output;
  // Chromium logs every console message of the page as `...:CONSOLE...] "message", source: ...`.
  std::istringstream lines(read_all(log));
  for (std::string line; std::getline(lines, line);) {
    if (line.find(":CONSOLE") != std::string::npos) run.console.push_back(line);
  }
  return run;
}

}  // namespace perseus::testing
