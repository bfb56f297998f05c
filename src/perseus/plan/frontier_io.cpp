#include "perseus/plan/frontier_io.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <unistd.h>

#include "perseus/model/errors.hpp"
#include "perseus/plan/output_files.hpp"
#include "perseus/plan/plan_files.hpp"
#include "perseus/profile/profile.hpp"
#include "perseus/solver/solve.hpp"

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
  // At the all-max plan's time (iso-time: a user who keeps today's iteration time), the plan
  // `select` picks there and its energy with the GPUs blocking until then.
  nlohmann::json iso_time = nullptr;
  if (const FrontierPoint* point = select_for_deadline(frontier, frontier.all_max.time_s)) {
    const double energy_j = energy_at(problem, *point, frontier.all_max.time_s);
    iso_time = {{"deadline_s", frontier.all_max.time_s},
                {"plan_time_s", point->measured.time_s},
                {"energy_j", energy_j},
                {"savings_j", frontier.all_max.energy_j - energy_j},
                {"savings_fraction", (frontier.all_max.energy_j - energy_j) / frontier.all_max.energy_j}};
  }
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
        {"chunks", info.schedule.chunks},
        {"data_load", info.schedule.data_load}}},
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
      {"iso_time", iso_time},
      // No plan as fast as T_min uses less than this (the LP relaxation, or where large DAGs
      // skip it, the crawl's supporting lines), so the T_min plan is within
      // t_min_gap_to_bound_fraction of the best possible.
      {"t_min_lower_bound_j", t_min_bound},
      {"t_min_gap_to_bound_fraction", t_min_gap},
      {"t_min_relaxation_solved", frontier.t_min_relaxation_solved},
      {"points", frontier.points.size()},
      // Every plan's distance from the least energy any plan could use at its time (a proven
      // bound, frontier.csv's lower_bound): how far the frontier is from the best possible.
      {"certification", certification_json(frontier)},
      {"candidates", frontier.candidates},
      {"crawl", std::move(reference)},
      {"solve_seconds", info.solve_seconds},
      {"warnings", info.warnings},
  };
}

nlohmann::json certification_json(const Frontier& frontier) {
  const Certificate c = certificate(frontier);
  // The exact MILP at iso-time, where it ran (optimize --exact).
  nlohmann::json exact = nullptr;
  if (frontier.exact_seconds > 0.0) {
    exact = {{"seconds", frontier.exact_seconds},
             {"improved", frontier.exact_improved},
             {"lower_bound_j", frontier.exact_lower_bound_j ? nlohmann::json(*frontier.exact_lower_bound_j) : nlohmann::json()}};
  }
  return {{"certified", frontier.certified},
          {"exact_milp_at_iso_time", exact},
          {"bounded_points", c.bounded_points},
          {"median_gap_fraction", c.bounded_points ? nlohmann::json(c.median_gap) : nlohmann::json(nullptr)},
          {"worst_gap_fraction", c.bounded_points ? nlohmann::json(c.worst_gap) : nlohmann::json(nullptr)},
          {"lp_solves", frontier.certify_solves},
          {"seconds", frontier.certify_seconds},
          {"hull_crawl_steps", frontier.hull_crawl_steps},
          {"hull_crawl_plans", frontier.hull_crawl_plans},
          {"sweep_solves", frontier.certify_sweep_solves},
          {"crawl_sweep_solves", frontier.crawl_sweep_solves},
          {"crawl_sweep_improved_points", frontier.crawl_sweep_improved},
          {"searched_points", frontier.certify_searches},
          // With --certify's seconds: the exact MILP where the gaps stayed widest.
          {"exact_milp_solves", frontier.certify_exact_solves},
          {"exact_milp_seconds", frontier.certify_exact_seconds},
          {"exact_milp_cheaper_plans", frontier.certify_exact_improved},
          {"exact_milp_raised_bounds", frontier.certify_exact_raised},
          {"default_effort_points", frontier.default_effort_points}};
}

PyFiles parse_py_files(const std::string& text, const std::string& what) {
  if (text == "some") return PyFiles::kSome;
  if (text == "all") return PyFiles::kAll;
  if (text == "none") return PyFiles::kNone;
  throw InputError(what + ": expected some, all or none, not '" + text + "'");
}

