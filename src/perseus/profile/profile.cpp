// Reading the Perseus profile CSV, and the small CSV reader it shares with the cost module.
#include "perseus/profile/profile.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "perseus/model/errors.hpp"
#include "perseus/model/limits.hpp"

namespace perseus {
namespace csv {
namespace {

constexpr std::size_t kQuoteLimit = 60;  // longest value quoted back in an error message

std::string quoted_excerpt(std::string_view value) {
  if (value.size() <= kQuoteLimit) return std::string(value);
  return std::string(value.substr(0, kQuoteLimit)) + "...";
}

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t");
  return s.substr(first, last - first + 1);
}

// The unquoted text of a field written as "..." ("" is a literal quote), or nullopt when it
// is not one well-formed quoted field.
std::optional<std::string> unquote(std::string_view field) {
  if (field.size() < 2 || field.front() != '"' || field.back() != '"') return std::nullopt;
  std::string out;
  for (std::size_t i = 1; i + 1 < field.size(); ++i) {
    if (field[i] == '"') {
      if (i + 2 < field.size() && field[i + 1] == '"') {
        out += '"';
        ++i;
        continue;
      }
      return std::nullopt;
    }
    out += field[i];
  }
  return out;
}

// Fields of one line, trimmed. A field that is one quoted string is unquoted; commas inside
// quotes are not supported (no profile needs them), so such text stays as it is and is then
// reported by whichever column it lands in.
std::vector<std::string> split_fields(std::string_view line) {
  std::vector<std::string> fields;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = line.find(',', start);
    const std::string_view field =
        trim(line.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    const std::optional<std::string> unquoted = unquote(field);
    fields.push_back(unquoted ? *unquoted : std::string(field));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return fields;
}

std::string join(std::span<const std::string_view> names) {
  std::string out;
  for (std::string_view n : names) {
    if (!out.empty()) out += ',';
    out += n;
  }
  return out;
}

}  // namespace

int Table::column(std::string_view name) const {
  for (std::size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return static_cast<int>(i);
  }
  return -1;
}

std::string Table::field_error(const Row& row, int column, std::string_view expected) const {
  return source + ":" + std::to_string(row.line) + ": column '" + header[static_cast<std::size_t>(column)] +
         "': expected " + std::string(expected) + ", got '" +
         quoted_excerpt(row.fields[static_cast<std::size_t>(column)]) + "'";
}

std::string read_file(const std::filesystem::path& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) throw InputError(path.string() + ": is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string() + ": cannot open the file for reading");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw InputError(path.string() + ": error while reading the file");
  return std::move(text).str();
}

Table parse(std::string_view text, std::string source, std::span<const std::string_view> required) {
  Table table;
  table.source = std::move(source);
  const std::string wanted = join(required);
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // UTF-8 byte-order mark

  // A CSV is text: control bytes other than tab and line ends mean a binary file.
  int line_number = 1;
  for (const char ch : text) {
    const auto byte = static_cast<unsigned char>(ch);
    if (ch == '\n') ++line_number;
    if (byte < 0x20 && ch != '\n' && ch != '\r' && ch != '\t') {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", byte);
      throw InputError(table.source + ":" + std::to_string(line_number) + ": not a CSV text file (binary byte " +
                       hex + "); expected a header with the columns " + wanted);
    }
  }

  bool have_header = false;
  line_number = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (trim(line).empty()) continue;
    const std::string where = table.source + ":" + std::to_string(line_number);
    std::vector<std::string> fields = split_fields(line);

    if (!have_header) {
      have_header = true;
      table.header_line = line_number;
      table.header = std::move(fields);
      std::vector<std::string_view> missing;
      for (std::string_view name : required) {
        if (table.column(name) < 0) missing.push_back(name);
      }
      if (!missing.empty()) {
        std::string names;
        for (std::string_view m : missing) names += (names.empty() ? "column '" : ", column '") + std::string(m) + "'";
        const bool none = missing.size() == required.size();
        throw InputError(where + ": " + (none ? "not a CSV with the expected header: " : "") + "missing " + names +
                         "; the header must contain " + wanted + ", got '" + quoted_excerpt(line) + "'");
      }
      for (std::size_t i = 0; i < table.header.size(); ++i) {
        if (table.header[i].empty()) {
          throw InputError(where + ": column " + std::to_string(i + 1) + " of the header has no name, got '" +
                           quoted_excerpt(line) + "'");
        }
        for (std::size_t j = 0; j < i; ++j) {
          if (table.header[i] == table.header[j]) {
            throw InputError(where + ": column '" + table.header[i] + "' appears twice in the header");
          }
        }
      }
      continue;
    }

    if (fields.size() != table.header.size()) {
      const std::size_t n = table.header.size();
      const std::string which = fields.size() < n
                                    ? "column '" + table.header[fields.size()] + "' is missing"
                                    : "field " + std::to_string(n + 1) + " has no column in the header";
      throw InputError(where + ": expected " + std::to_string(n) + " fields as in the header, got " +
                       std::to_string(fields.size()) + " (" + which + ")");
    }
    table.rows.push_back({line_number, std::move(fields)});
  }
  if (!have_header) {
    throw InputError(table.source + ":1: empty file; expected a CSV header line with the columns " + wanted);
  }
  return table;
}

long long parse_integer(const Table& table, const Row& row, int column, long long min_value,
                        long long max_value, std::string_view expected) {
  const std::string& text = row.fields[static_cast<std::size_t>(column)];
  long long value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || value < min_value ||
      value > max_value) {
    throw InputError(table.field_error(row, column, expected));
  }
  return value;
}

