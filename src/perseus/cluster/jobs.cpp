#include "perseus/cluster/jobs.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <random>
#include <sstream>

#include <fmt/format.h>

#include "perseus/profile/profile.hpp"

namespace perseus::cluster {

namespace {

// The optional `slo_s` column: a time > 0, or empty (or no column) for none.
double slo_of(const csv::Table& table, const csv::Row& row, int column) {
  if (column < 0 || row.fields[static_cast<std::size_t>(column)].empty()) return Job::kNoSlo;
  const double slo = csv::parse_finite(table, row, column);
  if (!(slo > 0.0)) throw InputError(table.field_error(row, column, "a time > 0 (or empty: no SLO)"));
  return slo;
}

// The optional `entity` column: its index in `entities` (read_jobs_csv's rules); 0 without the
// column (or without `entities`).
class EntityColumn {
 public:
  EntityColumn(const csv::Table& table, std::vector<Entity>* entities)
      : table_(table), entities_(entities), column_(entities ? table.column("entity") : -1), grow_(entities && entities->empty()) {}
  bool present() const { return column_ >= 0; }
  // -1 for an empty field.
  int of(const csv::Row& row) const {
    if (column_ < 0) return 0;
    const std::string& name = row.fields[static_cast<std::size_t>(column_)];
    if (name.empty()) return -1;
    if (const int e = find_entity(*entities_, name); e >= 0) return e;
    if (!grow_) {
      std::string known;
      for (const Entity& e : *entities_) known += (known.empty() ? "" : ", ") + e.name;
      throw InputError(table_.field_error(row, column_, fmt::format("one of the entities given ({})", known)));
    }
    entities_->push_back({name, 1.0, EntityPolicy::kFairness});
    return static_cast<int>(entities_->size()) - 1;
  }

 private:
  const csv::Table& table_;
  std::vector<Entity>* entities_;
  int column_;
  bool grow_;
};

}  // namespace

std::vector<Entity> parse_entities(const std::string& text) {
  std::vector<Entity> out;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    std::vector<std::string> parts;
    std::stringstream fields(item);
    for (std::string part; std::getline(fields, part, ':');) parts.push_back(part);
    if (parts.empty() || parts[0].empty() || parts.size() > 3)
      throw InputError(fmt::format("--entities '{}': '{}' is not NAME[:WEIGHT[:fairness|fifo]]", text, item));
    Entity e{parts[0], 1.0, EntityPolicy::kFairness};
    if (parts.size() > 1) {
      char* end = nullptr;
      e.weight = std::strtod(parts[1].c_str(), &end);
      if (parts[1].empty() || *end != '\0' || !(e.weight > 0.0) || !std::isfinite(e.weight))
        throw InputError(fmt::format("--entities '{}': weight '{}' of {} must be a number > 0", text, parts[1], e.name));
    }
    if (parts.size() > 2) {
      if (parts[2] == "fifo") e.policy = EntityPolicy::kFifo;
      else if (parts[2] != "fairness")
        throw InputError(fmt::format("--entities '{}': policy '{}' of {} is neither 'fairness' nor 'fifo'", text, parts[2], e.name));
    }
    for (const Entity& seen : out)
      if (seen.name == e.name) throw InputError(fmt::format("--entities '{}': {} given twice", text, e.name));
    out.push_back(std::move(e));
  }
  if (out.empty()) throw InputError("--entities: give at least one NAME[:WEIGHT[:fairness|fifo]]");
  return out;
}

