#include "perseus/kareus/surrogate.hpp"

#include <xgboost/c_api.h>

#include <string>
#include <utility>

#include <fmt/format.h>

#include "perseus/model/shared_library.hpp"

namespace perseus::kareus {
namespace {

// XGBoost, loaded by the first surrogate trained (model/shared_library.hpp says why): the C
// API's functions this file calls, with the header's types.
struct XgBoost {
  SharedLibrary library{"libxgboost.so.0", "libxgboost0"};
  PERSEUS_LIBRARY_FUNCTION(XGBGetLastError);
  PERSEUS_LIBRARY_FUNCTION(XGDMatrixCreateFromMat);
  PERSEUS_LIBRARY_FUNCTION(XGDMatrixSetFloatInfo);
  PERSEUS_LIBRARY_FUNCTION(XGDMatrixFree);
  PERSEUS_LIBRARY_FUNCTION(XGBoosterCreate);
  PERSEUS_LIBRARY_FUNCTION(XGBoosterSetParam);
  PERSEUS_LIBRARY_FUNCTION(XGBoosterUpdateOneIter);
  PERSEUS_LIBRARY_FUNCTION(XGBoosterPredict);
  PERSEUS_LIBRARY_FUNCTION(XGBoosterFree);
};

// Loaded once (thread-safe); a failed load throws here and is tried again by the next call.
const XgBoost& xgb() {
  static const XgBoost loaded;
  return loaded;
}

void check(int status, const char* what) {
  if (status != 0) throw SolveError(fmt::format("kareus surrogate: {}: {}", what, xgb().XGBGetLastError()));
}

// A DMatrix freed on scope exit.
struct Matrix {
  DMatrixHandle handle = nullptr;
  Matrix(const std::vector<float>& features, std::size_t columns) {
    const bst_ulong rows = columns ? features.size() / columns : 0;
    check(xgb().XGDMatrixCreateFromMat(features.data(), rows, columns, -1e30f, &handle), "creating a matrix");
  }
  ~Matrix() {
    if (handle) xgb().XGDMatrixFree(handle);
  }
  Matrix(const Matrix&) = delete;
  Matrix& operator=(const Matrix&) = delete;
};

}  // namespace

Regressor::~Regressor() {
  if (booster_) xgb().XGBoosterFree(booster_);
}

Regressor::Regressor(Regressor&& other) noexcept : booster_(std::exchange(other.booster_, nullptr)) {}

Regressor& Regressor::operator=(Regressor&& other) noexcept {
  if (this != &other) {
    if (booster_) xgb().XGBoosterFree(booster_);
    booster_ = std::exchange(other.booster_, nullptr);
  }
  return *this;
}

void Regressor::fit(const std::vector<float>& features, std::size_t columns, const std::vector<float>& targets,
                    const TreeParams& params, std::uint64_t seed) {
  if (columns == 0 || features.size() != targets.size() * columns || targets.empty()) {
    throw InputError(fmt::format("kareus surrogate: {} feature values for {} targets of {} columns", features.size(),
                                 targets.size(), columns));
  }
  Matrix train(features, columns);
  check(xgb().XGDMatrixSetFloatInfo(train.handle, "label", targets.data(), targets.size()), "setting the labels");
  if (booster_) xgb().XGBoosterFree(booster_), booster_ = nullptr;
  BoosterHandle booster = nullptr;
  check(xgb().XGBoosterCreate(&train.handle, 1, &booster), "creating a booster");
  booster_ = booster;
  const std::pair<const char*, std::string> settings[] = {
      {"objective", "reg:squarederror"},
      {"max_depth", std::to_string(params.max_depth)},
      {"eta", fmt::format("{}", params.learning_rate)},
      {"nthread", std::to_string(params.threads)},
      {"seed", std::to_string(seed % 2147483647)},
      {"verbosity", "0"},
  };
  for (const auto& [name, value] : settings) check(xgb().XGBoosterSetParam(booster_, name, value.c_str()), name);
  for (int i = 0; i < params.trees; ++i) check(xgb().XGBoosterUpdateOneIter(booster_, i, train.handle), "training");
}

std::vector<float> Regressor::predict(const std::vector<float>& features, std::size_t columns) const {
  if (!booster_) throw InputError("kareus surrogate: predicting before fitting");
  Matrix rows(features, columns);
  bst_ulong length = 0;
  const float* result = nullptr;
  check(xgb().XGBoosterPredict(booster_, rows.handle, 0, 0, 0, &length, &result), "predicting");
  return {result, result + length};
}

}  // namespace perseus::kareus
