// SharedLibrary: a library loaded when first needed gives its functions with their declared
// types, and a missing library or function is named with what would provide it.
#include "perseus/model/shared_library.hpp"

#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "perseus/model/errors.hpp"

namespace perseus {
namespace {

TEST(SharedLibrary, GivesTheLibrarysFunctionsWithTheirDeclaredTypes) {
  const SharedLibrary libm("libm.so.6", "libc6");
  const auto cosine = libm.symbol<double (*)(double)>("cos");
  EXPECT_DOUBLE_EQ(cosine(0.0), 1.0);
  EXPECT_DOUBLE_EQ(cosine(M_PI), -1.0);
}

TEST(SharedLibrary, AMissingLibraryOrFunctionIsNamedWithItsPackage) {
  try {
    SharedLibrary missing("libperseus-no-such-library.so.7", "perseus-nothing");
    FAIL() << "loaded a library that does not exist";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("libperseus-no-such-library.so.7"), std::string::npos) << what;
    EXPECT_NE(what.find("perseus-nothing"), std::string::npos) << what;
  }
  const SharedLibrary libm("libm.so.6", "libc6");
  try {
    libm.symbol<void (*)()>("perseus_no_such_function");
    FAIL() << "found a function that does not exist";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("perseus_no_such_function"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace perseus
