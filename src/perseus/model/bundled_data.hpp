// Where the data shipped in the repository (data/...) is found at run time: under the current
// directory (a checkout's root, where the commands are documented to run), else under the
// executable's directory or one of its parents (a build tree inside the checkout). The source
// tree's path is not compiled in: a copied or installed binary must not depend on it.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

namespace perseus {

// The first `root / relative` for which `usable` holds; InputError naming `what` and where it
// looked otherwise.
std::filesystem::path find_bundled(const std::filesystem::path& relative,
                                   const std::function<bool(const std::filesystem::path&)>& usable,
                                   const std::string& what);

}  // namespace perseus
