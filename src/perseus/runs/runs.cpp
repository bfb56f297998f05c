#include "perseus/runs/runs.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <tuple>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "perseus/model/errors.hpp"
#include "perseus/model/statistics.hpp"
#include "perseus/plan/output_files.hpp"
#include "perseus/protocol/protocol.hpp"

namespace perseus::runs {
namespace {

using nlohmann::json;

json read_json(const std::filesystem::path& path) {
  const std::string text = read_text_file(path);  // InputError naming the file
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    throw InputError(fmt::format("{}: malformed JSON: {}", path.string(), e.what()));
  }
}

// The measured iterations to use: all after the first (it carries warm-up), or the only one.
std::size_t first_iteration(std::size_t iterations) { return iterations > 1 ? 1 : 0; }

// Per microbatch, the median over iterations of the last `microbatches` values of `name`
// (the first iteration holds one more forward and backward than the schedule).
std::vector<double> per_microbatch(const protocol::ProfilingResult& r, const std::string& name, int per_iter,
                                   const std::filesystem::path& file) {
  for (const auto& [key, iterations] : r.time_breakdown) {
    if (key != name) continue;
    std::vector<double> out(static_cast<std::size_t>(per_iter));
    for (int m = 0; m < per_iter; ++m) {
      std::vector<double> values;
      for (std::size_t it = first_iteration(iterations.size()); it < iterations.size(); ++it) {
        const auto& list = iterations[it];
        if (list.size() < static_cast<std::size_t>(per_iter))
          throw InputError(fmt::format("{}: rank {}: time_breakdown.{}[{}] has {} values, expected {}",
                                       file.string(), r.rank, name, it, list.size(), per_iter));
        values.push_back(list[list.size() - static_cast<std::size_t>(per_iter) + static_cast<std::size_t>(m)]);
      }
      out[static_cast<std::size_t>(m)] = median(values);
    }
    return out;
  }
  throw InputError(fmt::format("{}: rank {}: time_breakdown has no \"{}\"", file.string(), r.rank, name));
}

Run read_run(const std::filesystem::path& dir, int id, int& stages, int& microbatches) {
  const auto sched_path = dir / fmt::format("{}.sched.json", id);
  const auto prof_path = dir / fmt::format("{}.prof.json", id);
  const json sched = read_json(sched_path);
  const json prof = read_json(prof_path);
  if (!sched.is_array() || sched.empty())
    throw InputError(fmt::format("{}: expected a non-empty array of ranks", sched_path.string()));
  if (!prof.is_array() || prof.size() != sched.size())
    throw InputError(fmt::format("{}: expected an array of {} ranks (as {}), found {}", prof_path.string(),
                                 sched.size(), sched_path.filename().string(),
                                 prof.is_array() ? std::to_string(prof.size()) : std::string(prof.type_name())));
  const int ranks = static_cast<int>(sched.size());
  if (stages == 0) stages = ranks;
  if (ranks != stages)
    throw InputError(fmt::format("{}: {} ranks, but earlier runs have {}", sched_path.string(), ranks, stages));

  Run run;
  run.id = id;
  run.ranks.resize(static_cast<std::size_t>(ranks));
  std::vector<bool> seen(static_cast<std::size_t>(ranks), false);
  for (std::size_t i = 0; i < prof.size(); ++i) {
    protocol::ProfilingResult r;
    try {
      r = protocol::parse_profiling_result(prof[i]);
    } catch (const std::exception& e) {
      throw InputError(fmt::format("{}: [{}]: {}", prof_path.string(), i, e.what()));
    }
    if (r.rank < 0 || r.rank >= ranks || seen[static_cast<std::size_t>(r.rank)])
      throw InputError(fmt::format("{}: [{}].rank: {} is out of range or repeated ({} ranks)", prof_path.string(), i,
                                   r.rank, ranks));
    seen[static_cast<std::size_t>(r.rank)] = true;
    if (r.iter_time.empty() || r.iter_energy.size() != r.iter_time.size())
      throw InputError(fmt::format("{}: rank {}: iter_time has {} value(s) and iter_energy {}; expected as many, at least one",
                                   prof_path.string(), r.rank, r.iter_time.size(), r.iter_energy.size()));
    RankRun& rr = run.ranks[static_cast<std::size_t>(r.rank)];
    rr.rank = r.rank;
    rr.iterations = static_cast<int>(r.iter_time.size());
    const std::size_t from = first_iteration(r.iter_time.size());
    rr.iter_time_s = median({r.iter_time.begin() + static_cast<std::ptrdiff_t>(from), r.iter_time.end()});
    rr.iter_energy_j = median({r.iter_energy.begin() + static_cast<std::ptrdiff_t>(from), r.iter_energy.end()});

    // The microbatch count: the backwards of the last measured iteration.
    int m = 0;
    for (const auto& [key, its] : r.time_breakdown)
      if (key == "backward" && !its.empty()) m = static_cast<int>(its.back().size());
    if (m <= 0) throw InputError(fmt::format("{}: rank {}: time_breakdown.backward is missing or empty", prof_path.string(), r.rank));
    if (microbatches == 0) microbatches = m;
    if (m != microbatches)
      throw InputError(fmt::format("{}: rank {}: time_breakdown.backward has {} microbatches, other ranks and runs {}",
                                   prof_path.string(), r.rank, m, microbatches));
    rr.forward_s = per_microbatch(r, "forward", m, prof_path);
    rr.backward_s = per_microbatch(r, "backward", m, prof_path);
    // Loads: whatever the rank did (none in the middle, one per microbatch on the first stage,
    // two on the last), summed per iteration.
    for (const auto& [key, its] : r.time_breakdown) {
      if (key != "load") continue;
      std::vector<double> sums;
      for (std::size_t it = first_iteration(its.size()); it < its.size(); ++it) {
        double s = 0.0;
        for (double v : its[it]) s += v;
        sums.push_back(s);
      }
      rr.load_s = median(sums);
    }
  }

  for (std::size_t i = 0; i < sched.size(); ++i) {
    const json& entry = sched[i];
    const auto field = [&](const char* name) -> const json& {
      if (!entry.is_object() || !entry.contains(name))
        throw InputError(fmt::format("{}: [{}].{} is missing", sched_path.string(), i, name));
      return entry.at(name);
    };
    const json& rank_json = field("rank");
    if (!rank_json.is_number_integer() || rank_json.get<int>() < 0 || rank_json.get<int>() >= ranks)
      throw InputError(fmt::format("{}: [{}].rank: expected an integer in [0, {})", sched_path.string(), i, ranks));
    const int rank = rank_json.get<int>();
    const json& states = field("power_states");
    if (!states.is_array())
      throw InputError(fmt::format("{}: [{}].power_states: expected an array of clocks (MHz)", sched_path.string(), i));
    std::vector<int> ps;
    for (std::size_t k = 0; k < states.size(); ++k) {
      if (!states[k].is_number_integer() || states[k].get<int>() <= 0)
        throw InputError(fmt::format("{}: rank {}: power_states[{}]: expected a positive clock (MHz)",
                                     sched_path.string(), rank, k));
      ps.push_back(states[k].get<int>());
    }
    const int instructions = 2 * microbatches;
    if (static_cast<int>(ps.size()) < 2 * instructions)
      throw InputError(fmt::format("{}: rank {}: power_states has {} entries; {} microbatches need at least {}",
                                   sched_path.string(), rank, ps.size(), microbatches, 2 * instructions));
    RankRun& rr = run.ranks[static_cast<std::size_t>(rank)];
    if (rr.power_states != 0)
      throw InputError(fmt::format("{}: [{}].rank: rank {} appears twice", sched_path.string(), i, rank));
    rr.power_states = ps.size();
    rr.states = std::move(ps);
  }
  return run;
}

// Merak's schedule gives each forward and backward two entries (sends and receives merged into
// them) plus a few entries around them (4 to 8 per rank here) whose place depends on the rank
// and the workload. Instruction k's clock is entry 2k + offset; the offset of each rank is
// the one under which the measured durations agree best with the clocks over all runs (the
// least squared spread of each (kind, clock)'s durations around their mean).
void assign_clocks(RunTable& table) {
  const int instructions = 2 * table.microbatches;
  for (int s = 0; s < table.stages; ++s) {
    const auto order = one_f_one_b(s, table.stages, table.microbatches);
    std::size_t max_offset = std::numeric_limits<std::size_t>::max();
    for (const Run& run : table.runs)
      max_offset = std::min(max_offset, run.ranks[s].states.size() - 2 * static_cast<std::size_t>(instructions));
    int best = static_cast<int>(max_offset / 2);
    double best_spread = std::numeric_limits<double>::infinity();
    for (int offset = 0; offset <= static_cast<int>(max_offset); ++offset) {
      std::map<std::tuple<bool, int, bool>, std::pair<double, std::vector<double>>> groups;
      for (const Run& run : table.runs) {
        const RankRun& rr = run.ranks[s];
        for (std::size_t k = 0; k < order.size(); ++k) {
          const Step& st = order[k];
          const bool edge = st.microbatch == 0 || st.microbatch == table.microbatches - 1;
          const double t = (st.forward ? rr.forward_s : rr.backward_s)[static_cast<std::size_t>(st.microbatch)];
          auto& g = groups[{st.forward, rr.states[2 * k + static_cast<std::size_t>(offset)], edge}];
          g.first += t;
          g.second.push_back(t);
        }
      }
      double spread = 0.0;
      for (const auto& [key, g] : groups) {
        const double mean = g.first / static_cast<double>(g.second.size());
        for (double t : g.second) spread += (t - mean) * (t - mean);
      }
      if (spread < best_spread * (1 - 1e-9)) best_spread = spread, best = offset;
    }
    for (Run& run : table.runs) {
      RankRun& rr = run.ranks[s];
      rr.clock_offset = best;
      rr.clocks.clear();
      for (int k = 0; k < instructions; ++k) rr.clocks.push_back(rr.states[static_cast<std::size_t>(2 * k + best)]);
    }
  }
}

}  // namespace

