#include "perseus/profile/bundled_profiles.hpp"

#include <string>

#include "perseus/model/errors.hpp"

namespace perseus {

namespace fs = std::filesystem;

fs::path find_bundled_profiles_dir() {
  const auto has_all = [](const fs::path& dir) {
    std::error_code error;
    for (const BundledProfile& b : kBundledProfiles) {
      if (!fs::is_regular_file(dir / (std::string(b.name) + ".csv"), error)) return false;
    }
    return true;
  };
  std::error_code error;
  const fs::path here = fs::current_path(error) / "data" / "profiles";  // relative if the cwd is gone
  if (has_all(here)) return here;
  const fs::path executable_dir = fs::read_symlink("/proc/self/exe", error).parent_path();
  if (!error) {
    for (fs::path dir = executable_dir; !dir.empty(); dir = dir.parent_path()) {
      if (has_all(dir / "data" / "profiles")) return dir / "data" / "profiles";
      if (dir == dir.parent_path()) break;
    }
  }
  std::string names;
  for (const BundledProfile& b : kBundledProfiles) names += (names.empty() ? "" : ", ") + std::string(b.name) + ".csv";
  throw InputError("the bundled profiles (" + names + ") are in neither " + here.string() +
                   " nor data/profiles under " + (error ? "the executable's directory" : executable_dir.string()) +
                   " or its parents");
}

}  // namespace perseus
