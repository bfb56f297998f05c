// The measured profiles shipped in data/profiles/ (the Perseus paper's artifact) with the
// settings the reference solver ran them at (docs/solver.md, "Inputs"):
// p_blocking 83.64 W on A100-SXM and 70.38 W on A40, unit time 1 ms on A100-SXM and 0.1 ms
// on A40 (whose profiles have finer-grained clocks). One list for the CLI, tests and benches.
#pragma once

#include <filesystem>

#include "perseus/model/errors.hpp"

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

// data/profiles holding every bundled profile: under the current directory (a checkout's
// root, where the commands are documented to run), else under the executable's directory or
// one of its parents (a build tree inside the checkout). The source tree's path is not
// compiled in: a copied or installed binary must not depend on it. Throws InputError naming
// where it looked.
std::filesystem::path find_bundled_profiles_dir();

}  // namespace perseus