std::vector<Step> one_f_one_b(int stage, int stages, int microbatches) {
  std::vector<Step> order;
  const int warmup = std::min(stages - stage - 1, microbatches);
  int f = 0, b = 0;
  for (; f < warmup; ++f) order.push_back({true, f});
  while (b < microbatches) {
    if (f < microbatches) order.push_back({true, f++});
    order.push_back({false, b++});
  }
  return order;
}

double Run::iter_time_s() const {
  double t = 0.0;
  for (const auto& r : ranks) t = std::max(t, r.iter_time_s);
  return t;
}

double Run::iter_energy_j() const {
  double e = 0.0;
  for (const auto& r : ranks) e += r.iter_energy_j;
  return e;
}

bool Run::uniform_clock() const {
  for (const auto& r : ranks)
    for (int c : r.clocks)
      if (c != ranks.front().clocks.front()) return false;
  return true;
}

RunTable import_runs(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw InputError(fmt::format("{}: not a directory of measured runs", dir.string()));
  std::vector<int> ids;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    const std::string suffix = ".sched.json";
    if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    int id = -1;
    const auto [end, err] = std::from_chars(name.data(), name.data() + name.size() - suffix.size(), id);
    if (err != std::errc() || end != name.data() + name.size() - suffix.size() || id < 0) continue;
    ids.push_back(id);
  }
  if (ids.empty()) throw InputError(fmt::format("{}: no <i>.sched.json files", dir.string()));
  std::sort(ids.begin(), ids.end());
  RunTable table;
  table.dir = dir;
  for (int id : ids) table.runs.push_back(read_run(dir, id, table.stages, table.microbatches));
  assign_clocks(table);
  return table;
}

