#include "perseus/plan/plan_files.hpp"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <unistd.h>

#include "perseus/model/errors.hpp"

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
      expect('(', "'(' opening an (instruction, frequency) tuple");
      std::string name = parse_string();
      expect(',', "',' between instruction and frequency");
      const int frequency = parse_int();
      skip_space_and_comments();
      if (peek() == ',') ++pos_;  // a trailing comma inside the tuple is valid Python
      expect(')', "')' closing the tuple");
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

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string() + ": cannot open file for reading");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

PipelineFrequencies read_freqs_pipeline(const std::filesystem::path& path) {
  return parse_freqs_pipeline(read_text_file(path), path.string());
}

std::filesystem::path prepare_output_parent(const std::filesystem::path& path) {
  const std::filesystem::path parent = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  std::error_code error;
  std::filesystem::create_directories(parent, error);
  if (error || !std::filesystem::is_directory(parent)) {
    throw InputError(parent.string() + ": cannot create the output's directory" +
                     (error ? " (" + error.message() + ")" : std::string(" (a file is in the way)")));
  }
  return parent;
}

void write_file_atomically(const std::filesystem::path& path, std::string_view content) {
  const std::filesystem::path temporary =
      path.parent_path() / (".tmp-" + std::to_string(::getpid()) + "-" + path.filename().string());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError(path.string() + ": cannot open for writing");
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.close();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(temporary, ignored);
      throw InputError(path.string() + ": write failed (disk full?)");
    }
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    std::filesystem::remove(temporary, error);
    throw InputError(path.string() + ": cannot rename temporary file into place");
  }
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

namespace {

namespace fs = std::filesystem;

// Whether `inner` is `outer` or lies inside it (both made absolute, symbolic links resolved).
bool is_within(const fs::path& inner, const fs::path& outer) {
  std::error_code error;
  const fs::path a = fs::weakly_canonical(fs::absolute(inner), error);
  const fs::path b = fs::weakly_canonical(fs::absolute(outer), error);
  auto ai = a.begin();
  for (auto bi = b.begin(); bi != b.end(); ++bi, ++ai) {
    if (bi->empty()) continue;  // a trailing separator
    if (ai == a.end() || *ai != *bi) return false;
  }
  return true;
}

// Refuses an output directory path that can never be replaced safely, and an existing one that
// perseus did not write; returns whether it exists.
bool check_output_directory(const fs::path& dir, bool force, const std::vector<fs::path>& inputs) {
  if (dir.empty()) throw InputError("the output directory is an empty path: give the directory to write");
  const std::string name = dir.lexically_normal().filename().string();
  if (name == "." || name == ".." || dir.lexically_normal() == dir.root_path() ||
      is_within(fs::current_path(), dir)) {
    throw InputError(dir.string() + ": is the current directory, one above it or the root; give a new directory "
                     "for the output");
  }
  for (const fs::path& input : inputs) {
    if (!input.empty() && is_within(input, dir)) {
      throw InputError(dir.string() + ": the output would replace the input " + input.string() +
                       "; write the output elsewhere");
    }
  }
  std::error_code error;
  const fs::file_status status = fs::symlink_status(dir, error);
  if (!fs::exists(status)) return false;
  if (!force) throw InputError(dir.string() + ": exists (use --force to replace a directory perseus wrote)");
  if (fs::is_symlink(status) || !fs::is_directory(status)) {
    throw InputError(dir.string() + ": exists and is not a directory perseus wrote (a file, a link or a device): "
                     "not replaced, even with --force");
  }
  if (!fs::exists(dir / kOutputMarker)) {
    throw InputError(dir.string() + ": exists and perseus did not write it (no " + std::string(kOutputMarker) +
                     " in it): not replaced, even with --force; remove it yourself or choose another directory");
  }
  return true;
}

// A run killed mid-write (SIGKILL, a power cut) leaves its staging or retired copy beside the
// output, named with its pid: the next run writing the same output removes those of dead runs.
void remove_abandoned_copies(const fs::path& parent, const std::string& name) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(parent, error)) {
    const std::string file = entry.path().filename().string();
    for (const std::string prefix : {".perseus-tmp-", ".perseus-old-"}) {
      if (file.rfind(prefix, 0) != 0 || !file.ends_with("-" + name)) continue;
      const std::string pid_text = file.substr(prefix.size(), file.size() - prefix.size() - name.size() - 1);
      if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
      const long pid = std::stol(pid_text);
      if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) fs::remove_all(entry.path(), error);
    }
  }
}

}  // namespace

