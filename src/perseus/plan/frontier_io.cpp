#include "perseus/plan/frontier_io.hpp"

#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <unistd.h>

#include "perseus/model/errors.hpp"
#include "perseus/plan/plan_files.hpp"

namespace perseus {
namespace fs = std::filesystem;

nlohmann::json make_summary(const EnergyProblem& problem, const CrawlResult& crawl,
                            const Frontier& frontier, const RunInfo& info) {
  const FrontierPoint& fastest = frontier.t_min_point();
  const FrontierPoint& cheapest = frontier.t_star_point();
  const double savings_j = frontier.all_max.energy_j - fastest.measured.energy_j;
  nlohmann::json reference = {{"t_star_q", crawl.t_star_q},
                              {"t_min_q", crawl.t_min_q},
                              {"steps", crawl.steps.size()},
                              {"stop_reason", crawl.stop_reason}};
  nlohmann::json t_min_bound = nullptr, t_min_gap = nullptr;
  if (frontier.t_min_lower_bound_j) {
    t_min_bound = *frontier.t_min_lower_bound_j;
    t_min_gap = fastest.measured.energy_j / *frontier.t_min_lower_bound_j - 1.0;
  }
  return {
      {"schema", "perseus.summary/1"},
      {"profile", info.profile},
      {"schedule",
       {{"kind", to_string(info.schedule.kind)},
        {"stages", info.schedule.stages},
        {"microbatches", info.schedule.microbatches},
        {"chunks", info.schedule.chunks}}},
      {"unit_time_s", problem.unit_time},
      {"p_blocking_w", problem.p_blocking},
      {"num_gpus", problem.num_gpus()},
      {"t_min_s", fastest.measured.time_s},
      {"t_star_s", cheapest.measured.time_s},
      {"energy_at_t_min_j", fastest.measured.energy_j},
      {"energy_at_t_star_j", cheapest.measured.energy_j},
      {"least_energy", {{"time_s", frontier.least_energy_point().measured.time_s},
                        {"energy_j", frontier.least_energy_point().measured.energy_j}}},
      {"all_max", {{"time_s", frontier.all_max.time_s}, {"energy_j", frontier.all_max.energy_j}}},
      {"savings_at_t_min_j", savings_j},
      {"savings_at_t_min_fraction", savings_j / frontier.all_max.energy_j},
      // No plan as fast as T_min uses less than this (the LP relaxation), so the T_min
      // plan is within t_min_gap_to_bound_fraction of the best possible.
      {"t_min_lower_bound_j", t_min_bound},
      {"t_min_gap_to_bound_fraction", t_min_gap},
      {"points", frontier.points.size()},
      {"candidates", frontier.candidates},
      {"crawl", std::move(reference)},
      {"solve_seconds", info.solve_seconds},
      {"warnings", info.warnings},
  };
}

namespace {

// Indices of the frontier points that get plan files: all, or `max_plans` spread evenly
// with both ends always included.
std::vector<char> plans_to_write(std::size_t points, std::size_t max_plans) {
  std::vector<char> keep(points, max_plans == 0 ? 1 : 0);
  if (max_plans == 0 || points == 0) return keep;
  if (max_plans == 1) {
    keep[0] = 1;
    return keep;
  }
  for (std::size_t k = 0; k < max_plans; ++k) {
    keep[static_cast<std::size_t>(std::llround(static_cast<double>(k) * (points - 1) / (max_plans - 1)))] = 1;
  }
  return keep;
}

std::string format_double(double value) { return fmt::format("{:.17g}", value); }

// Inside the staging directory: a failed write must fail the whole output, not leave a
// short file behind to be renamed into place.
void write_file(const fs::path& path, std::string_view content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  out.close();
  if (!out) throw InputError(path.string() + ": write failed (disk full?)");
}

void write_directory_contents(const fs::path& dir, const EnergyProblem& problem, const CrawlResult& crawl,
                              const Frontier& frontier, const RunInfo& info, const OutputOptions& options) {
  fs::create_directories(dir / "plans");
  const std::size_t count = frontier.points.size();
  const std::vector<char> keep = plans_to_write(count, options.max_plans);

  std::string csv = "time,energy,effective_energy,plan_file,json_file,planned_time,fitted_energy,crawl_step,lower_bound\n";
  for (std::size_t i = 0; i < count; ++i) {
    const FrontierPoint& point = frontier.points[i];
    const std::size_t number = count - 1 - i;  // larger number: faster plan
    std::string py, js;
    if (keep[i]) {
      py = fmt::format("freqs_pipeline_{:05d}.py", number);
      js = fmt::format("plans/plan_{:05d}.json", number);
      const Plan plan = make_plan(problem, point.option_choice());
      std::vector<std::string> comments = {
          fmt::format("Measured iteration time: {:.6f} s", point.measured.time_s),
          fmt::format("Measured iteration energy: {:.4f} J", point.measured.energy_j),
          fmt::format("Effective energy (above blocking): {:.4f} J", point.effective_energy_j)};
      if (point.crawl_step >= 0) {
        comments.push_back(fmt::format("Iteration {} planned time: {} units", point.crawl_step + 1, point.planned_time_q));
        comments.push_back(fmt::format("Iteration {} total cost with P2P: {:.2f}", point.crawl_step + 1, point.fitted_energy_j));
      }
      write_file(dir / py, plan_to_freqs_pipeline(plan, comments));
      write_file(dir / js, plan_to_json(plan).dump(1) + "\n");
    }
    csv += fmt::format("{},{},{},{},{},{},{},{},{}\n", format_double(point.measured.time_s),
                       format_double(point.measured.energy_j), format_double(point.effective_energy_j), py, js,
                       point.planned_time_q >= 0 ? format_double(point.planned_time_q * problem.unit_time) : "",
                       point.crawl_step >= 0 ? format_double(point.fitted_energy_j) : "",
                       point.crawl_step >= 0 ? std::to_string(point.crawl_step + 1) : "",
                       point.lower_bound_j ? format_double(*point.lower_bound_j) : "");
    if (options.progress && (i + 1) % 500 == 0) options.progress(i + 1, count);
  }
  write_file(dir / "frontier.csv", csv);

  std::string crawl_csv = "time,energy,cost_change\n";
  for (const CrawlStep& step : crawl.steps) {
    crawl_csv += fmt::format("{},{},{}\n", format_double(static_cast<double>(step.time_q) * problem.unit_time),
                             format_double(crawl.reference_energy(step, problem)), format_double(step.cost_change));
  }
  write_file(dir / "crawl.csv", crawl_csv);
  write_file(dir / "summary.json", make_summary(problem, crawl, frontier, info).dump(2) + "\n");
}

}  // namespace

void write_frontier_directory(const fs::path& dir, const EnergyProblem& problem, const CrawlResult& crawl,
                              const Frontier& frontier, const RunInfo& info, const OutputOptions& options) {
  if (frontier.points.empty()) throw SolveError("the frontier has no points");
  write_directory_atomically(dir, options.force, [&](const fs::path& staging) {
    write_directory_contents(staging, problem, crawl, frontier, info, options);
  });
}

namespace {

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> fields;
  std::string field;
  std::istringstream in(line);
  while (std::getline(in, field, ',')) fields.push_back(field);
  if (!line.empty() && line.back() == ',') fields.emplace_back();
  return fields;
}

double parse_number(const std::string& text, const std::string& where) {
  double value = 0.0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    throw InputError(where + ": expected a number, got '" + text + "'");
  }
  return value;
}

}  // namespace

