#include "perseus/solver/exact_milp.hpp"

#include <coin/Cbc_C_Interface.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "perseus/model/errors.hpp"
#include "perseus/model/shared_library.hpp"
#include "perseus/solver/frontier.hpp"

namespace perseus {
namespace {

// CBC, loaded by the first exact solve (model/shared_library.hpp says why): the C interface's
// functions solve_exact calls, with the header's types.
struct Cbc {
  SharedLibrary library{"libCbcSolver.so.3", "coinor-libcbc3"};
  PERSEUS_LIBRARY_FUNCTION(Cbc_newModel);
  PERSEUS_LIBRARY_FUNCTION(Cbc_deleteModel);
  PERSEUS_LIBRARY_FUNCTION(Cbc_loadProblem);
  PERSEUS_LIBRARY_FUNCTION(Cbc_setInteger);
  PERSEUS_LIBRARY_FUNCTION(Cbc_setParameter);
  PERSEUS_LIBRARY_FUNCTION(Cbc_setMaximumSeconds);
  PERSEUS_LIBRARY_FUNCTION(Cbc_setAllowableGap);
  PERSEUS_LIBRARY_FUNCTION(Cbc_setAllowableFractionGap);
  PERSEUS_LIBRARY_FUNCTION(Cbc_setMIPStartI);
  PERSEUS_LIBRARY_FUNCTION(Cbc_solve);
  PERSEUS_LIBRARY_FUNCTION(Cbc_numberSavedSolutions);
  PERSEUS_LIBRARY_FUNCTION(Cbc_isProvenOptimal);
  PERSEUS_LIBRARY_FUNCTION(Cbc_getColSolution);
  PERSEUS_LIBRARY_FUNCTION(Cbc_getBestPossibleObjValue);
};

// Loaded once (thread-safe); a failed load throws here and is tried again by the next call.
const Cbc& cbc() {
  static const Cbc loaded;
  return loaded;
}

// What CBC takes for "no bound" (COIN_DBL_MAX).
constexpr double kInfinity = std::numeric_limits<double>::max();
// A plan meets the deadline within this (the same slack CBC's feasibility tolerance allows).
constexpr double kDeadlineTolerance_s = 1e-9;

// The constraint matrix, column by column, and the bounds (the model in the header).
struct Model {
  std::vector<int> first_x;  // per node: its first option's column; then n: the first start column
  std::vector<int> column_start, row_index;
  std::vector<double> values, column_lower, column_upper, objective, row_lower, row_upper;
  int columns() const { return static_cast<int>(column_lower.size()); }
  int rows() const { return static_cast<int>(row_lower.size()); }
};

Model build_model(const EnergyProblem& problem, double deadline_s) {
  const Dag& dag = problem.dag;
  const int n = static_cast<int>(dag.num_nodes());
  Model m;
  m.first_x.assign(n + 1, 0);
  for (int i = 0; i < n; ++i) m.first_x[i + 1] = m.first_x[i] + static_cast<int>(problem.options_of(i).options.size());
  const int start_column = m.first_x[n];  // s[i] is column start_column + i
  const int columns = start_column + n;
  struct Entry {
    int row, column;
    double value;
  };
  std::vector<Entry> entries;
  const auto add_row = [&m](double lower, double upper) {
    m.row_lower.push_back(lower);
    m.row_upper.push_back(upper);
    return m.rows() - 1;
  };
  const auto add_duration = [&](int row, int node, double sign) {
    const auto& options = problem.options_of(node).options;
    for (int k = 0; k < static_cast<int>(options.size()); ++k) {
      entries.push_back({row, m.first_x[node] + k, sign * options[k].measurement.time_s});
    }
  };
  for (int i = 0; i < n; ++i) {  // one option per node
    const int row = add_row(1.0, 1.0);
    for (int column = m.first_x[i]; column < m.first_x[i + 1]; ++column) entries.push_back({row, column, 1.0});
  }
  for (int i = 0; i < n; ++i) {
    for (const Dag::NodeId w : dag.successors(i)) {  // s[w] - s[i] - d[i] >= 0
      const int row = add_row(0.0, kInfinity);
      entries.push_back({row, start_column + static_cast<int>(w), 1.0});
      entries.push_back({row, start_column + i, -1.0});
      add_duration(row, i, -1.0);
    }
    if (dag.successors(i).empty()) {  // s[i] + d[i] <= deadline
      const int row = add_row(-kInfinity, deadline_s);
      entries.push_back({row, start_column + i, 1.0});
      add_duration(row, i, 1.0);
    }
  }
  m.column_start.assign(columns + 1, 0);
  for (const Entry& e : entries) ++m.column_start[e.column + 1];
  for (int c = 0; c < columns; ++c) m.column_start[c + 1] += m.column_start[c];
  m.row_index.resize(entries.size());
  m.values.resize(entries.size());
  std::vector<int> fill(m.column_start.begin(), m.column_start.end() - 1);
  for (const Entry& e : entries) {
    m.row_index[fill[e.column]] = e.row;
    m.values[fill[e.column]++] = e.value;
  }
  m.column_lower.assign(columns, 0.0);
  m.column_upper.assign(columns, 1.0);
  m.objective.assign(columns, 0.0);
  for (int i = 0; i < n; ++i) {
    const auto& options = problem.options_of(i).options;
    for (int k = 0; k < static_cast<int>(options.size()); ++k) {
      const Measurement& measured = options[k].measurement;
      m.objective[m.first_x[i] + k] = measured.energy_j - problem.p_blocking * measured.time_s;
    }
    m.column_upper[start_column + i] = deadline_s;
  }
  return m;
}

// The plan CBC's column solution picks: each node's largest x.
OptionChoice choice_of(const Model& m, const double* solution, int nodes) {
  OptionChoice choice(nodes, 0);
  for (int i = 0; i < nodes; ++i) {
    double best = -1.0;
    for (int column = m.first_x[i]; column < m.first_x[i + 1]; ++column) {
      if (solution[column] > best) {
        best = solution[column];
        choice[i] = column - m.first_x[i];
      }
    }
  }
  return choice;
}

}  // namespace

std::optional<ExactSolution> solve_exact(const EnergyProblem& problem, double deadline_s, const ExactOptions& options) {
  const int n = static_cast<int>(problem.dag.num_nodes());
  if (evaluate_measured(problem, fastest_choice(problem)).time_s > deadline_s + kDeadlineTolerance_s) return std::nullopt;
  std::optional<ExactSolution> start;
  if (options.start && static_cast<int>(options.start->size()) == n) {
    ExactSolution s;
    s.choice = *options.start;
    s.measured = evaluate_measured(problem, s.choice);
    if (s.measured.time_s <= deadline_s + kDeadlineTolerance_s) {
      s.energy_at_deadline_j = energy_at(problem, s.measured, deadline_s);
      start = std::move(s);
    }
  }

  std::size_t binaries = 0;
  for (int i = 0; i < n; ++i) binaries += problem.options_of(i).options.size();
  if (binaries > options.max_binaries) {
    throw InputError(fmt::format("the exact MILP of {} operations would have {} binaries, more than the {} it is "
                                 "allowed (its memory grows with them)",
                                 n, binaries, options.max_binaries));
  }
  const Cbc& api = cbc();
  const Model m = build_model(problem, deadline_s);
  std::unique_ptr<Cbc_Model, decltype(api.Cbc_deleteModel)> model(api.Cbc_newModel(), api.Cbc_deleteModel);
  api.Cbc_loadProblem(model.get(), m.columns(), m.rows(), m.column_start.data(), m.row_index.data(), m.values.data(),
                      m.column_lower.data(), m.column_upper.data(), m.objective.data(), m.row_lower.data(),
                      m.row_upper.data());
  for (int column = 0; column < m.first_x[n]; ++column) api.Cbc_setInteger(model.get(), column);
  api.Cbc_setParameter(model.get(), "logLevel", "0");
  // The limit is wall time, as users count it (CBC counts CPU time by default).
  api.Cbc_setParameter(model.get(), "timeMode", "elapsed");
  api.Cbc_setMaximumSeconds(model.get(), options.time_limit_s);
  // Optimal to the last joule: the objective is thousands of J, its terms tenths of one.
  api.Cbc_setAllowableGap(model.get(), 1e-7);
  api.Cbc_setAllowableFractionGap(model.get(), 1e-7);
  if (start) {
    // The start's options and its earliest start times, which meet the deadline.
    std::vector<int> columns;
    std::vector<double> values, durations(n), begin;
    for (int i = 0; i < n; ++i) durations[i] = problem.chosen(i, start->choice).measurement.time_s;
    critical_path_length<double>(problem.dag, durations, &begin);
    for (int i = 0; i < n; ++i) {
      columns.push_back(m.first_x[i] + start->choice[i]);
      values.push_back(1.0);
      columns.push_back(m.first_x[n] + i);
      values.push_back(std::min(begin[i], deadline_s));
    }
    api.Cbc_setMIPStartI(model.get(), static_cast<int>(columns.size()), columns.data(), values.data());
  }
  const auto started = std::chrono::steady_clock::now();
  api.Cbc_solve(model.get());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  std::optional<ExactSolution> result = start;
  const double* solution = api.Cbc_getColSolution(model.get());
  if (solution && api.Cbc_numberSavedSolutions(model.get()) > 0) {
    ExactSolution found;
    found.choice = choice_of(m, solution, n);
    found.measured = evaluate_measured(problem, found.choice);
    // Re-evaluated on the DAG: kept only if it meets the deadline and is cheaper.
    if (found.measured.time_s <= deadline_s + kDeadlineTolerance_s) {
      found.energy_at_deadline_j = energy_at(problem, found.measured, deadline_s);
      if (!result || found.energy_at_deadline_j < result->energy_at_deadline_j) {
        found.improved = result.has_value();
        result = std::move(found);
      }
    }
  }
  if (!result) return std::nullopt;
  result->seconds = seconds;
  result->proven_optimal = api.Cbc_isProvenOptimal(model.get()) != 0;
  const double blocking_j = problem.p_blocking * problem.num_gpus() * deadline_s;
  const double bound = api.Cbc_getBestPossibleObjValue(model.get());
  if (result->proven_optimal) {
    result->lower_bound_j = result->energy_at_deadline_j;
  } else if (std::isfinite(bound) && std::abs(bound) < 1e30) {
    // Never above the best plan known (CBC's bound can overshoot it by its tolerance).
    result->lower_bound_j = std::min(bound + blocking_j, result->energy_at_deadline_j);
  } else {
    result->lower_bound_j = std::numeric_limits<double>::quiet_NaN();
  }
  return result;
}

}  // namespace perseus