std::vector<Job> read_jobs_csv(const std::string& path, const ThroughputMatrix& matrix, std::vector<Entity>* entities,
                               std::vector<std::string>* commands) {
  static constexpr std::string_view kRequired[] = {"job"};
  const csv::Table table = csv::parse(csv::read_file(path), path, kRequired);
  for (const std::string& name : table.header)
    if (name != "job" && name != "weight" && name != "steps" && name != "elapsed_s" && name != "slo_s" && name != "entity" &&
        name != "command")
      throw InputError(fmt::format("{}:{}: unknown column '{}' (job, weight, steps, elapsed_s, slo_s, entity, command)", path,
                                   table.header_line, name));
  const int job = table.column("job"), weight = table.column("weight"), steps = table.column("steps"),
            elapsed = table.column("elapsed_s"), slo = table.column("slo_s"), command = table.column("command");
  const EntityColumn entity(table, entities);
  const auto at_least_zero = [&](const csv::Row& row, int column, double fallback) {
    if (column < 0) return fallback;
    const double value = csv::parse_finite(table, row, column);
    if (value < 0.0) throw InputError(table.field_error(row, column, "a number >= 0"));
    return value;
  };
  std::vector<Job> jobs;
  for (const csv::Row& row : table.rows) {
    Job j;
    try {
      j.type = matrix.job_index(row.fields[job]);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}:{}: {}", path, row.line, e.what()));
    }
    j.weight = at_least_zero(row, weight, 1.0);
    j.steps = at_least_zero(row, steps, 0.0);
    j.elapsed_s = at_least_zero(row, elapsed, 0.0);
    j.slo_s = slo_of(table, row, slo);
    j.entity = entity.of(row);
    if (j.entity < 0) throw InputError(fmt::format("{}:{}: no entity named (the column has one per job)", path, row.line));
    if (commands) commands->push_back(command >= 0 ? row.fields[static_cast<std::size_t>(command)] : std::string());
    jobs.push_back(j);
  }
  return jobs;
}

std::string default_reference_gpu(const ThroughputMatrix& matrix) {
  for (const std::string& g : matrix.gpu_types)
    if (g == "v100") return g;
  for (int j = 0; j < matrix.num_gpu_types(); ++j) {
    bool all = true;
    for (int m = 0; m < matrix.num_job_types(); ++m)
      all = all && (matrix.job_types[static_cast<std::size_t>(m)].scale_factor != 1 || matrix.at(m, j) > 0.0);
    if (all) return matrix.gpu_types[static_cast<std::size_t>(j)];
  }
  return matrix.gpu_types.front();  // validate() rejects a matrix without GPU types
}

namespace {

// Draws jobs as Gavel's simulator does (jobs.hpp): a type, then 10^x minutes on the reference GPU.
class JobDrawer {
 public:
  JobDrawer(const ThroughputMatrix& matrix, std::uint64_t seed, const std::string& reference_gpu, bool multi_gpu)
      : matrix_(matrix), reference_(matrix.gpu_index(reference_gpu.empty() ? default_reference_gpu(matrix) : reference_gpu)), multi_gpu_(multi_gpu), rng_(seed) {
    for (int m = 0; m < matrix.num_job_types(); ++m)
      if (matrix.at(m, reference_) > 0.0) by_scale_[matrix.job_types[m].scale_factor].push_back(m);
    if (by_scale_[1].empty())
      throw InputError(fmt::format("no single-GPU job type runs on {}", matrix.gpu_types[static_cast<std::size_t>(reference_)]));
  }
  TraceJob next() {
    int scale = 1;
    if (multi_gpu_) {
      const double u = unit_(rng_);
      scale = u < 0.7 ? 1 : u < 0.95 ? (unit_(rng_) < 0.5 ? 2 : 4) : 8;
      if (by_scale_[scale].empty()) scale = 1;
    }
    const std::vector<int>& types = by_scale_[scale];
    TraceJob j;
    j.type = types[std::min(types.size() - 1, static_cast<std::size_t>(unit_(rng_) * static_cast<double>(types.size())))];
    const double x = unit_(rng_) < 0.8 ? 1.5 + 1.5 * unit_(rng_) : 3.0 + unit_(rng_);
    j.steps = std::pow(10.0, x) * 60.0 * matrix_.at(j.type, reference_);
    return j;
  }
  double unit() { return unit_(rng_); }

 private:
  const ThroughputMatrix& matrix_;
  int reference_;
  bool multi_gpu_;
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> unit_{0.0, 1.0};
  std::map<int, std::vector<int>> by_scale_;
};

}  // namespace

std::vector<Job> random_jobs(const ThroughputMatrix& matrix, int count, std::uint64_t seed, const std::string& reference_gpu,
                             bool multi_gpu) {
  JobDrawer draw(matrix, seed, reference_gpu, multi_gpu);
  std::vector<Job> jobs;
  for (int i = 0; i < count; ++i) {
    const TraceJob t = draw.next();
    jobs.push_back({t.type, 1.0, t.steps, 0.0});
  }
  return jobs;
}

