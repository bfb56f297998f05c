#include "perseus/profile/bundled_profiles.hpp"

#include <string>

#include "perseus/model/bundled_data.hpp"

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
  std::string names;
  for (const BundledProfile& b : kBundledProfiles) names += (names.empty() ? "" : ", ") + std::string(b.name) + ".csv";
  return find_bundled(fs::path("data") / "profiles", has_all, "the bundled profiles (" + names + ")");
}

}  // namespace perseus
