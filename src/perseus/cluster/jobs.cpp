#include "perseus/cluster/jobs.hpp"

#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include <fmt/format.h>

namespace perseus::cluster {

namespace {
std::vector<std::string> split(const std::string& line, char by) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  for (std::string f; std::getline(ss, f, by);) out.push_back(f);
  return out;
}
}  // namespace

std::vector<Job> read_jobs_csv(const std::string& path, const ThroughputMatrix& matrix) {
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("{}: cannot open", path));
  std::string line;
  if (!std::getline(in, line)) throw InputError(fmt::format("{}: empty", path));
  const std::vector<std::string> header = split(line, ',');
  int job = -1, weight = -1, steps = -1, elapsed = -1;
  for (int i = 0; i < static_cast<int>(header.size()); ++i) {
    if (header[i] == "job") job = i;
    else if (header[i] == "weight") weight = i;
    else if (header[i] == "steps") steps = i;
    else if (header[i] == "elapsed_s") elapsed = i;
    else throw InputError(fmt::format("{}:1: unknown column '{}' (job, weight, steps, elapsed_s)", path, header[i]));
  }
  if (job < 0) throw InputError(fmt::format("{}:1: no 'job' column", path));
  std::vector<Job> jobs;
  for (int number = 2; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    const std::vector<std::string> f = split(line, ',');
    if (f.size() != header.size()) throw InputError(fmt::format("{}:{}: {} fields, the header has {}", path, number, f.size(), header.size()));
    Job j;
    try {
      j.type = matrix.job_index(f[job]);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}:{}: {}", path, number, e.what()));
    }
    try {
      if (weight >= 0) j.weight = std::stod(f[weight]);
      if (steps >= 0) j.steps = std::stod(f[steps]);
      if (elapsed >= 0) j.elapsed_s = std::stod(f[elapsed]);
    } catch (const std::exception&) {
      throw InputError(fmt::format("{}:{}: weight, steps and elapsed_s must be numbers", path, number));
    }
    if (!(j.weight >= 0.0)) throw InputError(fmt::format("{}:{}: weight {} must be zero or more", path, number, j.weight));
    if (!(j.steps >= 0.0)) throw InputError(fmt::format("{}:{}: steps {} must be zero or more", path, number, j.steps));
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
  for (const std::string& item : split(text, ',')) {
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