JobSource list_source(std::vector<TraceJob> jobs) {
  return [jobs = std::move(jobs), next = std::size_t{0}]() mutable -> std::optional<TraceJob> {
    if (next == jobs.size()) return std::nullopt;
    return jobs[next++];
  };
}

JobSource poisson_source(const ThroughputMatrix& matrix, double jobs_per_hour, std::uint64_t seed, bool multi_gpu,
                         const std::string& reference_gpu) {
  if (!(jobs_per_hour > 0.0) || !std::isfinite(jobs_per_hour))
    throw InputError(fmt::format("arrival rate {} jobs/hour: must be a number > 0", jobs_per_hour));
  auto draw = std::make_shared<JobDrawer>(matrix, seed, reference_gpu, multi_gpu);
  return [draw, mean_gap_s = 3600.0 / jobs_per_hour, now = 0.0]() mutable -> std::optional<TraceJob> {
    TraceJob j = draw->next();
    now += -std::log(1.0 - draw->unit()) * mean_gap_s;
    j.arrival_s = now;
    return j;
  };
}

std::vector<TraceJob> static_trace(const ThroughputMatrix& matrix, int count, std::uint64_t seed, bool multi_gpu,
                                   const std::string& reference_gpu) {
  JobDrawer draw(matrix, seed, reference_gpu, multi_gpu);
  std::vector<TraceJob> jobs;
  for (int i = 0; i < count; ++i) jobs.push_back(draw.next());
  return jobs;
}

std::vector<TraceJob> cost_trace(const ThroughputMatrix& matrix, int count, std::uint64_t seed, const std::string& reference_gpu) {
  const int reference = matrix.gpu_index(reference_gpu.empty() ? default_reference_gpu(matrix) : reference_gpu);
  std::vector<int> types;
  for (const std::string name : {"ResNet-50 (batch size 64)", "A3C"}) {
    int found = -1;
    for (int m = 0; m < matrix.num_job_types() && found < 0; ++m)
      if (const JobType& type = matrix.job_types[static_cast<std::size_t>(m)]; type.model == name && type.scale_factor == 1) found = m;
    if (found < 0 || matrix.at(found, reference) <= 0.0)
      throw InputError(fmt::format("the cost workload needs single-GPU '{}' jobs with a throughput on {} (Gavel's matrix has them)",
                                   name, matrix.gpu_types[static_cast<std::size_t>(reference)]));
    types.push_back(found);
  }
  static constexpr double kDays[] = {0.5, 1.0, 2.0, 4.0, 8.0};
  static constexpr double kSlo[] = {1.2, 2.0, 10.0};
  std::mt19937_64 rng(seed);
  const auto pick = [&](std::size_t n) { return std::min(n - 1, static_cast<std::size_t>(std::uniform_real_distribution<double>(0.0, 1.0)(rng) * static_cast<double>(n))); };
  std::vector<TraceJob> jobs;
  for (int i = 0; i < count; ++i) {
    TraceJob j;
    j.type = types[pick(types.size())];
    const double length_s = kDays[pick(std::size(kDays))] * 86400.0;
    j.steps = length_s * matrix.at(j.type, reference);
    j.slo_s = kSlo[pick(std::size(kSlo))] * length_s;
    jobs.push_back(j);
  }
  return jobs;
}

