#include "perseus/plan/plan_files.hpp"

#include <cctype>
#include <charconv>

#include <fmt/format.h>

#include "perseus/model/errors.hpp"
#include "perseus/plan/output_files.hpp"

namespace perseus {

Plan make_plan(const EnergyProblem& problem, const OptionChoice& choice) {
  Plan plan;
  plan.stages.resize(problem.dag.num_stages());
  for (int s = 0; s < problem.dag.num_stages(); ++s) {
    for (Dag::NodeId n : problem.dag.stage_nodes(s)) {
      const Measurement& m = problem.chosen(n, choice).measurement;
      plan.stages[s].push_back({problem.dag.instruction(n), m.knob, m.frequency_mhz, m.time_s, m.energy_j});
    }
  }
  plan.measured = evaluate_measured(problem, choice);
  return plan;
}

nlohmann::json plan_to_json(const Plan& plan) {
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& stage : plan.stages) {
    nlohmann::json list = nlohmann::json::array();
    for (const PlannedInstruction& p : stage) {
      list.push_back({{"instruction", to_string(p.instruction.kind)},
                      {"microbatch", p.instruction.microbatch},
                      {"chunk", p.instruction.chunk},
                      {"knob", p.knob},
                      {"frequency_mhz", p.frequency_mhz},
                      {"time_s", p.time_s},
                      {"energy_j", p.energy_j}});
    }
    stages.push_back(std::move(list));
  }
  return {{"schema", "perseus.plan/1"},
          {"time_s", plan.measured.time_s},
          {"energy_j", plan.measured.energy_j},
          {"computation_energy_j", plan.measured.computation_energy_j},
          {"blocking_energy_j", plan.measured.blocking_energy_j},
          {"stages", std::move(stages)}};
}

std::string freqs_pipeline_text(const PipelineFrequencies& frequencies, const std::vector<std::string>& comments) {
  std::string out = "[\n";
  for (const StageFrequencies& stage : frequencies) {
    out += "[";
    for (std::size_t i = 0; i < stage.size(); ++i) {
      if (i) out += ", ";
      out += fmt::format("('{}', {})", stage[i].first, stage[i].second);
    }
    out += "],\n";
  }
  out += "]\n";
  for (const std::string& comment : comments) out += "# " + comment + "\n";
  return out;
}

PipelineFrequencies plan_frequencies(const Plan& plan) {
  PipelineFrequencies frequencies;
  for (const auto& stage : plan.stages) {
    auto& list = frequencies.emplace_back();
    list.reserve(stage.size());
    for (const PlannedInstruction& p : stage) list.emplace_back(std::string(to_string(p.instruction.kind)), p.frequency_mhz);
  }
  return frequencies;
}

std::string plan_to_freqs_pipeline(const Plan& plan, const std::vector<std::string>& comments) {
  return freqs_pipeline_text(plan_frequencies(plan), comments);
}

namespace {

// A small recursive-descent reader for the one literal shape freqs_pipeline files hold.
class FreqsParser {
 public:
  FreqsParser(std::string_view text, const std::string& source) : text_(text), source_(source) {}

  PipelineFrequencies parse() {
    PipelineFrequencies stages;
    expect('[', "'[' opening the list of stages");
    refuse_one_flat_list();
    while (true) {
      skip_space_and_comments();
      if (peek() == ']') break;
      stages.push_back(parse_stage());
      skip_space_and_comments();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != ']') fail("',' or ']' after a stage list");
    }
    ++pos_;
    skip_space_and_comments();
    if (pos_ != text_.size()) fail("only comments after the closing ']'");
    if (stages.empty()) fail("at least one stage");
    return stages;
  }