void write_directory_atomically(const fs::path& given, bool force, const std::function<void(const fs::path&)>& fill,
                                const std::vector<fs::path>& inputs) {
  // "out/" names "out": without the trailing separator, the path has a name to stage beside.
  fs::path dir = given.lexically_normal();
  if (!dir.has_filename() && dir.has_relative_path()) dir = dir.parent_path();
  const bool exists = check_output_directory(dir, force, inputs);
  const fs::path parent = prepare_output_parent(dir);
  const std::string tag = std::to_string(::getpid());
  const std::string name = dir.lexically_normal().filename().string();
  const fs::path staging = parent / (".perseus-tmp-" + tag + "-" + name);
  const fs::path retired = parent / (".perseus-old-" + tag + "-" + name);
  std::error_code ignored;
  fs::remove_all(staging, ignored);
  remove_abandoned_copies(parent, name);
  bool moved_old = false;
  try {
    fs::create_directories(staging);
    fill(staging);
    write_file_atomically(staging / kOutputMarker,
                          "This directory was written by perseus; `--force` may replace it as a whole.\n");
    // Rename, not remove then rename: the old directory stays whole until the new one is in place.
    if (exists) {
      fs::rename(dir, retired);
      moved_old = true;
    }
    fs::rename(staging, dir);
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(staging, ignored);
    if (moved_old && !fs::exists(dir)) fs::rename(retired, dir, ignored);  // put the old one back
    if (e.code() == std::errc::directory_not_empty || e.code() == std::errc::file_exists) {
      throw InputError(dir.string() + ": written by another run meanwhile; this run's output was discarded");
    }
    throw InputError(dir.string() + ": cannot write output: " + e.code().message());
  } catch (...) {
    fs::remove_all(staging, ignored);
    if (moved_old && !fs::exists(dir)) fs::rename(retired, dir, ignored);
    throw;
  }
  if (exists) fs::remove_all(retired, ignored);
}

void write_directory_atomically(const std::filesystem::path& dir, bool force,
                                const std::vector<std::pair<std::string, std::string>>& files,
                                const std::vector<std::filesystem::path>& inputs) {
  write_directory_atomically(
      dir, force,
      [&](const std::filesystem::path& staging) {
        for (const auto& [name, content] : files) {
          const std::filesystem::path path = staging / name;
          if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
          write_file_atomically(path, content);
        }
      },
      inputs);
}

void check_replaceable_file(const std::filesystem::path& path, bool force, const std::vector<std::filesystem::path>& inputs) {
  namespace fs = std::filesystem;
  if (path.empty()) throw InputError("the output file is an empty path: give the file to write");
  for (const fs::path& input : inputs) {
    if (!input.empty() && is_within(input, path)) {
      throw InputError(path.string() + ": the output would replace the input " + input.string());
    }
  }
  std::error_code error;
  const fs::file_status status = fs::symlink_status(path, error);
  if (!fs::exists(status)) return;
  if (!fs::is_regular_file(status)) {
    throw InputError(path.string() + ": exists and is not a regular file (a directory, a link or a device): "
                     "not replaced, even with --force");
  }
  if (!force) throw InputError(path.string() + ": exists (use --force to replace it)");
}

}  // namespace perseus
