#include "perseus/model/shared_library.hpp"

#include <dlfcn.h>

#include "perseus/model/errors.hpp"

namespace perseus {

SharedLibrary::SharedLibrary(std::string soname, std::string_view debian_package) : soname_(std::move(soname)) {
  handle_ = ::dlopen(soname_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    const char* reason = ::dlerror();
    throw InputError("cannot load " + soname_ + " (Debian package " + std::string(debian_package) +
                     "): " + (reason != nullptr ? reason : "unknown reason"));
  }
}

SharedLibrary::~SharedLibrary() { ::dlclose(handle_); }

void* SharedLibrary::address(const char* name) const {
  ::dlerror();  // a stale error must not be read as ours
  void* found = ::dlsym(handle_, name);
  if (found == nullptr) {
    const char* reason = ::dlerror();
    throw InputError(soname_ + " lacks " + name + " (an incompatible version?): " + (reason != nullptr ? reason : "null address"));
  }
  return found;
}

}  // namespace perseus