 private:
  StageFrequencies parse_stage() {
    StageFrequencies stage;
    expect('[', "'[' opening a stage's list");
    while (true) {
      skip_space_and_comments();
      if (peek() == ']') break;
      // ('forward', 1410) as the reference solver writes it, or ["forward", 1410] as zeus's
      // FrequencySchedule serialises it: Python reads both alike.
      skip_space_and_comments();
      const char close = peek() == '[' ? ']' : ')';
      expect(close == ']' ? '[' : '(', "'(' opening an (instruction, frequency) tuple");
      std::string name = parse_string();
      expect(',', "',' between instruction and frequency");
      const int frequency = parse_int();
      skip_space_and_comments();
      if (peek() == ',') ++pos_;  // a trailing comma inside the tuple is valid Python
      expect(close, close == ']' ? "']' closing the pair" : "')' closing the tuple");
      stage.emplace_back(std::move(name), frequency);
      skip_space_and_comments();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != ']') fail("',' or ']' after a tuple");
    }
    ++pos_;
    return stage;
  }

  // One list of (instruction, frequency) pairs, [("forward", 1410), ...] or [["forward", 1410],
  // ...], is one rank's schedule, not a plan: said plainly rather than as a parse error
  // deep inside it, since it is the likely mistake.
  void refuse_one_flat_list() {
    skip_space_and_comments();
    std::size_t at = pos_;
    if (at < text_.size() && (text_[at] == '(' || text_[at] == '[')) ++at;
    while (at < text_.size() && std::isspace(static_cast<unsigned char>(text_[at]))) ++at;
    const bool pair_opens = pos_ < text_.size() && at > pos_ && at < text_.size() &&
                            (text_[at] == '\'' || text_[at] == '"');
    if (!pair_opens) return;
    throw InputError(fmt::format(
        "{}: expected a plan, one list of (instruction, frequency) pairs per pipeline stage in stage order "
        "(the freqs_pipeline form: [[('forward', 1410), ('backward', 1410), ...], [('forward', 1410), ...]]), "
        "got a single list of pairs (one rank's schedule, as zeus's FrequencySchedule holds it)",
        source_));
  }

  std::string parse_string() {
    skip_space_and_comments();
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("a quoted instruction name");
    ++pos_;
    std::string value;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      const char c = text_[pos_++];
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') {
        --pos_;
        fail("an instruction name of letters, digits, '_' or '-'");
      }
      value += c;
    }
    if (pos_ >= text_.size()) fail("a closing quote");
    ++pos_;
    if (!parse_instruction_kind(value)) fail("an instruction name (forward, backward, ...)");
    return value;
  }

  int parse_int() {
    skip_space_and_comments();
    int value = 0;
    const char* begin = text_.data() + pos_;
    const auto [end, ec] = std::from_chars(begin, text_.data() + text_.size(), value);
    if (ec != std::errc() || end == begin || value <= 0) fail("a positive integer frequency in MHz");
    pos_ += static_cast<std::size_t>(end - begin);
    return value;
  }

  void expect(char c, const char* what) {
    skip_space_and_comments();
    if (peek() != c) fail(what);
    ++pos_;
  }

  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }

  void skip_space_and_comments() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (std::isspace(static_cast<unsigned char>(c))) {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  [[noreturn]] void fail(const char* expected) const {
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    std::string got = pos_ < text_.size() ? std::string(text_.substr(pos_, 12)) : "end of file";
    for (char& ch : got) {
      if (ch == '\n') ch = ' ';
    }
    throw InputError(fmt::format("{}:{}:{}: expected {}, got '{}'", source_, line, column, expected, got));
  }

  std::string_view text_;
  const std::string& source_;
  std::size_t pos_ = 0;
};

}  // namespace

PipelineFrequencies parse_freqs_pipeline(std::string_view text, const std::string& source) {
  return FreqsParser(text, source).parse();
}

PipelineFrequencies read_freqs_pipeline(const std::filesystem::path& path) {
  return parse_freqs_pipeline(read_text_file(path), path.string());
}

PipelineFrequencies read_plan_file(const std::filesystem::path& file) {
  const std::string text = read_text_file(file);
  const std::string path = file.string();
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || text[first] != '{') return parse_freqs_pipeline(text, path);
  nlohmann::json plan;
  try {
    plan = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: not valid JSON: {}", path, e.what()));
  }
  if (plan.value("schema", "") != "perseus.plan/1" || !plan.contains("stages") || !plan["stages"].is_array()) {
    throw InputError(path + ": expected a perseus.plan/1 JSON plan (\"schema\" and \"stages\")");
  }
  PipelineFrequencies frequencies;
  for (std::size_t s = 0; s < plan["stages"].size(); ++s) {
    const nlohmann::json& stage = plan["stages"][s];
    if (!stage.is_array()) throw InputError(fmt::format("{}: stage {} is not a list", path, s));
    auto& list = frequencies.emplace_back();
    for (std::size_t i = 0; i < stage.size(); ++i) {
      const nlohmann::json& entry = stage[i];
      if (!entry.is_object() || !entry.contains("instruction") || !entry["instruction"].is_string() ||
          !entry.contains("frequency_mhz") || !entry["frequency_mhz"].is_number_integer()) {
        throw InputError(fmt::format("{}: stage {}, instruction {}: expected \"instruction\" and an integer "
                                     "\"frequency_mhz\"",
                                     path, s, i));
      }
      list.emplace_back(entry["instruction"].get<std::string>(), entry["frequency_mhz"].get<int>());
    }
  }
  return frequencies;
}

}  // namespace perseus