PlanStoreLayout plan_store_layout(const EnergyProblem& problem) {
  PlanStoreLayout layout;
  // FNV-1a over everything the plans depend on: a store copied from another run disagrees.
  std::uint64_t hash = 1469598103934665603ull;
  const auto mix = [&hash](const void* data, std::size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < bytes; ++i) hash = (hash ^ p[i]) * 1099511628211ull;
  };
  const auto mix_value = [&mix](const auto& value) { mix(&value, sizeof(value)); };
  mix_value(problem.unit_time);
  mix_value(problem.p_blocking);
  layout.stages.resize(static_cast<std::size_t>(problem.dag.num_stages()));
  for (int s = 0; s < problem.dag.num_stages(); ++s) {
    for (Dag::NodeId n : problem.dag.stage_nodes(s)) {
      const Instruction& instruction = problem.dag.instruction(n);
      layout.stages[static_cast<std::size_t>(s)].push_back(instruction);
      mix_value(s);
      mix_value(instruction.kind);
      mix_value(instruction.microbatch);
      mix_value(instruction.chunk);
      mix_value(problem.node_operation[n]);
    }
  }
  for (const OperationOptions& operation : problem.operations) {
    for (const Option& option : operation.options) {
      layout.clocks_mhz.push_back(option.measurement.frequency_mhz);
      mix_value(option.measurement.frequency_mhz);
      mix_value(option.measurement.time_s);
      mix_value(option.measurement.energy_j);
    }
  }
  std::sort(layout.clocks_mhz.begin(), layout.clocks_mhz.end());
  layout.clocks_mhz.erase(std::unique(layout.clocks_mhz.begin(), layout.clocks_mhz.end()), layout.clocks_mhz.end());
  layout.problem_digest = fmt::format("fnv1a64:{:016x}", hash);
  return layout;
}

namespace {

// The first comment lines of every freqs_pipeline file perseus writes.
std::vector<std::string> measured_comments(double time_s, double energy_j, double effective_energy_j) {
  return {fmt::format("Measured iteration time: {:.6f} s", time_s),
          fmt::format("Measured iteration energy: {:.4f} J", energy_j),
          fmt::format("Effective energy (above blocking): {:.4f} J", effective_energy_j)};
}

}  // namespace

std::vector<std::string> freqs_pipeline_comments(const EnergyProblem& problem, const FrontierPoint& point) {
  std::vector<std::string> comments =
      measured_comments(point.measured.time_s, point.measured.energy_j, point.effective_energy_j);
  if (point.crawl_step >= 0) {
    comments.push_back(fmt::format("Iteration {} planned time: {} units", point.crawl_step + 1, point.planned_time_q));
    comments.push_back(fmt::format("Iteration {} total cost with P2P: {:.2f}", point.crawl_step + 1, point.fitted_energy_j));
  }
  return comments;
}

std::vector<int> plan_clocks(const EnergyProblem& problem, const FrontierPoint& point) {
  std::vector<int> clocks;
  clocks.reserve(point.choice.size());
  for (int s = 0; s < problem.dag.num_stages(); ++s) {
    for (Dag::NodeId n : problem.dag.stage_nodes(s)) {
      clocks.push_back(problem.options_of(n).options[point.choice[n]].measurement.frequency_mhz);
    }
  }
  return clocks;
}

