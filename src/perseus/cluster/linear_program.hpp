// A linear program built row by row and solved by CLP (COIN-OR's simplex), or with integer
// variables by CBC (COIN-OR's branch and cut), for the cluster policies (docs/cluster.md). Variables have bounds and an objective coefficient; rows are sparse
// sums with a lower and an upper bound. The wrapper exists so that each policy reads as its
// formulation, not as CLP's arrays.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

class ClpSimplex;

namespace perseus::cluster {

inline constexpr double kInfinity = std::numeric_limits<double>::infinity();

class LinearProgram {
 public:
  enum class Sense { kMinimize, kMaximize };
  explicit LinearProgram(Sense sense);
  ~LinearProgram();
  LinearProgram(LinearProgram&&) noexcept;
  LinearProgram& operator=(LinearProgram&&) noexcept;

  // Returns the variable's index.
  int add_variable(double lower, double upper, double objective = 0.0);
  void set_objective(int variable, double coefficient) { objective_[static_cast<std::size_t>(variable)] = coefficient; }
  void add_objective(int variable, double coefficient) { objective_[static_cast<std::size_t>(variable)] += coefficient; }
  void set_bounds(int variable, double lower, double upper);
  void set_row_bounds(int row, double lower, double upper);
  // The variable takes integer values in solve_mixed_integer() (solve() relaxes it).
  void set_integer(int variable) { integer_[static_cast<std::size_t>(variable)] = 1; }
  // lower <= sum(coefficient * variable) <= upper; returns the row's index.
  int add_row(const std::vector<std::pair<int, double>>& terms, double lower, double upper);
  // A variable with `entries` (row, coefficient) in rows already added; returns its index.
  // Unlike a row, a column added after solve() keeps resolve() warm.
  int add_column(double lower, double upper, double objective, const std::vector<std::pair<int, double>>& entries);
  // Changes the coefficient of `variable` in `row` (adds the entry when there is none). The next
  // resolve() starts from the last basis on the changed matrix. O(entries) for the first change
  // after entries were added (an index of them is built), O(1) after.
  void set_coefficient(int row, int variable, double value);

  struct Solution {
    bool optimal = false;
    bool infeasible = false;
    double objective = 0.0;
    std::vector<double> values;  // per variable
  };
  // Dual simplex from scratch. O(simplex): polynomial in practice for these sizes.
  Solution solve();
  // After solve(), with only objective coefficients, variable and row bounds, coefficients
  // (set_coefficient) changed and columns added since (add_column): primal simplex from the last
  // basis, the new columns nonbasic (a lexicographic second objective costs a few pivots, not a
  // second solve). With rows added, or variables by add_variable, since solve(), solves from
  // scratch.
  Solution resolve();
  // After solve(), with only row bounds changed since (the objective kept, so the last basis
  // stays dual feasible): dual simplex from it, as a bisection over a right-hand side wants.
  Solution resolve_rows();

  // Branch and cut on CBC for at most `seconds`: `optimal` when proven; otherwise `values` hold
  // the best solution found (empty when none, `infeasible` when proven so). Exponential in the
  // integer variables at worst; a MILP whose relaxation is integral at the root costs one LP.
  Solution solve_mixed_integer(double seconds);

  int num_variables() const { return static_cast<int>(objective_.size()); }
  int num_rows() const { return static_cast<int>(row_lower_.size()); }

 private:
  void add_entry(int row, int column, double value);  // a matrix entry; zeros are left out
  void load();  // a new model_ from the entries, bounds and objective
  // A new model_ (load) that starts from the last one's basis: after set_coefficient, whose
  // changes CLP's model would need refactorising and rescaling for anyway.
  void reload_warm();

  Sense sense_;
  std::vector<double> lower_, upper_, objective_;
  std::vector<char> integer_;
  std::vector<double> row_lower_, row_upper_;
  std::vector<int> entry_row_, entry_column_;
  std::vector<double> entry_value_;
  // Columns added by add_column since the last solve: their first variable, entry, and each
  // one's variable (resolve() adds them to the model).
  std::vector<int> new_columns_;
  std::size_t new_column_entries_ = 0;
  std::unique_ptr<ClpSimplex> model_;  // the last solve's, kept for resolve()
  // set_coefficient's index of the entries, (row, column) -> entry; valid for the first
  // `indexed_entries_` entries.
  std::unordered_map<std::uint64_t, std::size_t> entry_at_;
  std::size_t indexed_entries_ = 0;
  bool matrix_changed_ = false;  // since the last solve
};

}  // namespace perseus::cluster
