// Driving Debian's headless Chromium from tests: screenshots (decoded to pixels), the DOM
// after scripts ran, and the page's console messages (logged to stderr, one per line).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace perseus::testing {

// "chromium" (or another name on PATH), or "" when none is installed.
std::string find_chromium();

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout
};
// Runs a shell command; stdout is captured, stderr goes wherever the command sends it.
CommandResult run_command(const std::string& command);

struct Image {
  std::uint32_t width = 0, height = 0;
  std::vector<std::uint32_t> pixels;  // 0xRRGGBB, row-major
};
// Decodes an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes); throws otherwise.
Image decode_png(const std::string& png);
// The PNG file at `path` decoded (a screenshot): decode_png of its bytes.
Image read_png(const std::filesystem::path& path);

struct BrowserRun {
  int exit_code = -1;
  std::string dom;                    // with dump_dom
  std::vector<std::string> console;   // every console message and uncaught error of the page
  std::filesystem::path screenshot;   // with a screenshot requested: where it is (if written)
};

// Opens `url` once in headless Chromium with a fresh profile under `work_dir` (no network
// services, no sandbox: tests run as root) and either dumps the DOM or takes a screenshot
// of `width` x `height`. Console messages are read from Chromium's log on stderr. With
// `virtual_time_ms` > 0 the page's timers run that long (virtual time) before the dump or the
// screenshot: a page that polls its server shows what the polls brought.
BrowserRun open_in_chromium(const std::string& chromium, const std::string& url, const std::filesystem::path& work_dir,
                            bool dump_dom, int width = 1280, int height = 2000, int virtual_time_ms = 0);

}  // namespace perseus::testing