double parse_finite(const Table& table, const Row& row, int column) {
  const std::string& text = row.fields[static_cast<std::size_t>(column)];
  double value = 0.0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    // from_chars reports out-of-range magnitudes (1e999) as errors: name them as such.
    const bool overflow = error == std::errc::result_out_of_range;
    throw InputError(table.field_error(row, column, overflow ? "a finite number" : "a number"));
  }
  if (!std::isfinite(value)) throw InputError(table.field_error(row, column, "a finite number (not NaN or infinity)"));
  return value;
}

}  // namespace csv

namespace {

constexpr std::array<std::string_view, 5> kRequiredColumns = {"stage", "instruction", "frequency", "time", "energy"};
constexpr std::array<std::string_view, 4> kRankColumns = {"rank", "dp_rank", "pp_rank", "tp_rank"};

// Rows of one (stage, instruction, knob) across ranks.
struct Group {
  Measurement measurement;  // aggregated: max time, sum of energy
  std::map<std::vector<long long>, int> ranks;  // rank tuple -> line
};

// The groups of one (stage, instruction), in the order their knobs first appear.
struct OperationGroups {
  std::vector<Group> groups;
  std::map<std::string, std::size_t> by_knob;
};

std::string describe_ranks(const std::map<std::vector<long long>, int>& ranks) {
  std::string out;
  for (const auto& [tuple, line] : ranks) {
    out += out.empty() ? "(" : ", (";
    for (std::size_t i = 0; i < tuple.size(); ++i) out += (i ? "," : "") + std::to_string(tuple[i]);
    out += ")";
  }
  return out.empty() ? "none" : out;
}

bool same_ranks(const std::map<std::vector<long long>, int>& a, const std::map<std::vector<long long>, int>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const auto& x, const auto& y) { return x.first == y.first; });
}

}  // namespace

Profile Profile::read_csv(const std::filesystem::path& path) {
  return parse_csv(csv::read_file(path), path.string());
}

