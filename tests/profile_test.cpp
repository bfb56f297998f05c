// The profile CSV reader: the bundled real profiles, extra columns, rank aggregation, and
// every kind of bad input (each error must name the file, the line and the column).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "perseus/model/errors.hpp"
#include "perseus/profile/profile.hpp"
#include "temp_dir.hpp"

namespace perseus {
namespace {

using testing::TempFile;

const std::string kData = PERSEUS_SOURCE_DIR "/data";
const char* const kProfiles[] = {"bloom-176b+a100-sxm", "bloom-176b+a40", "gpt3-175b+a100-sxm", "gpt3-175b+a40"};

std::string profile_path(const std::string& name) { return kData + "/profiles/" + name + ".csv"; }

// The InputError message of parsing `text` as "<name>", or "" when it parses.
std::string parse_error(const std::string& text, const std::string& name = "bad.csv") {
  try {
    Profile::parse_csv(text, name);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// Asserts that parsing fails with a message naming the file, the line and the column.
void expect_error(const std::string& text, int line, const std::string& column, const std::string& detail = "") {
  const std::string message = parse_error(text);
  SCOPED_TRACE(text);
  ASSERT_FALSE(message.empty()) << "expected an InputError";
  EXPECT_NE(message.find("bad.csv:" + std::to_string(line) + ":"), std::string::npos) << message;
  EXPECT_NE(message.find("column '" + column + "'"), std::string::npos) << message;
  if (!detail.empty()) {
    EXPECT_NE(message.find(detail), std::string::npos) << message;
  }
}

const std::string kHeader = "stage,instruction,frequency,time,energy\n";

TEST(ProfileCsv, BundledProfilesMatchAnIndependentReading) {
  for (const char* name : kProfiles) {
    SCOPED_TRACE(name);
    const Profile profile = Profile::read_csv(profile_path(name));
    EXPECT_EQ(profile.source(), profile_path(name));
    EXPECT_EQ(profile.num_stages(), 8);
    EXPECT_EQ(profile.operations().size(), 16u);
    EXPECT_NO_THROW(profile.validate_for(8));

    // Read the file naively (it has no quoting or extra columns) and compare every value.
    std::ifstream in(profile_path(name));
    std::string line;
    auto strip_cr = [&line] {
      if (!line.empty() && line.back() == '\r') line.pop_back();
    };
    std::getline(in, line);
    strip_cr();
    ASSERT_EQ(line, "stage,instruction,frequency,time,energy");
    std::map<std::pair<int, std::string>, std::size_t> seen;
    int line_number = 1;
    std::size_t rows = 0;
    while (std::getline(in, line)) {
      ++line_number;
      strip_cr();
      std::istringstream fields(line);
      std::string stage, instruction, frequency, time, energy;
      std::getline(fields, stage, ',');
      std::getline(fields, instruction, ',');
      std::getline(fields, frequency, ',');
      std::getline(fields, time, ',');
      std::getline(fields, energy, ',');
      const OperationProfile* op = profile.find(std::stoi(stage), *parse_instruction_kind(instruction));
      ASSERT_NE(op, nullptr);
      const std::size_t index = seen[{std::stoi(stage), instruction}]++;
      ASSERT_LT(index, op->measurements.size());
      const Measurement& m = op->measurements[index];  // file order within the operation
      EXPECT_EQ(m.knob, frequency);
      EXPECT_EQ(m.frequency_mhz, std::stoi(frequency));
      EXPECT_EQ(m.time_s, std::stod(time));
      EXPECT_EQ(m.energy_j, std::stod(energy));
      EXPECT_EQ(m.line, line_number);
      ++rows;
    }
    std::size_t measurements = 0;
    for (const OperationProfile& op : profile.operations()) measurements += op.measurements.size();
    EXPECT_EQ(measurements, rows);
  }
}

TEST(ProfileCsv, OperationsAreSortedAndFindable) {
  const Profile profile = Profile::read_csv(profile_path("gpt3-175b+a40"));
  const auto& ops = profile.operations();
  for (std::size_t i = 1; i < ops.size(); ++i) {
    EXPECT_LT(std::pair(ops[i - 1].stage, ops[i - 1].kind), std::pair(ops[i].stage, ops[i].kind));
  }
  for (const OperationProfile& op : ops) EXPECT_EQ(profile.find(op.stage, op.kind), &op);
  EXPECT_EQ(profile.find(8, InstructionKind::kForward), nullptr);
  EXPECT_EQ(profile.find(0, InstructionKind::kLoad), nullptr);
}

TEST(ProfileCsv, ColumnOrderLineEndingsAndBomDoNotMatter) {
  const std::string plain = kHeader +
                            "0,forward,1410,0.05,24.5\n"
                            "0,backward,1410,0.1,46\n"
                            "0,forward,1395,0.051,24\n";
  const Profile reference = Profile::parse_csv(plain, "plain.csv");
  const std::string shuffled =
      "\xEF\xBB\xBF"
      "energy , time,instruction,stage,frequency\r\n"
      "24.5,0.05,forward,0,1410\r\n"
      "\r\n"
      "46,0.1,backward,0,1410\r\n"
      "24,0.051,forward,0,1395";  // no trailing newline
  const Profile other = Profile::parse_csv(shuffled, "shuffled.csv");
  ASSERT_EQ(other.operations().size(), reference.operations().size());
  for (std::size_t i = 0; i < reference.operations().size(); ++i) {
    const auto& a = reference.operations()[i].measurements;
    const auto& b = other.operations()[i].measurements;
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t j = 0; j < a.size(); ++j) {
      EXPECT_EQ(a[j].knob, b[j].knob);
      EXPECT_EQ(a[j].time_s, b[j].time_s);
      EXPECT_EQ(a[j].energy_j, b[j].energy_j);
    }
  }
  // Line numbers count the blank line.
  EXPECT_EQ(other.find(0, InstructionKind::kBackward)->measurements[0].line, 4);
  EXPECT_EQ(other.find(0, InstructionKind::kForward)->measurements[1].line, 5);
}

TEST(ProfileCsv, InstructionKindsAndQuotedFields) {
  const Profile profile = Profile::parse_csv(kHeader +
                                                 "0,forward,1410,0.05,24\n"
                                                 "0,backward,1410,0.1,46\n"
                                                 "0,recompute,1410,0.05,24\n"
                                                 "0,load,1410,0.01,1\n"
                                                 "\"0\",\"communication\",1410,0.02,2\n",
                                             "kinds.csv");
  EXPECT_EQ(profile.operations().size(), 5u);
  for (InstructionKind kind : {InstructionKind::kForward, InstructionKind::kBackward, InstructionKind::kRecompute,
                               InstructionKind::kLoad, InstructionKind::kCommunication}) {
    EXPECT_NE(profile.find(0, kind), nullptr) << to_string(kind);
  }
}

TEST(ProfileCsv, KnobColumnsMakeDistinctOptions) {
  const Profile profile = Profile::parse_csv(
      "stage,instruction,frequency,time,energy,attention_configs,mlp_configs\n"
      "0,forward,1410,0.05,24,3,1\n"
      "0,forward,1410,0.06,20,2,1\n"
      "0,forward,1395,0.05,23,3,1\n"
      "0,backward,1410,0.1,46,3,1\n",
      "knobs.csv");
  const auto& forward = profile.find(0, InstructionKind::kForward)->measurements;
  ASSERT_EQ(forward.size(), 3u);
  EXPECT_EQ(forward[0].knob, "1410|attention_configs=3|mlp_configs=1");
  EXPECT_EQ(forward[1].knob, "1410|attention_configs=2|mlp_configs=1");
  EXPECT_EQ(forward[2].knob, "1395|attention_configs=3|mlp_configs=1");
  EXPECT_EQ(forward[1].frequency_mhz, 1410);
  EXPECT_EQ(forward[1].time_s, 0.06);
  // The same frequency and knob twice is a duplicate.
  const std::string message = parse_error(
      "stage,instruction,frequency,time,energy,attention_configs\n"
      "0,forward,1410,0.05,24,3\n"
      "0,forward,1410,0.06,20,3\n");
  EXPECT_NE(message.find("bad.csv:3:"), std::string::npos) << message;
  EXPECT_NE(message.find("1410|attention_configs=3"), std::string::npos) << message;
  EXPECT_NE(message.find("first on line 2"), std::string::npos) << message;
}

TEST(ProfileCsv, RanksOfOneStageAggregateAsMaxTimeAndSumEnergy) {
  const Profile profile = Profile::parse_csv(
      "rank,dp_rank,pp_rank,tp_rank,stage,instruction,frequency,time,energy\n"
      "0,0,0,0,0,forward,1410,0.050,24\n"
      "1,0,0,1,0,forward,1410,0.052,25\n"
      "0,0,0,0,0,forward,1395,0.051,23\n"
      "1,0,0,1,0,forward,1395,0.050,22.5\n"
      "0,0,0,0,0,backward,1410,0.1,46\n"
      "1,0,0,1,0,backward,1410,0.1,47\n"
      "2,0,1,0,1,forward,1410,0.07,30\n",
      "ranks.csv");
  const auto& forward = profile.find(0, InstructionKind::kForward)->measurements;
  ASSERT_EQ(forward.size(), 2u);
  EXPECT_EQ(forward[0].knob, "1410");  // rank columns are not knobs
  EXPECT_EQ(forward[0].time_s, 0.052);
  EXPECT_EQ(forward[0].energy_j, 24.0 + 25.0);
  EXPECT_EQ(forward[0].line, 2);
  EXPECT_EQ(forward[1].time_s, 0.051);
  EXPECT_EQ(forward[1].energy_j, 23.0 + 22.5);
  EXPECT_EQ(profile.find(0, InstructionKind::kBackward)->measurements[0].energy_j, 93.0);
  EXPECT_EQ(profile.find(1, InstructionKind::kForward)->measurements[0].energy_j, 30.0);
}

TEST(ProfileCsv, RankErrors) {
  // The same rank twice for one knob.
  expect_error(
      "rank,stage,instruction,frequency,time,energy\n"
      "0,0,forward,1410,0.05,24\n"
      "1,0,forward,1410,0.05,24\n"
      "1,0,forward,1410,0.05,24\n",
      4, "rank", "first on line 3");
  // One knob measured on fewer ranks than another cannot be summed fairly.
  expect_error(
      "stage,instruction,frequency,time,energy,tp_rank\n"
      "0,forward,1410,0.05,24,0\n"
      "0,forward,1410,0.05,24,1\n"
      "0,forward,1395,0.05,24,0\n",
      4, "tp_rank", "same ranks");
  expect_error(
      "rank,stage,instruction,frequency,time,energy\n"
      "x,0,forward,1410,0.05,24\n",
      2, "rank", "got 'x'");
}

TEST(ProfileCsv, EmptyBinaryAndHeaderlessFilesAreRejected) {
  for (const std::string& empty : {std::string(), std::string("\n\n  \r\n")}) {
    const std::string message = parse_error(empty);
    EXPECT_NE(message.find("bad.csv:1:"), std::string::npos) << message;
    EXPECT_NE(message.find("empty file"), std::string::npos) << message;
    EXPECT_NE(message.find("stage,instruction,frequency,time,energy"), std::string::npos) << message;
  }
  // A PNG: binary bytes, reported with the line they are on.
  const std::string png("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16);
  std::string message = parse_error(png);
  EXPECT_NE(message.find("bad.csv:2:"), std::string::npos) << message;
  EXPECT_NE(message.find("not a CSV text file"), std::string::npos) << message;
  EXPECT_NE(message.find("0x1a"), std::string::npos) << message;

  // Text that is not a profile CSV at all: no required column in its first line.
  expect_error("{\"stage\": 0, \"time\": 1}\n", 1, "stage", "not a CSV with the expected header");
  expect_error("hello world\n", 1, "instruction", "not a CSV with the expected header");
  // A header but no rows.
  message = parse_error(kHeader);
  EXPECT_NE(message.find("bad.csv:1:"), std::string::npos) << message;
  EXPECT_NE(message.find("no rows"), std::string::npos) << message;
}

TEST(ProfileCsv, MissingRepeatedAndUnnamedColumns) {
  expect_error("stage,instruction,frequency,time\n0,forward,1410,0.05\n", 1, "energy", "missing column");
  const std::string message = parse_error("stage,instruction,time\n0,forward,0.05\n");
  EXPECT_NE(message.find("missing column 'frequency', column 'energy'"), std::string::npos) << message;
  expect_error("stage,instruction,frequency,time,energy,time\n", 1, "time", "twice");
  // Blank lines before the header shift its line number.
  const std::string unnamed = parse_error("\nstage,instruction,frequency,time,energy,,x\n");
  EXPECT_NE(unnamed.find("bad.csv:2: column 6 of the header has no name"), std::string::npos) << unnamed;
}

TEST(ProfileCsv, WrongFieldCounts) {
  expect_error(kHeader + "0,forward,1410,0.05,24\n0,forward,1395,0.05\n", 3, "energy", "expected 5 fields");
  const std::string message = parse_error(kHeader + "0,forward,1410,0.05,24,7\n");
  EXPECT_NE(message.find("bad.csv:2:"), std::string::npos) << message;
  EXPECT_NE(message.find("got 6"), std::string::npos) << message;
  EXPECT_NE(message.find("field 6"), std::string::npos) << message;
  // Quoted fields are unquoted; a stray quote stays in the value and is reported there.
  expect_error(kHeader + "0,\"forward,1410,0.05,24\n", 2, "instruction", "got '\"forward'");
}

TEST(ProfileCsv, BadValuesNameLineColumnAndValue) {
  const std::string ok_row = "0,forward,1410,0.05,24\n";
  auto with_row = [&](const std::string& row) { return kHeader + ok_row + row; };
  // Non-numeric.
  expect_error(with_row("0,forward,1395,fast,24\n"), 3, "time", "expected a number, got 'fast'");
  expect_error(with_row("0,forward,1395,0.05,24J\n"), 3, "energy", "got '24J'");
  expect_error(with_row("0,forward,1395,0.05,\n"), 3, "energy", "got ''");
  expect_error(with_row("one,forward,1395,0.05,24\n"), 3, "stage", "got 'one'");
  // Negative, zero, NaN, infinity.
  expect_error(with_row("0,forward,1395,-0.05,24\n"), 3, "time", "from 1e-09 to 1e+06");
  expect_error(with_row("0,forward,1395,0,24\n"), 3, "time", "from 1e-09 to 1e+06");
  expect_error(with_row("0,forward,1395,0.0e0,24\n"), 3, "time", "got '0.0e0'");
  expect_error(with_row("0,forward,1395,0.05,-1\n"), 3, "energy", "up to 1e+12");
  expect_error(with_row("-1,forward,1395,0.05,24\n"), 3, "stage", "stage index 0..1023");
  // Beyond what any measurement can be: the limits are stated (model/limits.hpp).
  expect_error(with_row("0,forward,1395,1e-320,24\n"), 3, "time", "got '1e-320'");
  expect_error(with_row("0,forward,1395,2e6,24\n"), 3, "time", "to 1e+06");
  expect_error(with_row("0,forward,1395,0.05,0\n"), 3, "energy", "positive for forward");
  expect_error(with_row("0,backward,1395,0.05,0.0\n"), 3, "energy", "positive for forward");
  expect_error(with_row("0,forward,1395,0.05,1e300\n"), 3, "energy", "got '1e300'");
  EXPECT_EQ(parse_error(kHeader + ok_row + "0,backward,1410,0.1,48\n0,load,1410,0.01,0\n"), "");  // loads may cost 0 J
  expect_error(with_row("100000,forward,1395,0.05,24\n"), 3, "stage", "perseus plans at most 1024 stages");
  expect_error(with_row("0,forward,100001,0.05,24\n"), 3, "frequency", "at most 100000");
  expect_error(with_row("0,forward,1395,nan,24\n"), 3, "time", "finite");
  expect_error(with_row("0,forward,1395,0.05,inf\n"), 3, "energy", "finite");
  expect_error(with_row("0,forward,1395,0.05,-infinity\n"), 3, "energy", "finite");
  expect_error(with_row("0,forward,1395,1e999,24\n"), 3, "time", "finite");
  // Frequency must be a positive integer.
  expect_error(with_row("0,forward,1395.5,0.05,24\n"), 3, "frequency", "positive integer");
  expect_error(with_row("0,forward,0,0.05,24\n"), 3, "frequency", "positive integer");
  expect_error(with_row("0,forward,-15,0.05,24\n"), 3, "frequency", "positive integer");
  expect_error(with_row("0,forward,99999999999,0.05,24\n"), 3, "frequency", "positive integer");
  // Stage indices beyond any pipeline, fractional stages.
  expect_error(with_row("4000000000,forward,1395,0.05,24\n"), 3, "stage", "stage index");
  expect_error(with_row("1.5,forward,1395,0.05,24\n"), 3, "stage", "got '1.5'");
  // Unknown instruction.
  expect_error(with_row("0,fwd,1395,0.05,24\n"), 3, "instruction",
               "one of forward, backward, recompute, load, communication, got 'fwd'");
  expect_error(with_row("0,Forward,1395,0.05,24\n"), 3, "instruction", "got 'Forward'");
  // Duplicate (stage, instruction, frequency).
  expect_error(with_row("0,forward,1410,0.06,25\n"), 3, "frequency", "duplicate row for stage 0, forward at frequency 1410");
}

TEST(ProfileCsv, ReadCsvNamesThePathAndMissingFiles) {
  const TempFile file("bad-value.csv", kHeader + "0,forward,1410,0.05,oops\n");
  try {
    Profile::read_csv(file.path());
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(file.path().string() + ":2: column 'energy'"), std::string::npos)
        << e.what();
  }
  const std::filesystem::path missing = file.path().string() + ".does-not-exist";
  try {
    Profile::read_csv(missing);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(missing.string()), std::string::npos) << e.what();
  }
  try {
    Profile::read_csv(std::filesystem::temp_directory_path());
    FAIL() << "read a directory";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory, not a file"), std::string::npos) << e.what();
  }
  const TempFile crlf("crlf.csv", "stage,instruction,frequency,time,energy\r\n0,forward,1410,0.05,24\r\n");
  EXPECT_EQ(Profile::read_csv(crlf.path()).find(0, InstructionKind::kForward)->measurements[0].energy_j, 24.0);
}

TEST(ProfileValidate, EveryStageNeedsForwardAndBackwardAndNoExtraStages) {
  const Profile bloom = Profile::read_csv(profile_path("bloom-176b+a100-sxm"));
  EXPECT_NO_THROW(bloom.validate_for(8));
  // Stage 7 exists but the schedule has 7 stages.
  try {
    bloom.validate_for(7);
    FAIL();
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(profile_path("bloom-176b+a100-sxm") + ":"), std::string::npos) << message;
    EXPECT_NE(message.find("column 'stage'"), std::string::npos) << message;
    EXPECT_NE(message.find("stage 7"), std::string::npos) << message;
    // The line of the first stage-7 forward row.
    const int line = bloom.find(7, InstructionKind::kForward)->measurements.front().line;
    EXPECT_NE(message.find(".csv:" + std::to_string(line) + ": column 'stage'"), std::string::npos) << message;
  }
  // Stage 8 is missing.
  try {
    bloom.validate_for(9);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("stage 8 has no 'forward' rows"), std::string::npos) << e.what();
  }
  EXPECT_THROW(bloom.validate_for(0), InputError);

  const Profile no_backward = Profile::parse_csv(kHeader +
                                                     "0,forward,1410,0.05,24\n"
                                                     "0,backward,1410,0.1,46\n"
                                                     "1,forward,1410,0.05,24\n"
                                                     "1,load,1410,0.01,1\n",
                                                 "partial.csv");
  EXPECT_EQ(no_backward.num_stages(), 2);
  try {
    no_backward.validate_for(2);
    FAIL();
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("partial.csv"), std::string::npos) << message;
    EXPECT_NE(message.find("column 'instruction'"), std::string::npos) << message;
    EXPECT_NE(message.find("stage 1 has no 'backward' rows"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace perseus
