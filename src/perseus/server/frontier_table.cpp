#include "perseus/server/frontier_table.hpp"

#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "perseus/model/errors.hpp"
#include "perseus/solver/solve.hpp"

namespace perseus::server {
namespace {

constexpr char kMagic[4] = {'P', 'F', 'T', '1'};
constexpr std::size_t kMaxCachedPlans = 64;

template <typename T>
void append(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

template <typename T>
T take(std::string_view& in) {
  T value;
  std::memcpy(&value, in.data(), sizeof(T));
  in.remove_prefix(sizeof(T));
  return value;
}

}  // namespace

nlohmann::json inputs_to_json(const FrontierInputs& inputs) {
  return {{"profile_source", inputs.profile_source}, {"layout", to_json(inputs.layout)},
          {"stages", inputs.stages},                 {"p_blocking", inputs.p_blocking},
          {"unit_time", inputs.unit_time}};
}

FrontierInputs inputs_from_json(const nlohmann::json& object, std::string profile_csv) {
  FrontierInputs inputs;
  inputs.profile_csv = std::move(profile_csv);
  inputs.profile_source = object.at("profile_source").get<std::string>();
  inputs.layout = parse_layout(object.at("layout"), "stored layout");
  inputs.stages = object.at("stages").get<int>();
  inputs.p_blocking = object.at("p_blocking").get<double>();
  inputs.unit_time = object.at("unit_time").get<double>();
  return inputs;
}

EnergyProblem make_server_problem(const FrontierInputs& inputs, std::vector<Warning>* warnings) {
  const Profile profile = Profile::parse_csv(inputs.profile_csv, inputs.profile_source);
  const ScheduleSpec spec{inputs.layout.kind, inputs.stages, inputs.layout.microbatches, inputs.layout.chunks, false};
  return make_problem(profile, spec, OptionsConfig{inputs.unit_time, inputs.p_blocking, {}}, warnings);
}

std::shared_ptr<FrontierTable> FrontierTable::compute(EnergyProblem problem, const std::function<bool()>& cancelled,
                                                      double exact_seconds) {
  for (const OperationOptions& op : problem.operations) {
    if (op.options.size() > std::numeric_limits<std::uint16_t>::max()) {
      throw InputError(fmt::format("stage {} {}: {} options is more than the server stores per operation", op.stage,
                                   to_string(op.kind), op.options.size()));
    }
  }
  SolveRequest request;
  request.progress = [&](const SolveProgress&) {
    if (cancelled && cancelled()) throw ComputationCancelled();
  };
  request.frontier.exact_iso_seconds = exact_seconds;
  Solution solution = solve(std::move(problem), request);
  const Frontier& frontier = solution.frontier;

  std::shared_ptr<FrontierTable> table(new FrontierTable(std::move(solution.problem)));
  const std::size_t nodes = table->problem_.dag.num_nodes();
  table->choices_.reserve(frontier.points.size() * nodes);
  for (const FrontierPoint& point : frontier.points) {
    table->times_.push_back(point.measured.time_s);
    table->energies_.push_back(point.measured.energy_j);
    table->choices_.insert(table->choices_.end(), point.choice.begin(), point.choice.end());
  }
  return table;
}

std::shared_ptr<FrontierTable> FrontierTable::restore(EnergyProblem problem, std::string_view blob) {
  std::shared_ptr<FrontierTable> table(new FrontierTable(std::move(problem)));
  const std::size_t nodes = table->problem_.dag.num_nodes();
  if (blob.size() < 12 || std::memcmp(blob.data(), kMagic, 4) != 0) {
    throw InputError("stored frontier: not a frontier table (bad header)");
  }
  blob.remove_prefix(4);
  const auto points = take<std::uint32_t>(blob);
  const auto stored_nodes = take<std::uint32_t>(blob);
  if (stored_nodes != nodes) {
    throw InputError(fmt::format("stored frontier: {} nodes per plan, but the job's problem has {}", stored_nodes,
                                 nodes));
  }
  const std::size_t row = 2 * sizeof(double) + nodes * sizeof(std::uint16_t);
  if (points == 0 || blob.size() != points * row) {
    throw InputError(fmt::format("stored frontier: {} bytes do not hold {} points of {} bytes", blob.size(), points,
                                 row));
  }
  table->choices_.reserve(static_cast<std::size_t>(points) * nodes);
  for (std::uint32_t p = 0; p < points; ++p) {
    table->times_.push_back(take<double>(blob));
    table->energies_.push_back(take<double>(blob));
    for (std::size_t n = 0; n < nodes; ++n) {
      const auto option = take<std::uint16_t>(blob);
      if (option >= table->problem_.options_of(static_cast<Dag::NodeId>(n)).options.size()) {
        throw InputError(fmt::format("stored frontier: point {} node {} uses option {} of {}", p, n, option,
                                     table->problem_.options_of(static_cast<Dag::NodeId>(n)).options.size()));
      }
      table->choices_.push_back(option);
    }
  }
  for (std::size_t p = 1; p < table->times_.size(); ++p) {
    if (!(table->times_[p] >= table->times_[p - 1])) throw InputError("stored frontier: times are not ascending");
  }
  return table;
}

std::string FrontierTable::serialize_points() const {
  std::string out(kMagic, 4);
  const std::size_t nodes = problem_.dag.num_nodes();
  append(out, static_cast<std::uint32_t>(times_.size()));
  append(out, static_cast<std::uint32_t>(nodes));
  out.reserve(out.size() + times_.size() * (16 + 2 * nodes));
  for (std::size_t p = 0; p < times_.size(); ++p) {
    append(out, times_[p]);
    append(out, energies_[p]);
    out.append(reinterpret_cast<const char*>(choices_.data() + p * nodes), nodes * sizeof(std::uint16_t));
  }
  return out;
}

std::optional<std::size_t> FrontierTable::select(double deadline_s) const {
  return select_for_deadline(times_, deadline_s);
}

std::shared_ptr<const ServedPlan> FrontierTable::plan(std::size_t index) const {
  {
    std::lock_guard lock(cache_mutex_);
    if (auto it = cache_.find(index); it != cache_.end()) return it->second;
  }
  const std::size_t nodes = problem_.dag.num_nodes();
  const OptionChoice choice(choices_.begin() + static_cast<std::ptrdiff_t>(index * nodes),
                            choices_.begin() + static_cast<std::ptrdiff_t>((index + 1) * nodes));
  auto served = std::make_shared<ServedPlan>();
  served->index = index;
  const Plan plan = make_plan(problem_, choice);
  served->measured = plan.measured;

  std::vector<double> durations(nodes);
  for (std::size_t n = 0; n < nodes; ++n) {
    durations[n] = problem_.chosen(static_cast<Dag::NodeId>(n), choice).measurement.time_s;
  }
  std::vector<double> start;
  critical_path_length<double>(problem_.dag, std::span<const double>(durations), &start);

  const int stages = problem_.dag.num_stages();
  served->frequencies.resize(stages);
  served->timeline.resize(stages);
  for (int s = 0; s < stages; ++s) {
    for (Dag::NodeId n : problem_.dag.stage_nodes(s)) {
      const Instruction& instruction = problem_.dag.instruction(n);
      const int mhz = problem_.chosen(n, choice).measurement.frequency_mhz;
      served->frequencies[s].emplace_back(std::string(to_string(instruction.kind)), mhz);
      served->timeline[s].push_back(
          {instruction.kind, instruction.microbatch, instruction.chunk, mhz, start[n], start[n] + durations[n]});
    }
  }
  std::lock_guard lock(cache_mutex_);
  if (cache_.size() >= kMaxCachedPlans) cache_.clear();
  cache_.emplace(index, served);
  return served;
}

std::string profile_to_csv(const Profile& profile) {
  std::string out = "stage,instruction,frequency,time,energy\n";
  for (const OperationProfile& op : profile.operations()) {
    for (const Measurement& m : op.measurements) {
      out += fmt::format("{},{},{},{},{}\n", op.stage, to_string(op.kind), m.frequency_mhz, m.time_s, m.energy_j);
    }
  }
  return out;
}

}  // namespace perseus::server
