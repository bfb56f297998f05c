#include "perseus/model/bundled_data.hpp"

#include "perseus/model/errors.hpp"

namespace perseus {

namespace fs = std::filesystem;

fs::path find_bundled(const fs::path& relative, const std::function<bool(const fs::path&)>& usable, const std::string& what) {
  std::error_code error;
  const fs::path here = fs::current_path(error) / relative;  // relative if the cwd is gone
  if (usable(here)) return here;
  const fs::path executable_dir = fs::read_symlink("/proc/self/exe", error).parent_path();
  if (!error) {
    for (fs::path dir = executable_dir; !dir.empty(); dir = dir.parent_path()) {
      if (usable(dir / relative)) return dir / relative;
      if (dir == dir.parent_path()) break;
    }
  }
  throw InputError(what + " is in neither " + here.string() + " nor " + relative.string() + " under " +
                   (error ? "the executable's directory" : executable_dir.string()) + " or its parents");
}

}  // namespace perseus
