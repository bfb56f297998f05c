// Plans as files: perseus's JSON plan, the `freqs_pipeline_%05d.py` lists existing Perseus
// deployments load, and a parser for the latter that reads data and never evaluates code.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "perseus/model/errors.hpp"
#include "perseus/model/frequencies.hpp"
#include "perseus/solver/problem.hpp"

namespace perseus {

// One instruction of a plan: what runs, with which knob.
struct PlannedInstruction {
  Instruction instruction;
  std::string knob;        // the option's opaque knob label
  int frequency_mhz = 0;   // the knob's SM clock
  double time_s = 0.0;     // measured time at that knob
  double energy_j = 0.0;   // measured energy at that knob
};

// A frequency plan: per stage, its instructions in execution order.
struct Plan {
  std::vector<std::vector<PlannedInstruction>> stages;
  MeasuredFigures measured;
};

Plan make_plan(const EnergyProblem& problem, const OptionChoice& choice);

// JSON schema "perseus.plan/1" (see README): {"schema", "time_s", "energy_j",
// "computation_energy_j", "blocking_energy_j", "stages": [[{"instruction", "microbatch",
// "chunk", "knob", "frequency_mhz", "time_s", "energy_j"}, ...], ...]}.
nlohmann::json plan_to_json(const Plan& plan);

// The freqs_pipeline format: one Python-literal list per stage of ('name', frequency)
// tuples, followed by `# ...` comment lines.
std::string plan_to_freqs_pipeline(const Plan& plan, const std::vector<std::string>& comments);
std::string freqs_pipeline_text(const PipelineFrequencies& frequencies, const std::vector<std::string>& comments);
// Per stage, the (instruction name, MHz) list of a plan.
PipelineFrequencies plan_frequencies(const Plan& plan);

// Parses a freqs_pipeline file as data. Throws InputError naming the source, line and
// column of anything that is not a list of lists of ('name', int) tuples (["name", int]
// pairs read alike, as Python reads them); a single flat list of pairs, one rank's schedule,
// is refused as such, saying what form a plan takes.
PipelineFrequencies parse_freqs_pipeline(std::string_view text, const std::string& source);
PipelineFrequencies read_freqs_pipeline(const std::filesystem::path& path);
// A plan file of either kind, told apart by content: a perseus.plan/1 JSON plan or a
// freqs_pipeline file. Throws InputError naming the file and what is wrong.
PipelineFrequencies read_plan_file(const std::filesystem::path& path);

}  // namespace perseus
