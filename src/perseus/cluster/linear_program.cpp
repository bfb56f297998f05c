#include "perseus/cluster/linear_program.hpp"

#include <algorithm>
#include <cmath>

#include <Cbc_C_Interface.h>
#include <ClpSimplex.hpp>
#include <CoinPackedMatrix.hpp>

namespace perseus::cluster {

namespace {
// CLP's infinity.
double clp(double bound) { return std::isinf(bound) ? (bound > 0 ? COIN_DBL_MAX : -COIN_DBL_MAX) : bound; }
}  // namespace

LinearProgram::LinearProgram(Sense sense) : sense_(sense) {}
LinearProgram::~LinearProgram() = default;
LinearProgram::LinearProgram(LinearProgram&&) noexcept = default;
LinearProgram& LinearProgram::operator=(LinearProgram&&) noexcept = default;

namespace {
LinearProgram::Solution solution_of(const ClpSimplex& model, int variables) {
  LinearProgram::Solution out;
  out.optimal = model.isProvenOptimal();
  out.infeasible = model.isProvenPrimalInfeasible();
  out.objective = model.objectiveValue();
  const double* x = model.getColSolution();
  out.values.assign(x, x + variables);
  return out;
}
}  // namespace

int LinearProgram::add_variable(double lower, double upper, double objective) {
  lower_.push_back(lower);
  upper_.push_back(upper);
  objective_.push_back(objective);
  integer_.push_back(0);
  return static_cast<int>(objective_.size()) - 1;
}

void LinearProgram::set_bounds(int variable, double lower, double upper) {
  lower_[static_cast<std::size_t>(variable)] = lower;
  upper_[static_cast<std::size_t>(variable)] = upper;
}

void LinearProgram::set_row_bounds(int row, double lower, double upper) {
  row_lower_[static_cast<std::size_t>(row)] = lower;
  row_upper_[static_cast<std::size_t>(row)] = upper;
}

void LinearProgram::add_entry(int row, int column, double value) {
  if (value == 0.0) return;
  entry_row_.push_back(row);
  entry_column_.push_back(column);
  entry_value_.push_back(value);
}

int LinearProgram::add_row(const std::vector<std::pair<int, double>>& terms, double lower, double upper) {
  const int row = num_rows();
  for (const auto& [column, value] : terms) add_entry(row, column, value);
  row_lower_.push_back(lower);
  row_upper_.push_back(upper);
  return row;
}

int LinearProgram::add_column(double lower, double upper, double objective, const std::vector<std::pair<int, double>>& entries) {
  if (new_columns_.empty()) new_column_entries_ = entry_value_.size();
  const int variable = add_variable(lower, upper, objective);
  for (const auto& [row, value] : entries) add_entry(row, variable, value);
  new_columns_.push_back(variable);
  return variable;
}

void LinearProgram::set_coefficient(int row, int variable, double value) {
  if (indexed_entries_ != entry_value_.size()) {
    for (std::size_t k = indexed_entries_; k < entry_value_.size(); ++k)
      entry_at_[static_cast<std::uint64_t>(entry_row_[k]) << 32 | static_cast<std::uint32_t>(entry_column_[k])] = k;
    indexed_entries_ = entry_value_.size();
  }
  const auto it = entry_at_.find(static_cast<std::uint64_t>(row) << 32 | static_cast<std::uint32_t>(variable));
  if (it != entry_at_.end()) entry_value_[it->second] = value;
  else add_entry(row, variable, value);
  matrix_changed_ = true;
}

void LinearProgram::load() {
  new_columns_.clear();
  matrix_changed_ = false;
  const CoinPackedMatrix matrix(true, entry_row_.data(), entry_column_.data(), entry_value_.data(),
                                static_cast<CoinBigIndex>(entry_value_.size()));
  std::vector<double> col_lo(lower_.size()), col_hi(upper_.size()), row_lo(row_lower_.size()), row_hi(row_upper_.size());
  for (std::size_t i = 0; i < lower_.size(); ++i) col_lo[i] = clp(lower_[i]), col_hi[i] = clp(upper_[i]);
  for (std::size_t i = 0; i < row_lower_.size(); ++i) row_lo[i] = clp(row_lower_[i]), row_hi[i] = clp(row_upper_[i]);
  model_ = std::make_unique<ClpSimplex>();
  model_->setLogLevel(0);
  // The matrix is as wide as its widest used column: size it to every variable.
  CoinPackedMatrix sized(matrix);
  sized.setDimensions(num_rows(), num_variables());
  model_->loadProblem(sized, col_lo.data(), col_hi.data(), objective_.data(), row_lo.data(), row_hi.data());
  model_->setOptimizationDirection(sense_ == Sense::kMaximize ? -1.0 : 1.0);
}

void LinearProgram::reload_warm() {
  // CLP's status array: the columns', then the rows'. Columns added since are nonbasic at a
  // finite bound (free when they have none).
  const int columns = model_->numberColumns(), rows = model_->numberRows();
  std::vector<unsigned char> status(static_cast<std::size_t>(num_variables() + rows));
  for (std::size_t v = static_cast<std::size_t>(columns); v < lower_.size(); ++v)
    status[v] = std::isfinite(lower_[v])   ? ClpSimplex::atLowerBound
                : std::isfinite(upper_[v]) ? ClpSimplex::atUpperBound
                                           : ClpSimplex::isFree;
  const unsigned char* old = model_->statusArray();
  std::copy(old, old + columns, status.begin());
  std::copy(old + columns, old + columns + rows, status.begin() + num_variables());
  load();
  model_->copyinStatus(status.data());
}

LinearProgram::Solution LinearProgram::solve() {
  load();
  model_->dual();
  return solution_of(*model_, num_variables());
}

LinearProgram::Solution LinearProgram::solve_mixed_integer(double seconds) {
  // The relaxation first, on CLP: when it is integral it is the MILP's optimum, and CBC (whose
  // setup alone costs a few of these LPs) is not needed.
  {
    Solution relaxed = solve();
    if (relaxed.infeasible) return relaxed;
    bool integral = relaxed.optimal;
    for (std::size_t i = 0; integral && i < integer_.size(); ++i)
      integral = !integer_[i] || std::abs(relaxed.values[i] - std::round(relaxed.values[i])) <= 1e-9;
    if (integral) {
      for (std::size_t i = 0; i < integer_.size(); ++i)
        if (integer_[i]) relaxed.values[i] = std::round(relaxed.values[i]);
      return relaxed;
    }
  }
  CoinPackedMatrix matrix(true, entry_row_.data(), entry_column_.data(), entry_value_.data(),
                          static_cast<CoinBigIndex>(entry_value_.size()));
  matrix.setDimensions(num_rows(), num_variables());
  matrix.removeGaps();
  std::vector<double> col_lo(lower_.size()), col_hi(upper_.size()), row_lo(row_lower_.size()), row_hi(row_upper_.size());
  for (std::size_t i = 0; i < lower_.size(); ++i) col_lo[i] = clp(lower_[i]), col_hi[i] = clp(upper_[i]);
  for (std::size_t i = 0; i < row_lower_.size(); ++i) row_lo[i] = clp(row_lower_[i]), row_hi[i] = clp(row_upper_[i]);
  std::unique_ptr<Cbc_Model, void (*)(Cbc_Model*)> model(Cbc_newModel(), Cbc_deleteModel);
  Cbc_loadProblem(model.get(), num_variables(), num_rows(), matrix.getVectorStarts(), matrix.getIndices(), matrix.getElements(),
                  col_lo.data(), col_hi.data(), objective_.data(), row_lo.data(), row_hi.data());
  for (int i = 0; i < num_variables(); ++i)
    if (integer_[static_cast<std::size_t>(i)]) Cbc_setInteger(model.get(), i);
  Cbc_setObjSense(model.get(), sense_ == Sense::kMaximize ? -1.0 : 1.0);
  Cbc_setParameter(model.get(), "logLevel", "0");
  // The cluster's MILPs are small and mostly integral at the root: CBC's preprocessing, cuts and
  // root heuristics cost more than they save there (4x on the water filling's).
  Cbc_setParameter(model.get(), "preprocess", "off");
  Cbc_setParameter(model.get(), "cuts", "off");
  Cbc_setParameter(model.get(), "heuristicsOnOff", "off");
  Cbc_setParameter(model.get(), "strongBranching", "0");
  Cbc_setParameter(model.get(), "trustPseudoCosts", "0");
  Cbc_setMaximumSeconds(model.get(), seconds);
  Cbc_solve(model.get());
  Solution out;
  out.optimal = Cbc_isProvenOptimal(model.get()) != 0;
  out.infeasible = Cbc_isProvenInfeasible(model.get()) != 0;
  const double* x = Cbc_bestSolution(model.get());
  if (x) {
    out.values.assign(x, x + num_variables());
    out.objective = Cbc_getObjValue(model.get());
  }
  return out;
}

LinearProgram::Solution LinearProgram::resolve() {
  if (!model_ || model_->numberRows() != num_rows()) return solve();
  if (matrix_changed_) {
    reload_warm();
    model_->primal();
    return solution_of(*model_, num_variables());
  }
  if (!new_columns_.empty() && model_->numberColumns() == new_columns_.front()) {
    // The entries since the first new column are the new columns', in their order.
    const std::size_t n = new_columns_.size();
    std::vector<CoinBigIndex> starts(n + 1, 0);
    std::size_t k = new_column_entries_;
    for (std::size_t i = 0; i < n; ++i) {
      while (k < entry_value_.size() && entry_column_[k] == new_columns_[i]) ++k;
      starts[i + 1] = static_cast<CoinBigIndex>(k - new_column_entries_);
    }
    std::vector<double> col_lo(n), col_hi(n), cost(n);
    for (std::size_t i = 0; i < n; ++i) {
      const auto v = static_cast<std::size_t>(new_columns_[i]);
      col_lo[i] = clp(lower_[v]), col_hi[i] = clp(upper_[v]), cost[i] = objective_[v];
    }
    model_->addColumns(static_cast<int>(n), col_lo.data(), col_hi.data(), cost.data(), starts.data(),
                       entry_row_.data() + new_column_entries_, entry_value_.data() + new_column_entries_);
    new_columns_.clear();
  }
  if (model_->numberColumns() != num_variables()) return solve();
  for (int i = 0; i < num_variables(); ++i) {
    model_->setObjectiveCoefficient(i, objective_[static_cast<std::size_t>(i)]);
    model_->setColumnBounds(i, clp(lower_[static_cast<std::size_t>(i)]), clp(upper_[static_cast<std::size_t>(i)]));
  }
  // Only the rows whose bounds moved: setting a row's bounds tells CLP the problem changed, and
  // it then redoes work at the start of primal() even when the values are the same.
  const double* lower = model_->getRowLower();
  const double* upper = model_->getRowUpper();
  for (int i = 0; i < num_rows(); ++i) {
    const double lo = clp(row_lower_[static_cast<std::size_t>(i)]), hi = clp(row_upper_[static_cast<std::size_t>(i)]);
    if (lo != lower[i] || hi != upper[i]) model_->setRowBounds(i, lo, hi);
  }
  model_->primal(1);  // 1: start from the current basis
  return solution_of(*model_, num_variables());
}

LinearProgram::Solution LinearProgram::resolve_rows() {
  if (!model_ || model_->numberRows() != num_rows() || model_->numberColumns() != num_variables() || matrix_changed_)
    return solve();
  for (int i = 0; i < num_rows(); ++i)
    model_->setRowBounds(i, clp(row_lower_[static_cast<std::size_t>(i)]), clp(row_upper_[static_cast<std::size_t>(i)]));
  model_->dual(1);  // 1: start from the current basis
  return solution_of(*model_, num_variables());
}

}  // namespace perseus::cluster
