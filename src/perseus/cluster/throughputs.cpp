#include "perseus/cluster/throughputs.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <regex>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "perseus/model/bundled_data.hpp"
#include "perseus/profile/profile.hpp"

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

std::optional<std::pair<double, double>> ThroughputMatrix::shared_speeds(int a, int b, int gpu) const {
  const auto it = shared.find({std::min(a, b), std::max(a, b), gpu});
  if (it == shared.end()) return std::nullopt;
  return a <= b ? it->second : std::make_pair(it->second.second, it->second.first);
}

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
  if (!t.has_energy()) return;
  if (t.operating_points.size() != t.job_types.size())
    throw InputError(fmt::format("energy figures for {} job types, the matrix has {}", t.operating_points.size(), t.job_types.size()));
  for (int m = 0; m < t.num_job_types(); ++m) {
    if (t.operating_points[m].size() != t.gpu_types.size())
      throw InputError(fmt::format("job type '{}': energy figures for {} GPU types, the matrix has {}", t.job_types[m].name(),
                                   t.operating_points[m].size(), t.gpu_types.size()));
    for (int j = 0; j < t.num_gpu_types(); ++j) {
      const auto& points = t.operating_points[m][j];
      const std::string where = fmt::format("job type '{}' on {}", t.job_types[m].name(), t.gpu_types[j]);
      if (points.empty() != (t.at(m, j) == 0.0))
        throw InputError(fmt::format("{}: {} operating points for a throughput of {}", where, points.size(), t.at(m, j)));
      for (std::size_t p = 0; p < points.size(); ++p) {
        if (!(points[p].steps_per_s > 0.0) || !std::isfinite(points[p].steps_per_s) || !(points[p].joules_per_step > 0.0) ||
            !std::isfinite(points[p].joules_per_step))
          throw InputError(fmt::format("{}: operating point {} ({} steps/s, {} J/step) must be finite and > 0", where, p,
                                       points[p].steps_per_s, points[p].joules_per_step));
        if (p > 0 && points[p].steps_per_s > points[p - 1].steps_per_s)
          throw InputError(fmt::format("{}: operating points must come fastest first", where));
      }
      if (!points.empty() && points.front().steps_per_s != t.at(m, j))
        throw InputError(fmt::format("{}: the fastest operating point ({} steps/s) is not the throughput ({})", where,
                                     points.front().steps_per_s, t.at(m, j)));
    }
  }
}

namespace {

std::string bundled_file(const std::filesystem::path& relative, const std::string& what) {
  return find_bundled(relative,
                      [](const std::filesystem::path& p) {
                        std::error_code error;
                        return std::filesystem::is_regular_file(p, error);
                      },
                      what)
      .string();
}

}  // namespace

std::string bundled_gavel_throughputs() {
  return bundled_file(std::filesystem::path("data") / "gavel" / "simulation_throughputs.json",
                      "Gavel's throughput matrix (data/gavel/simulation_throughputs.json)");
}

std::string bundled_planned_throughputs() {
  return bundled_file(std::filesystem::path("data") / "cluster" / "planned_throughputs.csv",
                      "the planned throughput matrix (data/cluster/planned_throughputs.csv)");
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
  static constexpr std::string_view kColumns[] = {"job", "scale_factor", "gpu", "steps_per_s"};
  const csv::Table table = csv::parse(csv::read_file(path), path, kColumns);
  const int job = table.column("job"), scale = table.column("scale_factor"), gpu = table.column("gpu"),
            steps = table.column("steps_per_s"), joules = table.column("joules_per_step");
  ThroughputMatrix t;
  std::map<std::string, int> index;
  struct Cell {
    int job_type;
    std::string gpu;
    OperatingPoint point;
    int line;
  };
  std::vector<Cell> cells;
  for (const csv::Row& row : table.rows) {
    const JobType type{row.fields[job], static_cast<int>(csv::parse_integer(table, row, scale, 1, 1 << 20, "a scale factor >= 1"))};
    const double value = csv::parse_finite(table, row, steps);
    if (value < 0.0) throw InputError(table.field_error(row, steps, "steps per second >= 0"));
    double energy = 0.0;
    if (joules >= 0) {
      energy = csv::parse_finite(table, row, joules);
      if (!(energy > 0.0) && value > 0.0) throw InputError(table.field_error(row, joules, "joules per step > 0"));
    }
    const std::string& name = row.fields[gpu];
    if (std::find(t.gpu_types.begin(), t.gpu_types.end(), name) == t.gpu_types.end()) t.gpu_types.push_back(name);
    cells.push_back({intern(t.job_types, index, type), name, {value, energy}, row.line});
  }
  t.steps_per_s.assign(t.job_types.size(), std::vector<double>(t.gpu_types.size(), 0.0));
  std::vector<std::vector<std::vector<OperatingPoint>>> points(t.job_types.size(),
                                                               std::vector<std::vector<OperatingPoint>>(t.gpu_types.size()));
  std::map<std::pair<int, int>, int> first_line;
  for (const Cell& c : cells) {
    const int g = t.gpu_index(c.gpu);
    const auto [it, added] = first_line.emplace(std::make_pair(c.job_type, g), c.line);
    if (!added && joules < 0)
      throw InputError(fmt::format("{}:{}: {} on {} is given again (first on line {}); several rows per job and GPU type "
                                   "need a joules_per_step column",
                                   path, c.line, t.job_types[c.job_type].name(), c.gpu, it->second));
    double& fastest = t.steps_per_s[c.job_type][g];
    fastest = std::max(fastest, c.point.steps_per_s);
    if (c.point.steps_per_s > 0.0) points[c.job_type][g].push_back(c.point);
  }
  if (joules >= 0) {
    for (auto& row : points)
      for (auto& cell : row)
        std::stable_sort(cell.begin(), cell.end(), [](const OperatingPoint& a, const OperatingPoint& b) { return a.steps_per_s > b.steps_per_s; });
    t.operating_points = std::move(points);
  }
  validate(t);
  return t;
}

std::string throughput_csv(const ThroughputMatrix& t) {
  // Names are quoted (spaces, parentheses); doubles are written shortest round-trip.
  std::string out = t.has_energy() ? "job,scale_factor,gpu,steps_per_s,joules_per_step\n" : "job,scale_factor,gpu,steps_per_s\n";
  for (int m = 0; m < t.num_job_types(); ++m)
    for (int j = 0; j < t.num_gpu_types(); ++j) {
      const JobType& type = t.job_types[static_cast<std::size_t>(m)];
      if (!t.has_energy()) {
        if (t.at(m, j) > 0.0)
          out += fmt::format("\"{}\",{},{},{}\n", type.model, type.scale_factor, t.gpu_types[static_cast<std::size_t>(j)], t.at(m, j));
        continue;
      }
      for (const OperatingPoint& p : t.operating_points[m][j])
        out += fmt::format("\"{}\",{},{},{},{}\n", type.model, type.scale_factor, t.gpu_types[static_cast<std::size_t>(j)],
                           p.steps_per_s, p.joules_per_step);
    }
  return out;
}

}  // namespace perseus::cluster
