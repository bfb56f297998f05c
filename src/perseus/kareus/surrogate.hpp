// Gradient-boosted regression trees (XGBoost, through its C API from Debian's libxgboost-dev):
// the surrogate models of Kareus's MBO, trained on a few hundred samples and asked about the
// rest of the knob space.
#pragma once

#include <cstdint>
#include <vector>

#include "perseus/model/errors.hpp"

namespace perseus::kareus {

struct TreeParams {
  int trees = 100;             // boosting rounds (the paper's num_boost_round)
  int max_depth = 6;
  double learning_rate = 0.3;  // eta
  int threads = 1;             // per model; the search runs several models itself
};

// One regressor. Row-major features, one row per sample. Throws SolveError with XGBoost's
// message when it fails. Not copyable; movable.
class Regressor {
 public:
  Regressor() = default;
  ~Regressor();
  Regressor(Regressor&& other) noexcept;
  Regressor& operator=(Regressor&& other) noexcept;
  Regressor(const Regressor&) = delete;
  Regressor& operator=(const Regressor&) = delete;

  // Fits `targets` (one per row of `features`, `columns` wide); `seed` fixes XGBoost's own
  // randomness, so the same data and seed give the same model.
  void fit(const std::vector<float>& features, std::size_t columns, const std::vector<float>& targets,
           const TreeParams& params, std::uint64_t seed);
  // One prediction per row.
  std::vector<float> predict(const std::vector<float>& features, std::size_t columns) const;
  bool fitted() const { return booster_ != nullptr; }

 private:
  void* booster_ = nullptr;
};

}  // namespace perseus::kareus