Profile Profile::parse_csv(std::string_view text, std::string source_name) {
  const csv::Table table = csv::parse(text, std::move(source_name), kRequiredColumns);
  const int stage_col = table.column("stage");
  const int instruction_col = table.column("instruction");
  const int frequency_col = table.column("frequency");
  const int time_col = table.column("time");
  const int energy_col = table.column("energy");
  std::vector<int> rank_cols;
  std::vector<int> knob_cols;
  for (std::size_t i = 0; i < table.header.size(); ++i) {
    const std::string& name = table.header[i];
    if (std::find(kRankColumns.begin(), kRankColumns.end(), name) != kRankColumns.end()) {
      rank_cols.push_back(static_cast<int>(i));
    } else if (std::find(kRequiredColumns.begin(), kRequiredColumns.end(), name) == kRequiredColumns.end()) {
      knob_cols.push_back(static_cast<int>(i));
    }
  }

  if (static_cast<std::int64_t>(table.rows.size()) > limits::kMaxProfileRows) {
    throw InputError(fmt::format("{}: {} rows, more than the {} a profile may have", table.source, table.rows.size(),
                                 limits::kMaxProfileRows));
  }
  static const std::string stage_expected =
      fmt::format("a stage index 0..{} (perseus plans at most {} stages)", limits::kMaxStages - 1, limits::kMaxStages);
  static const std::string frequency_expected =
      fmt::format("a positive integer frequency in MHz, at most {}", limits::kMaxFrequencyMhz);
  static const std::string time_expected =
      fmt::format("a time in seconds from {:g} to {:g}", limits::kMinTimeS, limits::kMaxTimeS);
  static const std::string energy_expected =
      fmt::format("an energy in Joules up to {:g}, positive for forward, backward and recompute", limits::kMaxEnergyJ);
  std::map<std::pair<int, InstructionKind>, OperationGroups> operations;
  for (const csv::Row& row : table.rows) {
    const auto stage =
        static_cast<int>(csv::parse_integer(table, row, stage_col, 0, limits::kMaxStages - 1, stage_expected));
    const std::optional<InstructionKind> kind = parse_instruction_kind(row.fields[instruction_col]);
    if (!kind) {
      throw InputError(table.field_error(row, instruction_col,
                                         "one of forward, backward, recompute, load, communication"));
    }
    const auto frequency = static_cast<int>(
        csv::parse_integer(table, row, frequency_col, 1, limits::kMaxFrequencyMhz, frequency_expected));
    const double time = csv::parse_finite(table, row, time_col);
    if (!(time >= limits::kMinTimeS && time <= limits::kMaxTimeS)) {
      throw InputError(table.field_error(row, time_col, time_expected));
    }
    const double energy = csv::parse_finite(table, row, energy_col);
    // Computation draws power; a load or a transfer measured as costing nothing may.
    const bool computes = *kind == InstructionKind::kForward || *kind == InstructionKind::kBackward ||
                          *kind == InstructionKind::kRecompute;
    if (energy < 0.0 || (computes && energy == 0.0) || energy > limits::kMaxEnergyJ) {
      throw InputError(table.field_error(row, energy_col, energy_expected));
    }

    std::string knob = std::to_string(frequency);
    for (int c : knob_cols) knob += "|" + table.header[c] + "=" + row.fields[c];
    std::vector<long long> rank;
    for (int c : rank_cols) {
      rank.push_back(csv::parse_integer(table, row, c, 0, std::numeric_limits<int>::max(),
                                        "a non-negative integer rank"));
    }

    OperationGroups& op = operations[{stage, *kind}];
    const auto [slot, is_new] = op.by_knob.emplace(knob, op.groups.size());
    if (is_new) {
      Group group;
      group.measurement = {std::move(knob), frequency, time, energy, row.line};
      group.ranks.emplace(std::move(rank), row.line);
      op.groups.push_back(std::move(group));
      continue;
    }
    Group& group = op.groups[slot->second];
    if (auto [previous, inserted] = group.ranks.emplace(std::move(rank), row.line); !inserted) {
      const int column = rank_cols.empty() ? frequency_col : rank_cols.front();
      throw InputError(table.source + ":" + std::to_string(row.line) + ": column '" + table.header[column] +
                       "': duplicate row for stage " + std::to_string(stage) + ", " +
                       std::string(to_string(*kind)) + (knob_cols.empty() ? " at frequency " : " with knob ") +
                       knob + (rank_cols.empty() ? "" : " on the same rank") + " (first on line " +
                       std::to_string(previous->second) + ")");
    }
    group.measurement.time_s = std::max(group.measurement.time_s, time);
    group.measurement.energy_j += energy;
  }

  std::vector<OperationProfile> result;
  for (auto& [key, op_groups] : operations) {
    OperationProfile op{key.first, key.second, {}};
    // Aggregating over ranks only makes sense when every knob was measured on the same ranks.
    const Group& first = op_groups.groups.front();
    for (Group& group : op_groups.groups) {
      if (!rank_cols.empty() && !same_ranks(group.ranks, first.ranks)) {
        throw InputError(table.source + ":" + std::to_string(group.measurement.line) + ": column '" +
                         table.header[rank_cols.front()] + "': stage " + std::to_string(key.first) + ", " +
                         std::string(to_string(key.second)) + " knob " + group.measurement.knob +
                         " was measured on ranks " + describe_ranks(group.ranks) + " but knob " +
                         first.measurement.knob + " on ranks " + describe_ranks(first.ranks) +
                         "; every knob needs rows from the same ranks");
      }
    }
    for (Group& group : op_groups.groups) op.measurements.push_back(std::move(group.measurement));
    result.push_back(std::move(op));
  }
  if (result.empty()) {
    throw InputError(table.source + ":" + std::to_string(table.header_line) +
                     ": the profile has a header but no rows; expected rows of stage,instruction,frequency,time,energy");
  }
  return from_operations(table.source, std::move(result));
}

const OperationProfile* Profile::find(int stage, InstructionKind kind) const {
  const auto it = std::lower_bound(operations_.begin(), operations_.end(), std::pair(stage, kind),
                                   [](const OperationProfile& op, const std::pair<int, InstructionKind>& key) {
                                     return std::pair(op.stage, op.kind) < key;
                                   });
  if (it == operations_.end() || it->stage != stage || it->kind != kind) return nullptr;
  return &*it;
}

void Profile::validate_for(int stages) const {
  if (stages < 1) {
    throw InputError(source_ + ": a schedule needs at least one stage, got " + std::to_string(stages));
  }
  for (const OperationProfile& op : operations_) {
    if (op.stage >= stages) {
      const int line = op.measurements.empty() ? 0 : op.measurements.front().line;
      throw InputError(source_ + (line > 0 ? ":" + std::to_string(line) : std::string()) +
                       ": column 'stage': the profile has rows for stage " + std::to_string(op.stage) +
                       " but the schedule has " + std::to_string(stages) + " stages (0.." +
                       std::to_string(stages - 1) + ")");
    }
  }
  for (int s = 0; s < stages; ++s) {
    for (InstructionKind kind : {InstructionKind::kForward, InstructionKind::kBackward}) {
      if (find(s, kind) == nullptr) {
        throw InputError(source_ + ": column 'instruction': stage " + std::to_string(s) + " has no '" +
                         std::string(to_string(kind)) + "' rows; every stage 0.." + std::to_string(stages - 1) +
                         " needs forward and backward rows");
      }
    }
  }
}

}  // namespace perseus