namespace {

// `count` indices spread evenly over 0..points-1, both ends included.
void spread(std::vector<char>& keep, std::size_t count) {
  const std::size_t points = keep.size();
  count = std::min(count, points);
  if (count == 0 || points == 0) return;
  if (count == 1) {
    keep[0] = 1;
    return;
  }
  for (std::size_t k = 0; k < count; ++k) {
    keep[static_cast<std::size_t>(std::llround(static_cast<double>(k) * (points - 1) / (count - 1)))] = 1;
  }
}

// Indices of the frontier points kept in the store: all, or `max_plans` spread evenly.
std::vector<char> plans_to_store(std::size_t points, std::size_t max_plans) {
  std::vector<char> keep(points, max_plans == 0 ? 1 : 0);
  spread(keep, max_plans);
  return keep;
}

// Indices of the stored points that also get a freqs_pipeline file.
std::vector<char> plans_for_py(const Frontier& frontier, const std::vector<char>& stored, const OutputOptions& options) {
  const std::size_t points = frontier.points.size();
  if (options.py == PyFiles::kAll) return stored;
  std::vector<char> keep(points, 0);
  if (options.py == PyFiles::kNone) return keep;
  keep.front() = keep.back() = 1;  // T_min and T*
  std::size_t least = 0;
  for (std::size_t i = 1; i < points; ++i) {
    if (frontier.points[i].measured.energy_j < frontier.points[least].measured.energy_j) least = i;
  }
  keep[least] = 1;
  spread(keep, std::min(points, options.py_spread));
  // Only points with a plan in the store: a thinned-out one moves to the nearest faster stored.
  for (std::size_t i = 0; i < points; ++i) {
    if (!keep[i] || stored[i]) continue;
    keep[i] = 0;
    std::size_t j = i;
    while (j > 0 && !stored[j]) --j;
    keep[j] = 1;
  }
  return keep;
}

// The shortest text that reads back as the same double (fmt's default): exact, and compact.
std::string format_double(double value) { return fmt::format("{}", value); }

// Inside the staging directory: a failed write must fail the whole output, not leave a
// short file behind to be renamed into place.
void write_file(const fs::path& path, std::string_view content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  out.close();
  if (!out) throw InputError(path.string() + ": write failed (disk full?)");
}

std::string py_file_name(std::size_t points, std::size_t row) {
  return fmt::format("freqs_pipeline_{:05d}.py", points - 1 - row);  // larger number: faster plan
}

void write_directory_contents(const fs::path& dir, const EnergyProblem& problem, const CrawlResult& crawl,
                              const Frontier& frontier, const RunInfo& info, const OutputOptions& options) {
  const std::size_t count = frontier.points.size();
  const std::vector<char> stored = plans_to_store(count, options.max_plans);
  const std::vector<char> py = plans_for_py(frontier, stored, options);
  const std::size_t store_size = static_cast<std::size_t>(std::count(stored.begin(), stored.end(), 1));
  const PlanStoreLayout layout = plan_store_layout(problem);
  PlanStoreWriter store(dir / "plans.bin", layout, store_size);

  std::string csv =
      "time,energy,effective_energy,plan,plan_file,planned_time,fitted_energy,crawl_step,lower_bound,gap\n";
  csv.reserve(count * 160);
  std::size_t record = 0;
  std::vector<std::string> py_files;
  for (std::size_t i = 0; i < count; ++i) {
    const FrontierPoint& point = frontier.points[i];
    std::string plan_column, py_name;
    if (stored[i]) {
      store.add(plan_clocks(problem, point));
      plan_column = std::to_string(record++);
    }
    if (py[i]) {
      py_name = py_file_name(count, i);
      write_file(dir / py_name, plan_to_freqs_pipeline(make_plan(problem, point.option_choice()),
                                                       freqs_pipeline_comments(problem, point)));
      py_files.push_back(py_name);
    }
    csv += fmt::format("{},{},{},{},{},{},{},{},{},{}\n", format_double(point.measured.time_s),
                       format_double(point.measured.energy_j), format_double(point.effective_energy_j), plan_column,
                       py_name, point.planned_time_q >= 0 ? format_double(point.planned_time_q * problem.unit_time) : "",
                       point.crawl_step >= 0 ? format_double(point.fitted_energy_j) : "",
                       point.crawl_step >= 0 ? std::to_string(point.crawl_step + 1) : "",
                       point.lower_bound_j ? format_double(*point.lower_bound_j) : "",
                       point.lower_bound_j ? format_double(point.measured.energy_j / *point.lower_bound_j - 1.0) : "");
    if (options.progress && (i + 1) % 2000 == 0) options.progress(i + 1, count);
  }
  store.finish();
  write_file(dir / "frontier.csv", csv);

  if (options.crawl_csv) {
    std::string crawl_csv = "time,energy,cost_change\n";
    for (const CrawlStep& step : crawl.steps) {
      crawl_csv += fmt::format("{},{},{}\n", format_double(static_cast<double>(step.time_q) * problem.unit_time),
                               format_double(crawl.reference_energy(step, problem)), format_double(step.cost_change));
    }
    write_file(dir / "crawl.csv", crawl_csv);
  }
  nlohmann::json summary = make_summary(problem, crawl, frontier, info);
  summary["plans"] = {{"store", "plans.bin"},
                      {"count", store_size},
                      {"problem_digest", layout.problem_digest},
                      {"freqs_pipeline_files", py_files}};
  write_file(dir / "summary.json", summary.dump(2) + "\n");
  for (const auto& [name, content] : options.extra_files) write_file(dir / name, content);
}

}  // namespace

