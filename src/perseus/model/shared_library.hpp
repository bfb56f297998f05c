// A shared library loaded when first needed (dlopen), not when perseus starts: the libraries
// only a few commands use (librsvg and cairo for PNG/PDF figures, XGBoost for Kareus's
// surrogates) cost every command their loading otherwise (about 15 and 9 ms of a process's
// start on a 2-core machine, against 30 ms for a whole `perseus optimize`). Callers keep the
// library's own header for the types and declarations: `symbol` returns a pointer of the
// declared function's type.
#pragma once

#include <string>
#include <string_view>

namespace perseus {

class SharedLibrary {
 public:
  // Loads `soname` (RTLD_NOW | RTLD_LOCAL; its dependencies with it). InputError naming the
  // library, the Debian package that provides it and dlerror's reason when it cannot load.
  SharedLibrary(std::string soname, std::string_view debian_package);
  ~SharedLibrary();
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;

  // The function `name` in the library or its dependencies, as `Function` (a pointer type,
  // e.g. decltype(&cairo_create)). InputError when it is missing (an incompatible version).
  template <typename Function>
  Function symbol(const char* name) const {
    return reinterpret_cast<Function>(address(name));
  }

 private:
  void* address(const char* name) const;
  std::string soname_;
  void* handle_ = nullptr;
};

}  // namespace perseus

// A member of a struct holding a SharedLibrary named `library`: the function `name`, typed by its
// declaration in the library's header, e.g. PERSEUS_LIBRARY_FUNCTION(cairo_create);
#define PERSEUS_LIBRARY_FUNCTION(name) decltype(&::name) name = library.symbol<decltype(&::name)>(#name)
