#include "perseus/cluster/throughputs.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "perseus/model/bundled_data.hpp"

namespace perseus::cluster {

std::string JobType::name() const { return fmt::format("{} x{}", model, scale_factor); }

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "('ResNet-50 (batch size 64)', 4)" -> {"ResNet-50 (batch size 64)", 4}.
JobType parse_gavel_key(const std::string& key, const std::string& where) {
  static const std::regex pattern(R"(^\('(.+)',\s*(\d+)\)$)");
  std::smatch m;
  if (!std::regex_match(key, m, pattern))
    throw InputError(fmt::format("{}: job key '{}' is not ('<model>', <scale factor>)", where, key));
  return {m[1].str(), std::stoi(m[2].str())};
}

int intern(std::vector<JobType>& types, std::map<std::string, int>& index, const JobType& t) {
  const auto [it, added] = index.emplace(t.name(), static_cast<int>(types.size()));
  if (added) types.push_back(t);
  return it->second;
}

}  // namespace

int ThroughputMatrix::gpu_index(const std::string& name) const {
  for (int j = 0; j < num_gpu_types(); ++j)
    if (lower(gpu_types[static_cast<std::size_t>(j)]) == lower(name)) return j;
  throw InputError(fmt::format("unknown GPU type '{}': the throughputs have {}", name, fmt::join(gpu_types, ", ")));
}

int ThroughputMatrix::job_index(const std::string& name) const {
  for (int m = 0; m < num_job_types(); ++m)
    if (job_types[static_cast<std::size_t>(m)].name() == name || job_types[static_cast<std::size_t>(m)].model == name) return m;
  throw InputError(fmt::format("unknown job type '{}' (e.g. '{}')", name, job_types.empty() ? "" : job_types.front().name()));
}

void validate(const ThroughputMatrix& t) {
  if (t.gpu_types.empty() || t.job_types.empty()) throw InputError("the throughput matrix is empty");
  for (int m = 0; m < t.num_job_types(); ++m) {
    bool runs = false;
    for (int j = 0; j < t.num_gpu_types(); ++j) {
      const double v = t.at(m, j);
      if (!std::isfinite(v) || v < 0.0)
        throw InputError(fmt::format("job type '{}' on {}: throughput {} (must be zero or more)", t.job_types[m].name(),
                                     t.gpu_types[j], v));
      runs = runs || v > 0.0;
    }
    if (!runs) throw InputError(fmt::format("job type '{}' has no throughput on any GPU type", t.job_types[m].name()));
    if (t.job_types[m].scale_factor < 1)
      throw InputError(fmt::format("job type '{}': scale factor must be at least 1", t.job_types[m].name()));
  }
}

std::string bundled_gavel_throughputs() {
  return find_bundled(std::filesystem::path("data") / "gavel" / "simulation_throughputs.json",
                      [](const std::filesystem::path& p) {
                        std::error_code error;
                        return std::filesystem::is_regular_file(p, error);
                      },
                      "Gavel's throughput matrix (data/gavel/simulation_throughputs.json)")
      .string();
}

ThroughputMatrix read_gavel_throughputs(const std::string& path, bool unconsolidated) {
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("{}: cannot open", path));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: not JSON ({})", path, e.what()));
  }
  if (!j.is_object()) throw InputError(fmt::format("{}: expected an object of GPU types", path));
  ThroughputMatrix t;
  std::map<std::string, int> index;
  for (const auto& [gpu, jobs] : j.items())
    if (unconsolidated || gpu.find("_unconsolidated") == std::string::npos) t.gpu_types.push_back(gpu);
  std::sort(t.gpu_types.begin(), t.gpu_types.end());
  // Pass 1: the job types; pass 2: the throughputs.
  for (const std::string& gpu : t.gpu_types)
    for (const auto& [key, value] : j.at(gpu).items()) intern(t.job_types, index, parse_gavel_key(key, fmt::format("{}: {}", path, gpu)));
  t.steps_per_s.assign(t.job_types.size(), std::vector<double>(t.gpu_types.size(), 0.0));
  for (int g = 0; g < t.num_gpu_types(); ++g) {
    const std::string& gpu = t.gpu_types[static_cast<std::size_t>(g)];
    for (const auto& [key, value] : j.at(gpu).items()) {
      const std::string where = fmt::format("{}: {}: {}", path, gpu, key);
      const int m = index.at(parse_gavel_key(key, where).name());
      try {
        for (const auto& [other, v] : value.items()) {
          if (other == "null") {
            t.steps_per_s[m][g] = v.get<double>();
            continue;
          }
          const int o = intern(t.job_types, index, parse_gavel_key(other, where));
          if (o >= static_cast<int>(t.steps_per_s.size())) t.steps_per_s.resize(t.job_types.size(), std::vector<double>(t.gpu_types.size(), 0.0));
          const double mine = v.at(0).get<double>(), theirs = v.at(1).get<double>();
          if (m < o) t.shared[{m, o, g}] = {mine, theirs};
          else t.shared[{o, m, g}] = {theirs, mine};
        }
      } catch (const nlohmann::json::exception& e) {
        throw InputError(fmt::format("{}: expected {{\"null\": steps/s, \"<other job>\": [mine, theirs]}} ({})", where, e.what()));
      }
    }
  }
  validate(t);
  return t;
}

ThroughputMatrix read_throughput_csv(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("{}: cannot open", path));
  std::string line;
  if (!std::getline(in, line) || line.rfind("job,scale_factor,gpu,steps_per_s", 0) != 0)
    throw InputError(fmt::format("{}:1: expected the header job,scale_factor,gpu,steps_per_s", path));
  struct Row {
    JobType job;
    std::string gpu;
    double value;
  };
  std::vector<Row> rows;
  for (int number = 2; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    // The job name may hold commas: the last three fields are split from the right.
    std::vector<std::string> f;
    std::string rest = line;
    for (int k = 0; k < 2; ++k) {
      const auto comma = rest.rfind(',');
      if (comma == std::string::npos) break;
      f.insert(f.begin(), rest.substr(comma + 1));
      rest = rest.substr(0, comma);
    }
    const auto comma = rest.rfind(',');
    if (f.size() != 2 || comma == std::string::npos)
      throw InputError(fmt::format("{}:{}: expected job,scale_factor,gpu,steps_per_s", path, number));
    Row r;
    r.job.model = rest.substr(0, comma);
    try {
      std::size_t used = 0;
      r.job.scale_factor = std::stoi(rest.substr(comma + 1), &used);
      r.value = std::stod(f[1]);
    } catch (const std::exception&) {
      throw InputError(fmt::format("{}:{}: scale factor and steps_per_s must be numbers", path, number));
    }
    if (r.value < 0.0 || !std::isfinite(r.value))
      throw InputError(fmt::format("{}:{}: steps_per_s {} (must be zero or more)", path, number, r.value));
    r.gpu = f[0];
    rows.push_back(r);
  }
  ThroughputMatrix t;
  std::map<std::string, int> index;
  for (const Row& r : rows) {
    intern(t.job_types, index, r.job);
    if (std::find(t.gpu_types.begin(), t.gpu_types.end(), r.gpu) == t.gpu_types.end()) t.gpu_types.push_back(r.gpu);
  }
  t.steps_per_s.assign(t.job_types.size(), std::vector<double>(t.gpu_types.size(), 0.0));
  for (const Row& r : rows)
    t.steps_per_s[index.at(r.job.name())][static_cast<std::size_t>(t.gpu_index(r.gpu))] = r.value;
  validate(t);
  return t;
}

}  // namespace perseus::cluster
