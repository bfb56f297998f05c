// The errors the library reports, shared by every module. Nothing here depends on any other
// perseus module.
#pragma once

#include <stdexcept>

namespace perseus {

// Bad input from a user: a file, a flag, a request. `what()` names where and what.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A well-formed request that the data cannot satisfy (e.g. a fit that cannot converge).
class SolveError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace perseus
