// Bounded fuzz loops, one per parser of user files: the profile CSV, freqs_pipeline and JSON
// plan files, the plan store and a frontier directory. Each starts from a valid input and
// mutates it (byte flips, insertions, deletions, truncation, repeated and swapped lines,
// extreme numbers); every mutant must parse or be refused with InputError, never crash, hang
// or throw anything else. Deterministic seeds; PERSEUS_FUZZ_ITERATIONS scales the loops
// (default 1500 per parser, a few seconds in all).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "perseus/model/errors.hpp"
#include "perseus/plan/frontier_io.hpp"
#include "perseus/plan/output_files.hpp"
#include "perseus/plan/plan_files.hpp"
#include "perseus/plan/plan_store.hpp"
#include "perseus/profile/profile.hpp"
#include "synthetic.hpp"
#include "temp_dir.hpp"

namespace perseus {
namespace {

namespace fs = std::filesystem;

int iterations() {
  const char* text = std::getenv("PERSEUS_FUZZ_ITERATIONS");
  return text ? std::max(1, std::atoi(text)) : 1500;
}

// Values that have broken parsers before: huge, tiny, negative, not numbers, separators.
const std::vector<std::string> kNasty = {"1e308", "-1e308", "1e-320", "nan", "inf", "-0", "0", "99999999999999999999",
                                         "-1", "1.5", "", "\"", "'", ",", "\n", "\r\n", "\t", "[", "]", "(", ")",
                                         "{", "}", "\xff\xfe", std::string(1, '\0'), "forward", "100000", "1e6"};

std::string mutate(std::string text, std::mt19937& rng) {
  std::uniform_int_distribution<int> kind(0, 7);
  const auto position = [&](std::size_t size) { return std::uniform_int_distribution<std::size_t>(0, size)(rng); };
  const int rounds = 1 + static_cast<int>(rng() % 3);
  for (int r = 0; r < rounds; ++r) {
    if (text.empty()) text = "x";
    switch (kind(rng)) {
      case 0: text[position(text.size() - 1)] ^= static_cast<char>(1 << (rng() % 8)); break;  // flip a bit
      case 1: text.insert(position(text.size()), kNasty[rng() % kNasty.size()]); break;
      case 2: text.erase(position(text.size() - 1), 1 + rng() % 16); break;
      case 3: text.resize(position(text.size())); break;  // truncate
      case 4: {  // repeat a line
        const std::size_t at = text.find('\n', position(text.size() - 1));
        const std::size_t start = text.rfind('\n', at == std::string::npos ? text.size() - 1 : at);
        const std::size_t from = start == std::string::npos ? 0 : start + 1;
        const std::string line = text.substr(from, at == std::string::npos ? std::string::npos : at - from + 1);
        text.insert(from, line);
        break;
      }
      case 5: {  // replace a number-looking token with a nasty value
        const std::size_t at = text.find_first_of("0123456789", position(text.size() - 1));
        if (at == std::string::npos) break;
        const std::size_t end = text.find_first_not_of("0123456789.e-+", at);
        text.replace(at, (end == std::string::npos ? text.size() : end) - at, kNasty[rng() % kNasty.size()]);
        break;
      }
      case 6: std::swap(text[position(text.size() - 1)], text[position(text.size() - 1)]); break;
      default: text += kNasty[rng() % kNasty.size()]; break;
    }
  }
  return text;
}

// Runs `parse` on `iterations()` mutants of `seed_text`; counts accepted and refused inputs.
template <typename Parse>
void fuzz(const std::string& name, const std::string& seed_text, unsigned seed, Parse parse) {
  std::mt19937 rng(seed);
  int accepted = 0, refused = 0;
  const auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations(); ++i) {
    const std::string input = mutate(seed_text, rng);
    try {
      parse(input);
      ++accepted;
    } catch (const InputError&) {
      ++refused;
    } catch (const std::exception& e) {
      ADD_FAILURE() << name << ": mutant " << i << " threw something other than InputError: " << e.what();
      return;
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_GT(refused, 0) << name << ": no mutant was refused (the mutations do not reach the parser)";
  std::printf("%s: %d mutants, %d accepted, %d refused, %.2f s\n", name.c_str(), accepted + refused, accepted,
              refused, seconds);
}

TEST(ParserFuzz, ProfileCsv) {
  const std::string text = read_text_file(fs::path(PERSEUS_SOURCE_DIR) / "data/profiles/bloom-176b+a100-sxm.csv");
  // A short seed: most mutations then land in the rows that matter.
  std::string seed = text.substr(0, text.find('\n', 2000) + 1);
  fuzz("profile CSV", seed, 1, [](const std::string& input) {
    const Profile profile = Profile::parse_csv(input, "fuzz.csv");
    if (profile.num_stages() > 0) profile.validate_for(profile.num_stages());
  });
}

TEST(ParserFuzz, FreqsPipelineAndJsonPlans) {
  const std::string freqs =
      "[\n[('forward', 1410), ('forward', 1200), ('backward', 1100)],\n[('forward', 990), ('backward', 1005)],\n]\n"
      "# Measured iteration time: 2.8 s\n";
  fuzz("freqs_pipeline", freqs, 2, [](const std::string& input) { parse_freqs_pipeline(input, "fuzz.py"); });
  testing::TempDir tmp;
  const std::string json =
      R"({"schema": "perseus.plan/1", "time_s": 2.8, "energy_j": 6012.5, "stages": [[{"instruction": "forward", )"
      R"("microbatch": 0, "chunk": 0, "frequency_mhz": 1410}, {"instruction": "backward", "frequency_mhz": 1200}]]})";
  fuzz("JSON plan", json, 3, [&](const std::string& input) {
    write_file_atomically(tmp.path() / "plan.json", input);
    read_plan_file(tmp.path() / "plan.json");
  });
}

// The store and the directory around it: plans.bin, frontier.csv and summary.json mutated.
TEST(ParserFuzz, PlanStoreAndFrontierDirectory) {
  testing::TempDir tmp;
  const EnergyProblem problem = testing::synthetic_problem({ScheduleKind::k1F1B, 3, 4, 1, false}, 10, 4);
  const CrawlResult crawl = crawl_frontier(problem);
  const Frontier frontier = build_frontier(problem, crawl);
  const fs::path dir = tmp.path() / "frontier";
  write_frontier_directory(dir, problem, crawl, frontier, RunInfo{"synthetic.csv", {}, 0.0, {}}, {});
  const auto read_all = [&] {
    const FrontierIndex index = read_frontier_directory(dir);
    for (std::size_t row = 0; row < index.entries.size(); ++row) {
      if (index.has_plan(row)) index.frequencies(row);
    }
  };
  for (const std::string name : {"plans.bin", "frontier.csv", "summary.json"}) {
    const std::string original = read_text_file(dir / name);
    fuzz(name, original, 4, [&](const std::string& input) {
      write_file_atomically(dir / name, input);
      read_all();
    });
    write_file_atomically(dir / name, original);
  }
  EXPECT_NO_THROW(read_all());
}

}  // namespace
}  // namespace perseus