void write_frontier_directory(const fs::path& dir, const EnergyProblem& problem, const CrawlResult& crawl,
                              const Frontier& frontier, const RunInfo& info, const OutputOptions& options) {
  if (frontier.points.empty()) throw SolveError("the frontier has no points");
  std::vector<fs::path> inputs = options.inputs;
  inputs.emplace_back(info.profile);
  write_directory_atomically(
      dir, options.force,
      [&](const fs::path& staging) { write_directory_contents(staging, problem, crawl, frontier, info, options); },
      inputs);
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
  // Columns by name: the store's layout (plan, plan_file) and the one before it (plan_file, json_file).
  const std::vector<std::string> header = split_csv_line(line);
  const auto column = [&header](std::string_view name) -> std::optional<std::size_t> {
    const auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end()) return std::nullopt;
    return static_cast<std::size_t>(it - header.begin());
  };
  const auto plan_column = column("plan"), py_column = column("plan_file"), json_column = column("json_file");
  const auto bound_column = column("lower_bound");
  if (header.size() < 3 || header[0] != "time" || header[1] != "energy" || header[2] != "effective_energy" ||
      !py_column || (!plan_column && !json_column)) {
    throw InputError(csv_path.string() +
                     ":1: expected the header 'time,energy,effective_energy,plan,plan_file,...' (or, before the plan "
                     "store, 'time,energy,effective_energy,plan_file,json_file,...')");
  }
  int number = 1;
  std::size_t with_plan = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    const std::string where = csv_path.string() + ":" + std::to_string(number);
    const auto fields = split_csv_line(line);
    if (fields.size() != header.size()) {
      throw InputError(fmt::format("{}: expected {} fields, found {}", where, header.size(), fields.size()));
    }
    FrontierEntry entry{parse_number(fields[0], where + ": time"), parse_number(fields[1], where + ": energy"),
                        parse_number(fields[2], where + ": effective_energy"), std::nullopt, fields[*py_column],
                        json_column ? fields[*json_column] : std::string()};
    if (bound_column && !fields[*bound_column].empty()) {
      entry.lower_bound_j = parse_number(fields[*bound_column], where + ": lower_bound");
    }
    if (plan_column && !fields[*plan_column].empty()) {
      const std::string& text = fields[*plan_column];
      std::size_t record = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), record);
      if (ec != std::errc() || end != text.data() + text.size()) {
        throw InputError(where + ": plan: expected a record number, got '" + text + "'");
      }
      if (record != with_plan) {
        throw InputError(fmt::format("{}: plan: expected record {} (records follow the rows), got {}", where,
                                     with_plan, record));
      }
      entry.plan = record;
    }
    // Plan files live in the directory: a name that leads out of it is damage, not a plan.
    for (const std::string* name : {&entry.plan_file, &entry.json_file}) {
      const fs::path relative(*name);
      const bool escapes = relative.is_absolute() || std::any_of(relative.begin(), relative.end(),
                                                                 [](const fs::path& part) { return part == ".."; });
      if (!name->empty() && escapes) {
        throw InputError(fmt::format("{}: plan file '{}' lies outside the frontier directory", where, *name));
      }
    }
    if (entry.plan || (!plan_column && !entry.plan_file.empty())) ++with_plan;
    if (!index.entries.empty() && entry.time_s < index.entries.back().time_s) {
      throw InputError(where + ": times must be ascending (fastest first)");
    }
    index.entries.push_back(std::move(entry));
  }
  if (index.entries.empty()) throw InputError(csv_path.string() + ": no frontier points");
  if (!plan_column) return index;  // written before the store: plans are files

  const fs::path store_path = dir / "plans.bin";
  std::string digest;
  std::size_t announced = 0;
  try {
    const nlohmann::json& plans = index.summary.at("plans");
    digest = plans.at("problem_digest").get<std::string>();
    announced = plans.at("count").get<std::size_t>();
  } catch (const nlohmann::json::exception& e) {
    throw InputError(summary_path.string() + ": 'plans' (the store's count and problem_digest): " + e.what());
  }
  auto store = std::make_shared<PlanStore>(store_path);
  if (store->size() != with_plan || announced != with_plan) {
    throw InputError(fmt::format("{}: holds {} plans, but frontier.csv has {} rows with a plan (summary.json says {})",
                                 store_path.string(), store->size(), with_plan, announced));
  }
  if (store->layout().problem_digest != digest) {
    throw InputError(fmt::format("{}: written for another problem (digest {}; summary.json of this directory says {}): "
                                 "a store from another run?",
                                 store_path.string(), store->layout().problem_digest, digest));
  }
  if (static_cast<int>(store->layout().stages.size()) != index.num_gpus) {
    throw InputError(fmt::format("{}: plans of {} stages, summary.json says {} GPUs", store_path.string(),
                                 store->layout().stages.size(), index.num_gpus));
  }
  index.store = std::move(store);
  return index;
}

