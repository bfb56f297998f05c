// Reading measured per-knob time/energy profiles (the Perseus profile CSV).
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "perseus/model/errors.hpp"
#include "perseus/model/instruction.hpp"

namespace perseus {

// One measured option of one operation: running it with `knob` took `time_s` seconds
// and `energy_j` Joules. `knob` is an opaque label ("1410", or "1410|attention_configs=3"
// when the profile carries extra knob columns); `frequency_mhz` is its SM clock.
struct Measurement {
  std::string knob;
  int frequency_mhz = 0;
  double time_s = 0.0;
  double energy_j = 0.0;
  int line = 0;  // 1-based line in the source file, for error messages
};

// Every measured option of one (stage, instruction) pair.
struct OperationProfile {
  int stage = 0;
  InstructionKind kind = InstructionKind::kForward;
  std::vector<Measurement> measurements;  // in file order
};

// A whole profile. Rows of several ranks of the same stage (rank columns present) are
// aggregated as the maximum time and the sum of energy, as the server does.
//
// CSV columns: `stage,instruction,frequency,time,energy` in any order. Rank columns
// (`rank,dp_rank,pp_rank,tp_rank`) identify the rank a row was measured on; every other
// extra column is a knob, so the knob label becomes "<frequency>|<column>=<value>|...".
class Profile {
 public:
  // Throws InputError naming file, line, field and what was expected.
  static Profile read_csv(const std::filesystem::path& path);
  static Profile parse_csv(std::string_view text, std::string source_name);
  // A profile from already-validated operations (synthetic or transformed profiles).
  static Profile from_operations(std::string source_name, std::vector<OperationProfile> operations);

  const std::string& source() const { return source_; }
  int num_stages() const { return num_stages_; }
  // Sorted by (stage, kind).
  const std::vector<OperationProfile>& operations() const { return operations_; }
  // nullptr when the profile has no rows for that pair.
  const OperationProfile* find(int stage, InstructionKind kind) const;

  // Throws InputError if any stage in [0, stages) lacks forward or backward rows,
  // or the profile has stages >= `stages`.
  void validate_for(int stages) const;

 private:
  std::string source_;
  int num_stages_ = 0;
  std::vector<OperationProfile> operations_;
};

// Minimal CSV reading shared by the profile and the cost-coefficient readers, so that both
// report bad input alike: InputError "<source>:<line>: column '<name>': expected ..., got '...'".
namespace csv {

struct Row {
  int line = 0;                     // 1-based line in the source
  std::vector<std::string> fields;  // trimmed and unquoted, one per header column
};

struct Table {
  std::string source;
  int header_line = 0;
  std::vector<std::string> header;
  std::vector<Row> rows;

  // Index of the header column `name`, or -1 when absent.
  int column(std::string_view name) const;
  // "<source>:<line>: column '<name>': expected <expected>, got '<value>'".
  std::string field_error(const Row& row, int column, std::string_view expected) const;
};

// The whole file as text; InputError naming the file when it cannot be read.
std::string read_file(const std::filesystem::path& path);

// Splits `text` into a header and rows. Handles CRLF, a UTF-8 byte-order mark, blank lines
// and double-quoted fields (without commas inside). InputError for an empty file, binary
// content, a header lacking any of `required`, a repeated or unnamed header column, or a row
// whose field count differs from the header's.
Table parse(std::string_view text, std::string source, std::span<const std::string_view> required);

// Field parsers (std::from_chars, the whole field must be consumed); InputError via
// Table::field_error otherwise.
long long parse_integer(const Table& table, const Row& row, int column, long long min_value,
                        long long max_value, std::string_view expected);
// Any finite number (NaN and infinities are rejected with their own message).
double parse_finite(const Table& table, const Row& row, int column);

}  // namespace csv

}  // namespace perseus