FrontierIndex read_frontier_directory(const fs::path& dir) {
  FrontierIndex index;
  index.directory = dir;
  if (!fs::is_directory(dir)) throw InputError(dir.string() + ": not a frontier directory (run perseus optimize)");
  const fs::path summary_path = dir / "summary.json";
  try {
    index.summary = nlohmann::json::parse(read_text_file(summary_path));
    index.p_blocking = index.summary.at("p_blocking_w").get<double>();
    index.num_gpus = index.summary.at("num_gpus").get<int>();
  } catch (const nlohmann::json::exception& e) {
    throw InputError(summary_path.string() + ": " + e.what());
  }
  const fs::path csv_path = dir / "frontier.csv";
  std::istringstream in(read_text_file(csv_path));
  std::string line;
  std::getline(in, line);
  if (line.rfind("time,energy,effective_energy,plan_file,json_file", 0) != 0) {
    throw InputError(csv_path.string() + ":1: expected the header 'time,energy,effective_energy,plan_file,json_file,...'");
  }
  int number = 1;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    const std::string where = csv_path.string() + ":" + std::to_string(number);
    const auto fields = split_csv_line(line);
    if (fields.size() < 5) throw InputError(where + ": expected at least 5 fields");
    FrontierEntry entry{parse_number(fields[0], where + ": time"), parse_number(fields[1], where + ": energy"),
                        parse_number(fields[2], where + ": effective_energy"), fields[3], fields[4]};
    if (!index.entries.empty() && entry.time_s < index.entries.back().time_s) {
      throw InputError(where + ": times must be ascending (fastest first)");
    }
    index.entries.push_back(std::move(entry));
  }
  if (index.entries.empty()) throw InputError(csv_path.string() + ": no frontier points");
  return index;
}

std::optional<std::size_t> select_entry(const FrontierIndex& index, double deadline_s) {
  std::vector<double> times;
  std::vector<std::size_t> rows;
  for (std::size_t i = 0; i < index.entries.size(); ++i) {
    if (index.entries[i].plan_file.empty()) continue;  // thinned out: no plan to serve
    times.push_back(index.entries[i].time_s);
    rows.push_back(i);
  }
  // T* is the slowest point of the whole frontier, whether or not its plan was written.
  const auto chosen = select_for_deadline(times, std::min(deadline_s, index.entries.back().time_s));
  if (!chosen) return std::nullopt;
  return rows[*chosen];
}

}  // namespace perseus
