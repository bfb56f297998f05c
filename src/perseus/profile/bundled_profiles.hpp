// The measured profiles shipped in data/profiles/ (the Perseus paper's artifact, also in
// ../shared/data/profiles/) with the settings the reference solver ran them at (frontier.md):
// p_blocking 83.64 W on A100-SXM and 70.38 W on A40, unit time 1 ms on A100-SXM and 0.1 ms
// on A40 (whose profiles have finer-grained clocks). One list for the CLI, tests and benches.
#pragma once

namespace perseus {

struct BundledProfile {
  const char* name;  // file stem in data/profiles/, e.g. "bloom-176b+a100-sxm"
  double p_blocking;  // W
  double unit_time;   // s
};

inline constexpr BundledProfile kBundledProfiles[] = {{"bloom-176b+a100-sxm", 83.64, 0.001},
                                                      {"gpt3-175b+a100-sxm", 83.64, 0.001},
                                                      {"bloom-176b+a40", 70.38, 0.0001},
                                                      {"gpt3-175b+a40", 70.38, 0.0001}};

}  // namespace perseus