std::vector<ProfileEntry> time_profile(const RunTable& table, int exclude) {
  // (stage, forward, clock) -> one median per run
  std::map<std::tuple<int, bool, int>, std::vector<double>> samples;
  for (const Run& run : table.runs) {
    if (run.id == exclude) continue;
    for (const RankRun& rr : run.ranks) {
      std::map<std::tuple<int, bool, int>, std::vector<double>> in_run;
      const auto order = one_f_one_b(rr.rank, table.stages, table.microbatches);
      for (std::size_t k = 0; k < order.size(); ++k) {
        const Step& s = order[k];
        if (s.microbatch == 0 || s.microbatch == table.microbatches - 1) continue;
        const double t = (s.forward ? rr.forward_s : rr.backward_s)[static_cast<std::size_t>(s.microbatch)];
        in_run[{rr.rank, s.forward, rr.clocks[k]}].push_back(t);
      }
      for (auto& [key, v] : in_run) samples[key].push_back(median(v));
    }
  }
  std::vector<ProfileEntry> out;
  for (auto& [key, v] : samples) {
    const auto& [stage, forward, clock] = key;
    out.push_back({stage, forward, clock, median(v), 0.0, static_cast<int>(v.size())});
  }
  return out;
}

Profile to_profile(const std::vector<ProfileEntry>& entries, std::string source) {
  std::map<std::pair<int, bool>, OperationProfile> ops;
  for (const auto& e : entries) {
    OperationProfile& op = ops[{e.stage, !e.forward}];
    op.stage = e.stage;
    op.kind = e.forward ? InstructionKind::kForward : InstructionKind::kBackward;
    op.measurements.push_back({std::to_string(e.clock), e.clock, e.time_s, e.energy_j, 0});
  }
  std::vector<OperationProfile> list;
  for (auto& [key, op] : ops) list.push_back(std::move(op));
  return Profile::from_operations(std::move(source), std::move(list));
}

std::string profile_csv(const std::vector<ProfileEntry>& entries) {
  std::string out = "stage,instruction,frequency,time,energy\n";
  for (const auto& e : entries)
    out += fmt::format("{},{},{},{:.6f},{:.6f}\n", e.stage, e.forward ? "forward" : "backward", e.clock, e.time_s,
                       e.energy_j);
  return out;
}

}  // namespace perseus::runs