std::vector<TraceJob> read_trace_csv(const std::string& path, const ThroughputMatrix& matrix, std::vector<Entity>* entities) {
  static constexpr std::string_view kRequired[] = {"job", "steps"};
  // What `perseus cluster simulate` writes in jobs.csv besides; its run columns pick one run.
  static const std::set<std::string> kWritten = {"policy", "aware", "space_sharing", "energy_slack", "jobs_per_hour", "seed", "id",
                                                 "scale_factor", "start_s", "completion_s", "jct_s", "energy_j", "rounds",
                                                 "preemptions", "migrations", "measured", "isolated_s", "ftf_rho"};
  static constexpr std::string_view kRunColumns[] = {"policy", "aware", "space_sharing", "energy_slack", "jobs_per_hour", "seed"};
  const csv::Table table = csv::parse(csv::read_file(path), path, kRequired);
  for (const std::string& name : table.header)
    if (name != "job" && name != "steps" && name != "arrival_s" && name != "weight" && name != "slo_s" && name != "entity" &&
        !kWritten.count(name) && name.rfind("gpu_s_", 0) != 0)
      throw InputError(
          fmt::format("{}:{}: unknown column '{}' (job, steps, arrival_s, weight, slo_s, entity)", path, table.header_line, name));
  const int job = table.column("job"), steps = table.column("steps"), arrival = table.column("arrival_s"),
            weight = table.column("weight"), slo = table.column("slo_s");
  const auto run_of = [&](const csv::Row& row) {
    std::string key;
    for (std::string_view c : kRunColumns)
      if (const int i = table.column(std::string(c)); i >= 0) key += row.fields[static_cast<std::size_t>(i)] + ",";
    return key;
  };
  const EntityColumn entity(table, entities);
  const std::string first_run = table.rows.empty() ? "" : run_of(table.rows.front());
  std::vector<TraceJob> jobs;
  for (const csv::Row& row : table.rows) {
    if (run_of(row) != first_run) continue;  // a jobs.csv of several runs: the first run's jobs
    TraceJob j;
    try {
      j.type = matrix.job_index(row.fields[job]);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}:{}: {}", path, row.line, e.what()));
    }
    j.steps = csv::parse_finite(table, row, steps);
    if (!(j.steps > 0.0)) throw InputError(table.field_error(row, steps, "a number of steps > 0"));
    if (arrival >= 0) {
      j.arrival_s = csv::parse_finite(table, row, arrival);
      if (j.arrival_s < 0.0) throw InputError(table.field_error(row, arrival, "a time >= 0"));
    }
    if (weight >= 0) {
      j.weight = csv::parse_finite(table, row, weight);
      if (j.weight < 0.0) throw InputError(table.field_error(row, weight, "a weight >= 0"));
    }
    j.slo_s = slo_of(table, row, slo);
    if (entity.present()) j.entity = entity.of(row);  // empty: -1, dealt round-robin
    jobs.push_back(j);
  }
  std::stable_sort(jobs.begin(), jobs.end(), [](const TraceJob& a, const TraceJob& b) { return a.arrival_s < b.arrival_s; });
  return jobs;
}

namespace {

// "TYPE:VALUE,..." into `values` (one per GPU type of the matrix); `accept` says whether a value
// is valid, `what` names it in the error.
void parse_per_type(const std::string& flag, const std::string& text, const ThroughputMatrix& matrix, std::vector<double>& values,
                    bool integral, const std::function<bool(double)>& accept, const std::string& what) {
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    const auto colon = item.find(':');
    if (colon == std::string::npos) throw InputError(fmt::format("{} '{}': expected TYPE:VALUE,...", flag, text));
    const int j = matrix.gpu_index(item.substr(0, colon));
    const std::string number = item.substr(colon + 1);
    try {
      std::size_t used = 0;
      const double v = integral ? static_cast<double>(std::stoi(number, &used)) : std::stod(number, &used);
      if (used != number.size() || !accept(v)) throw std::invalid_argument(what);
      values[static_cast<std::size_t>(j)] = v;
    } catch (const std::exception&) {
      throw InputError(fmt::format("{} '{}': '{}' is not {}", flag, text, number, what));
    }
  }
}

}  // namespace

std::vector<int> parse_gpu_counts(const std::string& text, const ThroughputMatrix& matrix) {
  std::vector<double> counts(static_cast<std::size_t>(matrix.num_gpu_types()), 0.0);
  parse_per_type("--gpus", text, matrix, counts, true, [](double v) { return v >= 0.0; }, "a count of GPUs");
  return {counts.begin(), counts.end()};
}

std::vector<double> parse_prices(const std::string& text, const ThroughputMatrix& matrix, bool required) {
  std::vector<double> prices(static_cast<std::size_t>(matrix.num_gpu_types()), 0.0);
  try {
    prices = default_prices(matrix);
  } catch (const InputError&) {
    if (text.empty() && !required) return {};
    if (text.empty()) throw;
  }
  parse_per_type("--prices", text, matrix, prices, false, [](double v) { return v > 0.0 && std::isfinite(v); }, "a price > 0");
  for (std::size_t j = 0; j < prices.size(); ++j)
    if (!(prices[j] > 0.0)) throw InputError(fmt::format("--prices: no price for {}", matrix.gpu_types[j]));
  return prices;
}

}  // namespace perseus::cluster
