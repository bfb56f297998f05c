#include "exact_milp.hpp"

#include <Cbc_C_Interface.h>

#include <limits>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

namespace perseus::testing {

constexpr double kUnbounded = std::numeric_limits<double>::max();

// Variables: x[i][k] (node i runs option k, binary) and s[i] (start time of node i).
// Minimise sum x*(energy - p_blocking*time): with the deadline fixed, the iteration's
// blocking energy is p_blocking*(S*T - sum t), so this is the measured energy at T.
std::optional<ExactResult> solve_exact(const EnergyProblem& problem, double deadline_s, double time_limit_s) {
  const Dag& dag = problem.dag;
  const int n = static_cast<int>(dag.num_nodes());
  std::vector<int> first_x(n + 1, 0);
  for (int i = 0; i < n; ++i) first_x[i + 1] = first_x[i] + static_cast<int>(problem.options_of(i).options.size());
  const int num_x = first_x[n];
  const int start_col = num_x;  // s[i] = start_col + i
  const int num_cols = num_x + n;

  // Rows, built as (row, col, value) triplets then packed column-wise.
  struct Entry { int row; int col; double value; };
  std::vector<Entry> entries;
  std::vector<double> row_lb, row_ub;
  auto add_duration_terms = [&](int row, int node, double sign) {
    const auto& options = problem.options_of(node).options;
    for (int k = 0; k < static_cast<int>(options.size()); ++k) {
      entries.push_back({row, first_x[node] + k, sign * options[k].measurement.time_s});
    }
  };
  for (int i = 0; i < n; ++i) {  // exactly one option per node
    const int row = static_cast<int>(row_lb.size());
    for (int k = first_x[i]; k < first_x[i + 1]; ++k) entries.push_back({row, k, 1.0});
    row_lb.push_back(1.0);
    row_ub.push_back(1.0);
  }
  for (int i = 0; i < n; ++i) {
    for (int j : dag.successors(i)) {  // s_j - s_i - d_i >= 0
      const int row = static_cast<int>(row_lb.size());
      entries.push_back({row, start_col + j, 1.0});
      entries.push_back({row, start_col + i, -1.0});
      add_duration_terms(row, i, -1.0);
      row_lb.push_back(0.0);
      row_ub.push_back(kUnbounded);
    }
    if (dag.successors(i).empty()) {  // s_i + d_i <= T
      const int row = static_cast<int>(row_lb.size());
      entries.push_back({row, start_col + i, 1.0});
      add_duration_terms(row, i, 1.0);
      row_lb.push_back(-kUnbounded);
      row_ub.push_back(deadline_s);
    }
  }
  std::vector<int> column_start(num_cols + 1, 0);
  for (const Entry& e : entries) ++column_start[e.col + 1];
  for (int c = 0; c < num_cols; ++c) column_start[c + 1] += column_start[c];
  std::vector<int> row_index(entries.size());
  std::vector<double> values(entries.size());
  std::vector<int> fill(column_start.begin(), column_start.end() - 1);
  for (const Entry& e : entries) {
    row_index[fill[e.col]] = e.row;
    values[fill[e.col]++] = e.value;
  }
  std::vector<double> col_lb(num_cols, 0.0), col_ub(num_cols, 1.0), objective(num_cols, 0.0);
  for (int i = 0; i < n; ++i) {
    const auto& options = problem.options_of(i).options;
    for (int k = 0; k < static_cast<int>(options.size()); ++k) {
      const Measurement& m = options[k].measurement;
      objective[first_x[i] + k] = m.energy_j - problem.p_blocking * m.time_s;
    }
    col_ub[start_col + i] = deadline_s;
  }

  std::unique_ptr<Cbc_Model, void (*)(Cbc_Model*)> model(Cbc_newModel(), Cbc_deleteModel);
  Cbc_loadProblem(model.get(), num_cols, static_cast<int>(row_lb.size()), column_start.data(), row_index.data(),
                  values.data(), col_lb.data(), col_ub.data(), objective.data(), row_lb.data(), row_ub.data());
  for (int c = 0; c < num_x; ++c) Cbc_setInteger(model.get(), c);
  Cbc_setParameter(model.get(), "logLevel", "0");
  Cbc_setMaximumSeconds(model.get(), time_limit_s);
  Cbc_setAllowableFractionGap(model.get(), 1e-7);
  Cbc_setAllowableGap(model.get(), 1e-7);
  Cbc_solve(model.get());
  if (Cbc_numberSavedSolutions(model.get()) == 0 && !Cbc_isProvenOptimal(model.get())) return std::nullopt;
  const double* solution = Cbc_getColSolution(model.get());
  if (!solution) return std::nullopt;
  ExactResult result;
  result.choice.assign(n, 0);
  for (int i = 0; i < n; ++i) {
    double best = -1.0;
    for (int k = first_x[i]; k < first_x[i + 1]; ++k) {
      if (solution[k] > best) {
        best = solution[k];
        result.choice[i] = k - first_x[i];
      }
    }
  }
  result.measured = evaluate_measured(problem, result.choice);
  result.proven_optimal = Cbc_isProvenOptimal(model.get());
  if (result.measured.time_s > deadline_s + 1e-9) return std::nullopt;
  const double blocking_at_deadline = problem.p_blocking * problem.num_gpus() * deadline_s;
  result.energy_at_deadline_j = result.measured.energy_j + problem.p_blocking * problem.num_gpus() *
                                                               (deadline_s - result.measured.time_s);
  result.lower_bound_j = result.proven_optimal ? result.energy_at_deadline_j
                                               : Cbc_getBestPossibleObjValue(model.get()) + blocking_at_deadline;
  return result;
}

}  // namespace perseus::testing
