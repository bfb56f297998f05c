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

// With a price, the deadline is a column of that cost (solve_exact_priced), at most
// `deadline_s`, which is then a horizon no plan exceeds.
Model build_model(const EnergyProblem& problem, double deadline_s, std::optional<double> price = std::nullopt) {
  const Dag& dag = problem.dag;
  const int n = static_cast<int>(dag.num_nodes());
  Model m;
  m.first_x.assign(n + 1, 0);
  for (int i = 0; i < n; ++i) m.first_x[i + 1] = m.first_x[i] + static_cast<int>(problem.options_of(i).options.size());
  const int start_column = m.first_x[n];  // s[i] is column start_column + i
  const int deadline_column = start_column + n;  // priced only
  const int columns = start_column + n + (price ? 1 : 0);
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
    if (dag.successors(i).empty()) {  // s[i] + d[i] <= deadline (priced: - D <= 0)
      const int row = add_row(-kInfinity, price ? 0.0 : deadline_s);
      entries.push_back({row, start_column + i, 1.0});
      if (price) entries.push_back({row, deadline_column, -1.0});
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
  if (price) {
    m.column_upper[deadline_column] = deadline_s;
    m.objective[deadline_column] = *price;
  }
  return m;
}

// One CBC solve of `m` (its first m.first_x.back() columns binary) from a start (columns and
// values; none where empty), within the time limit.
struct CbcRun {
  std::vector<double> solution;  // empty where CBC saved none
  bool proven_optimal = false;
  double bound = std::numeric_limits<double>::quiet_NaN();  // NaN where CBC had none
  double seconds = 0.0;
};
CbcRun run_cbc(const Model& m, const std::vector<int>& start_columns, const std::vector<double>& start_values,
               double time_limit_s) {
  const Cbc& api = cbc();
  std::unique_ptr<Cbc_Model, decltype(api.Cbc_deleteModel)> model(api.Cbc_newModel(), api.Cbc_deleteModel);
  api.Cbc_loadProblem(model.get(), m.columns(), m.rows(), m.column_start.data(), m.row_index.data(), m.values.data(),
                      m.column_lower.data(), m.column_upper.data(), m.objective.data(), m.row_lower.data(),
                      m.row_upper.data());
  for (int column = 0; column < m.first_x.back(); ++column) api.Cbc_setInteger(model.get(), column);
  api.Cbc_setParameter(model.get(), "logLevel", "0");
  // The limit is wall time, as users count it (CBC counts CPU time by default).
  api.Cbc_setParameter(model.get(), "timeMode", "elapsed");
  api.Cbc_setMaximumSeconds(model.get(), time_limit_s);
  // Optimal to the last joule: the objective is thousands of J, its terms tenths of one.
  api.Cbc_setAllowableGap(model.get(), 1e-7);
  api.Cbc_setAllowableFractionGap(model.get(), 1e-7);
  if (!start_columns.empty()) {
    api.Cbc_setMIPStartI(model.get(), static_cast<int>(start_columns.size()), start_columns.data(), start_values.data());
  }
  const auto started = std::chrono::steady_clock::now();
  api.Cbc_solve(model.get());
  CbcRun run;
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const double* solution = api.Cbc_getColSolution(model.get());
  if (solution && api.Cbc_numberSavedSolutions(model.get()) > 0) run.solution.assign(solution, solution + m.columns());
  run.proven_optimal = api.Cbc_isProvenOptimal(model.get()) != 0;
  const double bound = api.Cbc_getBestPossibleObjValue(model.get());
  if (std::isfinite(bound) && std::abs(bound) < 1e30) run.bound = bound;
  return run;
}

// CBC's bound plus `offset`, under the best plan known (`best`, offset included): the plan's
// own where CBC proved it optimal, never above it (CBC's bound can overshoot it by its
// tolerance), NaN where CBC had none (the time ran out inside its root LP).
double bound_under(const CbcRun& run, double best, double offset = 0.0) {
  if (run.proven_optimal) return best;
  if (std::isfinite(run.bound)) return std::min(run.bound + offset, best);
  return std::numeric_limits<double>::quiet_NaN();
}

// A start for CBC: the plan's options and its earliest start times, each at most `latest`.
void start_of(const EnergyProblem& problem, const Model& m, const OptionChoice& choice, double latest,
              std::vector<int>* columns, std::vector<double>* values) {
  const int n = static_cast<int>(problem.dag.num_nodes());
  std::vector<double> durations(n), begin;
  for (int i = 0; i < n; ++i) durations[i] = problem.chosen(i, choice).measurement.time_s;
  critical_path_length<double>(problem.dag, durations, &begin);
  for (int i = 0; i < n; ++i) {
    columns->push_back(m.first_x[i] + choice[i]);
    values->push_back(1.0);
    columns->push_back(m.first_x[n] + i);
    values->push_back(std::min(begin[i], latest));
  }
}

void check_size(const EnergyProblem& problem, const ExactOptions& options) {
  const std::size_t n = problem.dag.num_nodes();
  std::size_t binaries = 0;
  for (std::size_t i = 0; i < n; ++i) binaries += problem.options_of(i).options.size();
  if (binaries > options.max_binaries) {
    throw InputError(fmt::format("the exact MILP of {} operations would have {} binaries, more than the {} it is "
                                 "allowed (its memory grows with them)",
                                 n, binaries, options.max_binaries));
  }
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

// The plan to report: CBC's (`found`; none where it had none, or where its plan missed the
// deadline) where its `cost` is less than the start's, else the start, with the run's time and
// status; nullopt where neither exists.
template <class Solution, class Cost>
std::optional<Solution> keep_cheaper(std::optional<Solution> start, std::optional<Solution> found, const Cost& cost,
                                     const CbcRun& run) {
  if (found && (!start || cost(*found) < cost(*start))) {
    found->improved = start.has_value();
    start = std::move(found);
  }
  if (start) {
    start->seconds = run.seconds;
    start->proven_optimal = run.proven_optimal;
  }
  return start;
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
  check_size(problem, options);
  const Model m = build_model(problem, deadline_s);
  std::vector<int> start_columns;
  std::vector<double> start_values;
  if (start) start_of(problem, m, start->choice, deadline_s, &start_columns, &start_values);
  const CbcRun run = run_cbc(m, start_columns, start_values, options.time_limit_s);

  std::optional<ExactSolution> found;
  if (!run.solution.empty()) {
    found.emplace();
    found->choice = choice_of(m, run.solution.data(), n);
    found->measured = evaluate_measured(problem, found->choice);
    // Re-evaluated on the DAG: offered only if it meets the deadline.
    if (found->measured.time_s <= deadline_s + kDeadlineTolerance_s) {
      found->energy_at_deadline_j = energy_at(problem, found->measured, deadline_s);
    } else {
      found.reset();
    }
  }
  std::optional<ExactSolution> result = keep_cheaper(
      std::move(start), std::move(found), [](const ExactSolution& s) { return s.energy_at_deadline_j; }, run);
  if (!result) return std::nullopt;
  // CBC's objective leaves out the GPUs' blocking until the deadline.
  result->lower_bound_j =
      bound_under(run, result->energy_at_deadline_j, problem.p_blocking * problem.num_gpus() * deadline_s);
  return result;
}

std::optional<PricedExactSolution> solve_exact_priced(const EnergyProblem& problem, double price_j_per_s,
                                                      const ExactOptions& options) {
  if (!std::isfinite(price_j_per_s) || price_j_per_s < 0.0) {
    throw InputError(fmt::format("the price of the iteration's time must be finite and at least 0 J/s, not {}", price_j_per_s));
  }
  const int n = static_cast<int>(problem.dag.num_nodes());
  const double blocking_w = problem.p_blocking * problem.num_gpus();
  const auto priced = [&](PricedExactSolution& s) {
    s.measured = evaluate_measured(problem, s.choice);
    s.objective_j = s.measured.energy_j - blocking_w * s.measured.time_s + price_j_per_s * s.measured.time_s;
  };
  std::optional<PricedExactSolution> start;
  if (options.start && static_cast<int>(options.start->size()) == n) {
    PricedExactSolution s;
    s.choice = *options.start;
    priced(s);
    start = std::move(s);
  }
  check_size(problem, options);
  // No plan is slower than all its operations one after another at their slowest.
  double horizon = 0.0;
  for (int i = 0; i < n; ++i) {
    for (const auto& option : problem.options_of(i).options) horizon = std::max(horizon, option.measurement.time_s);
  }
  horizon *= n;
  const Model m = build_model(problem, horizon, price_j_per_s);
  std::vector<int> start_columns;
  std::vector<double> start_values;
  if (start) {
    start_of(problem, m, start->choice, horizon, &start_columns, &start_values);
    start_columns.push_back(m.first_x[n] + n);  // the deadline: the start's own time
    start_values.push_back(start->measured.time_s);
  }
  const CbcRun run = run_cbc(m, start_columns, start_values, options.time_limit_s);

  std::optional<PricedExactSolution> found;
  if (!run.solution.empty()) {
    found.emplace();
    found->choice = choice_of(m, run.solution.data(), n);
    priced(*found);
  }
  std::optional<PricedExactSolution> result = keep_cheaper(
      std::move(start), std::move(found), [](const PricedExactSolution& s) { return s.objective_j; }, run);
  if (!result) return std::nullopt;
  result->line_j = bound_under(run, result->objective_j);
  return result;
}

}  // namespace perseus
