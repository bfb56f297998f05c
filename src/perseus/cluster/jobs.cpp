#include "perseus/cluster/jobs.hpp"

#include <cmath>
#include <random>
#include <sstream>

#include <fmt/format.h>

#include "perseus/profile/profile.hpp"

namespace perseus::cluster {

std::vector<Job> read_jobs_csv(const std::string& path, const ThroughputMatrix& matrix) {
  static constexpr std::string_view kRequired[] = {"job"};
  const csv::Table table = csv::parse(csv::read_file(path), path, kRequired);
  for (const std::string& name : table.header)
    if (name != "job" && name != "weight" && name != "steps" && name != "elapsed_s")
      throw InputError(fmt::format("{}:{}: unknown column '{}' (job, weight, steps, elapsed_s)", path, table.header_line, name));
  const int job = table.column("job"), weight = table.column("weight"), steps = table.column("steps"),
            elapsed = table.column("elapsed_s");
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
    jobs.push_back(j);
  }
  return jobs;
}

std::vector<Job> random_jobs(const ThroughputMatrix& matrix, int count, std::uint64_t seed, const std::string& reference_gpu,
                             bool multi_gpu) {
  const int reference = matrix.gpu_index(reference_gpu);
  std::vector<int> types;
  for (int m = 0; m < matrix.num_job_types(); ++m)
    if ((multi_gpu || matrix.job_types[m].scale_factor == 1) && matrix.at(m, reference) > 0.0) types.push_back(m);
  if (types.empty()) throw InputError(fmt::format("no job type runs on {}", reference_gpu));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::size_t> pick(0, types.size() - 1);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<Job> jobs;
  for (int i = 0; i < count; ++i) {
    Job j;
    j.type = types[pick(rng)];
    const double x = unit(rng) < 0.8 ? 1.5 + 1.5 * unit(rng) : 3.0 + unit(rng);
    j.steps = std::pow(10.0, x) * 60.0 * matrix.at(j.type, reference);
    jobs.push_back(j);
  }
  return jobs;
}

std::vector<int> parse_gpu_counts(const std::string& text, const ThroughputMatrix& matrix) {
  std::vector<int> counts(static_cast<std::size_t>(matrix.num_gpu_types()), 0);
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    const auto colon = item.find(':');
    if (colon == std::string::npos) throw InputError(fmt::format("--gpus '{}': expected TYPE:COUNT,...", text));
    const int j = matrix.gpu_index(item.substr(0, colon));
    try {
      std::size_t used = 0;
      counts[static_cast<std::size_t>(j)] = std::stoi(item.substr(colon + 1), &used);
      if (used != item.size() - colon - 1 || counts[j] < 0) throw std::invalid_argument("count");
    } catch (const std::exception&) {
      throw InputError(fmt::format("--gpus '{}': '{}' is not a count of GPUs", text, item.substr(colon + 1)));
    }
  }
  return counts;
}

}  // namespace perseus::cluster