bool FrontierIndex::has_plan(std::size_t row) const {
  const FrontierEntry& e = entries.at(row);
  return store ? e.plan.has_value() : !e.plan_file.empty();
}

std::size_t require_entry(const FrontierIndex& index, double deadline_s) {
  const auto row = select_entry(index, deadline_s);
  if (!row) {
    throw InputError(fmt::format("{}: no plan finishes within {:g} s: the fastest takes {:g} s",
                                 index.directory.string(), deadline_s, index.entries.front().time_s));
  }
  return *row;
}

std::size_t FrontierIndex::plans() const {
  std::size_t n = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) n += has_plan(i);
  return n;
}

PipelineFrequencies FrontierIndex::frequencies(std::size_t row) const {
  if (!has_plan(row)) {
    throw InputError(fmt::format("{}: frontier point {} has no plan (thinned out with --max-plans)",
                                 directory.string(), row));
  }
  const FrontierEntry& e = entries[row];
  if (store) return store->frequencies(*e.plan);
  return read_plan_file(directory / e.plan_file);
}

std::string FrontierIndex::plan_name(std::size_t row) const {
  const FrontierEntry& e = entries.at(row);
  if (store && e.plan) return fmt::format("{}, plan {}", (directory / "plans.bin").string(), *e.plan);
  return (directory / e.plan_file).string();
}

std::string export_freqs_pipeline(const FrontierIndex& index, std::size_t row) {
  const FrontierEntry& e = index.entries.at(row);
  std::vector<std::string> comments = measured_comments(e.time_s, e.energy_j, e.effective_energy_j);
  comments.push_back(fmt::format("Frontier point {} (fastest first): {}", row, index.plan_name(row)));
  return freqs_pipeline_text(index.frequencies(row), comments);
}

nlohmann::json export_plan_json(const FrontierIndex& index, std::size_t row) {
  const FrontierEntry& e = index.entries.at(row);
  if (!index.store && !e.json_file.empty()) {  // an older directory: its own JSON plan
    try {
      return nlohmann::json::parse(read_text_file(index.directory / e.json_file));
    } catch (const nlohmann::json::exception& error) {
      throw InputError(fmt::format("{}: {}", (index.directory / e.json_file).string(), error.what()));
    }
  }
  const PipelineFrequencies frequencies = index.frequencies(row);
  nlohmann::json stages = nlohmann::json::array();
  for (std::size_t s = 0; s < frequencies.size(); ++s) {
    nlohmann::json list = nlohmann::json::array();
    for (std::size_t k = 0; k < frequencies[s].size(); ++k) {
      nlohmann::json entry = {{"instruction", frequencies[s][k].first}};
      if (index.store) {
        const Instruction& instruction = index.store->layout().stages[s][k];
        entry["microbatch"] = instruction.microbatch;
        entry["chunk"] = instruction.chunk;
      }
      entry["frequency_mhz"] = frequencies[s][k].second;
      list.push_back(std::move(entry));
    }
    stages.push_back(std::move(list));
  }
  return {{"schema", "perseus.plan/1"}, {"time_s", e.time_s}, {"energy_j", e.energy_j}, {"stages", std::move(stages)}};
}

std::optional<std::size_t> select_entry(const FrontierIndex& index, double deadline_s) {
  std::vector<double> times;
  std::vector<std::size_t> rows;
  for (std::size_t i = 0; i < index.entries.size(); ++i) {
    if (!index.has_plan(i)) continue;  // thinned out: no plan to serve
    times.push_back(index.entries[i].time_s);
    rows.push_back(i);
  }
  // T* is the slowest point of the whole frontier, whether or not its plan was written.
  const auto chosen = select_for_deadline(times, std::min(deadline_s, index.entries.back().time_s));
  if (!chosen) return std::nullopt;
  return rows[*chosen];
}

EnergyProblem frontier_problem(const FrontierIndex& index, const std::filesystem::path& profile_path) {
  const std::filesystem::path summary_path = index.directory / "summary.json";
  std::filesystem::path profile = profile_path;
  SolveRequest request;
  try {
    if (profile.empty()) profile = index.summary.at("profile").get<std::string>();
    const nlohmann::json& schedule = index.summary.at("schedule");
    request.schedule = {parse_schedule_kind(schedule.at("kind").get<std::string>()), schedule.at("stages").get<int>(),
                        schedule.at("microbatches").get<int>(), schedule.value("chunks", 1),
                        schedule.value("data_load", false)};
    request.options.unit_time = index.summary.at("unit_time_s").get<double>();
    request.options.p_blocking = index.summary.at("p_blocking_w").get<double>();
  } catch (const nlohmann::json::exception& e) {
    throw InputError(summary_path.string() + ": the problem's settings (profile, schedule, unit_time_s, p_blocking_w): " +
                     e.what());
  }
  // The plans' options only: no fits (a plan needs none).
  request.options.fit_costs = false;
  if (!std::filesystem::exists(profile)) {
    throw InputError(fmt::format("{}: the profile {} the frontier was solved on is not there (give its path)",
                                 summary_path.string(), profile.string()));
  }
  ScheduleSpec resolved;
  std::vector<Warning> warnings;
  EnergyProblem problem = make_problem(Profile::read_csv(profile), request, &resolved, &warnings);
  if (index.store) {
    const std::string digest = plan_store_layout(problem).problem_digest;
    if (digest != index.store->layout().problem_digest) {
      throw InputError(fmt::format("{}: its plans are not for {} as it reads now (problem digest {}, the store's {}): "
                                   "the profile changed since, or is another one",
                                   index.directory.string(), profile.string(), digest,
                                   index.store->layout().problem_digest));
    }
  }
  return problem;
}

std::string export_freqs_pipeline(const EnergyProblem& problem, const OptionChoice& choice, const std::string& note) {
  const MeasuredFigures m = evaluate_measured(problem, choice);
  std::vector<std::string> comments =
      measured_comments(m.time_s, m.energy_j, m.energy_j - problem.p_blocking * problem.num_gpus() * m.time_s);
  comments.push_back(note);
  return plan_to_freqs_pipeline(make_plan(problem, choice), comments);
}

StoredExactSolution solve_exact_from(const FrontierIndex& index, std::size_t row, double deadline_s, double seconds,
                                     const std::filesystem::path& profile) {
  EnergyProblem problem = frontier_problem(index, profile);
  const OptionChoice start = choice_for_frequencies(problem, index.frequencies(row));
  std::optional<ExactSolution> exact = solve_exact(problem, deadline_s, {.time_limit_s = seconds, .start = start});
  if (!exact) {
    throw SolveError(fmt::format("the exact MILP found no plan within {:.6f} s ({} takes {:.6f} s)", deadline_s,
                                 index.plan_name(row), index.entries[row].time_s));
  }
  return {std::move(problem), std::move(*exact)};
}

OptionChoice choice_for_frequencies(const EnergyProblem& problem, const PipelineFrequencies& frequencies) {
  const Dag& dag = problem.dag;
  if (static_cast<int>(frequencies.size()) != dag.num_stages()) {
    throw InputError(fmt::format("the plan has {} stages, the problem {}", frequencies.size(), dag.num_stages()));
  }
  OptionChoice choice(dag.num_nodes(), 0);
  for (int s = 0; s < dag.num_stages(); ++s) {
    const auto& nodes = dag.stage_nodes(s);
    const StageFrequencies& stage = frequencies[static_cast<std::size_t>(s)];
    if (stage.size() != nodes.size()) {
      throw InputError(fmt::format("stage {}: the plan has {} instructions, the problem {}", s, stage.size(), nodes.size()));
    }
    for (std::size_t k = 0; k < nodes.size(); ++k) {
      const auto& options = problem.options_of(nodes[k]).options;
      const auto it = std::find_if(options.begin(), options.end(), [&](const Option& option) {
        return option.measurement.frequency_mhz == stage[k].second;
      });
      if (it == options.end()) {
        throw InputError(fmt::format("stage {}, instruction {} ({}): {} MHz is not one of its measured clocks", s, k,
                                     stage[k].first, stage[k].second));
      }
      choice[nodes[k]] = static_cast<std::int32_t>(it - options.begin());
    }
  }
  return choice;
}

}  // namespace perseus
