// What makes the server a drop-in for zeus's: PointSolution3D and PointSolution's plans per
// rank, any job_metadata (its job id safe in URLs, file names and logs), scheduler arguments
// read as pydantic reads numbers, and zeus's dump files byte for byte.
#include <filesystem>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "perseus/model/errors.hpp"
#include "perseus/plan/output_files.hpp"
#include "perseus/server/service.hpp"
#include "perseus/server/zeus_dump.hpp"
#include "server_test_support.hpp"

namespace perseus::server {
namespace {

using json = nlohmann::json;
using testing::body_of;
using testing::call;
using testing::fetch_round;
using testing::frequencies_of;
using testing::rank_of;
using testing::register_job;
using testing::register_ranks;
using testing::TempDir;

const StageFrequencies kList0 = {{"forward", 1410}, {"backward", 1400}};
const StageFrequencies kList1 = {{"forward", 1300}, {"backward", 1290}};
const StageFrequencies kList2 = {{"forward", 1200}, {"backward", 1190}};
const StageFrequencies kList3 = {{"forward", 1100}, {"backward", 1090}};

ServiceOptions point_options(const TempDir& dir, const std::string& scheduler, const std::vector<StageFrequencies>& lists) {
  const auto plan = dir.write("freqs_pipeline_00007.py", freqs_pipeline_text(lists, {"Iteration 7 cost change: 0.1"}));
  ServiceOptions options;
  options.scheduler = parse_scheduler_config(scheduler, {{"solution_path", plan.string()}});
  options.db_path = (dir.path() / "server.db").string();
  options.barrier_timeout_s = 20.0;
  return options;
}

// ---- PointSolution3D and PointSolution ----

TEST(Service, PointSolution3DServesEveryRankItsStagesList) {
  TempDir dir;
  Service service(point_options(dir, "PointSolution3D", {kList0, kList1}));
  const std::string id = register_job(service, 2, 2, 2, {{"job_metadata", "gpt3"}});
  EXPECT_TRUE(id.ends_with("+dp2+pp2+tp2+PointSolution3D+gpt3")) << id;
  register_ranks(service, id, 2, 2, 2, {1410, 1300});
  for (int round = 0; round < 2; ++round) {
    const auto answers = fetch_round(service, id, 8);
    for (int d = 0; d < 2; ++d) {
      for (int p = 0; p < 2; ++p) {
        for (int t = 0; t < 2; ++t) {
          const int r = rank_of(2, 2, d, p, t);
          ASSERT_EQ(answers[r].status, 200) << answers[r].body;
          EXPECT_EQ(body_of(answers[r]).at("rank"), r);  // its own rank, as zeus's copies say
          EXPECT_EQ(frequencies_of(answers[r]), p == 0 ? kList0 : kList1) << "rank " << r;
        }
      }
    }
  }
  // A fixed plan takes no profile.
  EXPECT_EQ(call(service, "POST", "/profile/" + id, "x", {{"p_blocking", "80"}, {"microbatches", "2"}}).status, 409);
}

TEST(Service, PointSolution3DRefusesAPlanThatIsNotOneListPerStage) {
  TempDir dir;
  Service service(point_options(dir, "PointSolution3D", {kList0, kList1, kList2, kList3}));
  // One list per rank of a dp 2, pp 2 job: zeus's PointSolution3D fails such a job's ranks.
  const ApiResponse refused = call(service, "POST", "/register_job", testing::job_info(2, 2, 1).dump());
  EXPECT_EQ(refused.status, 422);
  EXPECT_NE(body_of(refused).at("detail").get<std::string>().find("PointSolution3D plan"), std::string::npos)
      << refused.body;
  EXPECT_NE(body_of(refused).at("detail").get<std::string>().find("has 4 stages, the job 2"), std::string::npos)
      << refused.body;
  EXPECT_EQ(call(service, "POST", "/register_job", testing::job_info(4, 1, 1).dump()).status, 200);
}

// zeus's PointSolution: a plan with one list per rank gives rank r list r, whatever its stage.
TEST(Service, PointSolutionGivesRankRListRWhenThePlanHasOneListPerRank) {
  TempDir dir;
  const ServiceOptions options = point_options(dir, "PointSolution", {kList0, kList1, kList2, kList3});
  std::string id;
  {
    Service service(options);
    id = register_job(service, 2, 2, 1);
    register_ranks(service, id, 2, 2, 1, {1410});
    const auto answers = fetch_round(service, id, 4);
    const std::vector<StageFrequencies> lists = {kList0, kList1, kList2, kList3};
    for (int r = 0; r < 4; ++r) {
      ASSERT_EQ(answers[r].status, 200) << answers[r].body;
      EXPECT_EQ(frequencies_of(answers[r]), lists[static_cast<std::size_t>(r)]) << "rank " << r;
    }
  }
  Service restarted(options);  // read back from the database the same way
  const auto answers = fetch_round(restarted, id, 4);
  ASSERT_EQ(answers[3].status, 200) << answers[3].body;
  EXPECT_EQ(frequencies_of(answers[3]), kList3);
  // Neither one list per rank nor one per stage: refused, saying what would fit.
  const ApiResponse refused = call(restarted, "POST", "/register_job", testing::job_info(3, 1, 1).dump());
  EXPECT_EQ(refused.status, 422);
  EXPECT_NE(refused.body.find("world_size = 3 (one list per rank"), std::string::npos) << refused.body;
}

// ---- job ids from any job_metadata ----

TEST(Service, JobIdsWithAnyMetadataRoundTripThroughRegisterRankAndSchedule) {
  TempDir dir;
  std::ostringstream log;
  auto logger = std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::ostream_sink_mt>(log));
  logger->set_pattern("ts=%Y-%m-%dT%H:%M:%S.%e%z level=%l %v");
  logger->set_level(spdlog::level::debug);
  ServiceOptions options = point_options(dir, "PointSolution3D", {kList0, kList1});
  options.dump_data = true;
  options.dump_dir = (dir.path() / "dump").string();
  options.logger = logger;
  Service service(options);
  const std::vector<std::string> metadata = {
      "100%",      "a%2Fb",          "back\\slash", "../../escape", "a/b/c", "q?x=1#frag", "new\nline level=error",
      "tab\there", std::string("nul\0x", 5), "\x01\x1f\x7f", "caf\xc3\xa9 \xe2\x9c\x93", std::string(300, 'm'),
      std::string(4096, '/')};
  std::set<std::string> folders;
  for (const std::string& m : metadata) {
    const std::string id = register_job(service, 2, 1, 1, {{"job_metadata", m}});
    ASSERT_TRUE(id.ends_with("+PointSolution3D+" + m)) << id;
    // The Service sees paths decoded, as the HTTP layer hands them over (clients percent-encode).
    register_ranks(service, id, 2, 1, 1, {1410});
    const auto answers = fetch_round(service, id, 2);
    for (int r = 0; r < 2; ++r) {
      ASSERT_EQ(answers[r].status, 200) << answers[r].body;
      EXPECT_EQ(frequencies_of(answers[r]), r == 0 ? kList0 : kList1);
    }
    EXPECT_EQ(call(service, "POST", "/result/" + id, R"({"rank": 0, "iter_time": [1.0]})").status, 200);
    // Its dump folder is one entry right under the dump directory, its own.
    const std::filesystem::path folder = std::filesystem::path(options.dump_dir) / dump_folder_name(id);
    EXPECT_EQ(folder.parent_path(), std::filesystem::path(options.dump_dir)) << id;
    EXPECT_TRUE(std::filesystem::is_regular_file(folder / "ranks.json")) << folder;
    EXPECT_TRUE(folders.insert(folder.filename().string()).second) << "shared folder " << folder;
    const ApiResponse jobs = call(service, "GET", "/api/jobs");
    EXPECT_NE(jobs.body.find(json(id).dump(-1, ' ', false, json::error_handler_t::replace)), std::string::npos);
  }
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::recursive_directory_iterator(options.dump_dir)) ++entries;
  EXPECT_EQ(entries, metadata.size() * 3);  // each job's folder, its ranks.json and deployments.jsonl
  // No id breaks a log line: every line is one record that starts as the pattern does.
  logger->flush();
  std::istringstream lines(log.str());
  int count = 0;
  for (std::string line; std::getline(lines, line); ++count) EXPECT_TRUE(line.starts_with("ts=")) << line;
  EXPECT_GT(count, 0);
}

TEST(Service, DumpFolderNamesAreTheJobIdOrASafeStandInForIt) {
  const std::string plain = "2024-03-05-07-08-09+dp1+pp4+tp1+PointSolution+gpt3 xl, run=2 (test)\\x";
  EXPECT_EQ(dump_folder_name(plain), plain);  // as zeus names it
  const std::string slash = "2024-03-05-07-08-09+dp1+pp4+tp1+PointSolution+a/b";
  const std::string underscore = "2024-03-05-07-08-09+dp1+pp4+tp1+PointSolution+a_b";
  EXPECT_TRUE(dump_folder_name(slash).starts_with(underscore + "-")) << dump_folder_name(slash);
  EXPECT_NE(dump_folder_name(slash), dump_folder_name(underscore));
  EXPECT_EQ(dump_folder_name(slash), dump_folder_name(slash));  // stable
  const std::string long_id = std::string(199, 'x') + "\xc3\xa9" + std::string(100, 'y');
  const std::string cut = dump_folder_name(long_id);
  EXPECT_LE(cut.size(), 255u);
  EXPECT_TRUE(cut.starts_with(std::string(199, 'x') + "-")) << cut;  // never half a character
  EXPECT_NE(dump_folder_name(long_id + "z"), cut);
  EXPECT_EQ(dump_folder_name("..").find('/'), std::string::npos);
  EXPECT_NE(dump_folder_name(".."), "..");
  EXPECT_NE(dump_folder_name("a\nb").find("a_b-"), std::string::npos);
}

// ---- zeus's dump files ----

// Two ranks of a measured run (data/measured/a100-pp4-bloom-3b/3.prof.json, lists shortened),
// as zeus's server wrote them: the text the dump must reproduce.
const std::string kMeasuredProf =
    R"([{"rank": 0, "iter_time": [67.26644611358643, 67.24242687225342], "iter_energy": [15917.791999999434, 15967.232000000775], "time_breakdown": {"load": [[0.0060122013092041016, 0.0059452056884765625, 0.005492448806762695], [0.005507469177246094, 0.005491733551025391, 0.005475282669067383]], "forward": [[0.13238310813903809, 0.13375139236450195, 0.13378167152404785], [0.13261628150939941, 0.13341712951660156, 0.1334218978881836]], "backward": [[0.36548805236816406, 0.37499284744262695, 0.37608766555786133], [0.3657984733581543, 0.3749997615814209, 0.3753042221069336]]}, "energy_breakdown": {"load": [], "forward": [[], []], "backward": [[], []]}}, {"rank": 1, "iter_time": [67.26594042778015, 67.24620056152344], "iter_energy": [14073.710000000894, 14082.6969999969], "time_breakdown": {"load": [[1.5497207641601562e-05, 1.4066696166992188e-05, 1.430511474609375e-05], [1.5020370483398438e-05, 1.4543533325195312e-05, 1.4066696166992188e-05]], "forward": [[0.11476612091064453, 0.11713457107543945, 0.12382340431213379], [0.11499881744384766, 0.11710453033447266, 0.11718273162841797]], "backward": [[0.3164830207824707, 0.336698055267334, 0.3368353843688965], [0.3154592514038086, 0.33670568466186523, 0.33682799339294434]]}, "energy_breakdown": {"load": [], "forward": [[], []], "backward": [[], []]}}])";

TEST(Service, DumpWritesZeusFilesByteForByte) {
  TempDir dir;
  ServiceOptions options = point_options(dir, "PointSolution", {kList0, kList1});
  options.dump_data = true;
  options.dump_dir = (dir.path() / "dump").string();
  Service service(options);
  const std::string id = register_job(service, 2, 1, 1);
  const std::filesystem::path folder = std::filesystem::path(options.dump_dir) / id;  // zeus's name: the id
  const json rank1 = {{"rank", 1}, {"dp_rank", 0}, {"pp_rank", 1}, {"tp_rank", 0}, {"available_frequencies", {1410, 1400}}};
  ASSERT_EQ(call(service, "POST", "/register_rank/" + id, rank1.dump()).status, 200);
  EXPECT_FALSE(std::filesystem::exists(folder / "ranks.json"));  // written once every rank has registered
  const json rank0 = {{"rank", 0}, {"dp_rank", 0}, {"pp_rank", 0}, {"tp_rank", 0}, {"available_frequencies", {1410, 1400}}};
  ASSERT_EQ(call(service, "POST", "/register_rank/" + id, rank0.dump()).status, 200);
  EXPECT_EQ(read_text_file(folder / "ranks.json"),
            R"([{"rank": 0, "dp_rank": 0, "pp_rank": 0, "tp_rank": 0, "available_frequencies": [1410, 1400]}, )"
            R"({"rank": 1, "dp_rank": 0, "pp_rank": 1, "tp_rank": 0, "available_frequencies": [1410, 1400]}])");

  // Round 0: files once every rank has reported; each rank's result as it sent it, reordered
  // into the model's fields, integers written as the floats zeus's model makes them.
  ASSERT_EQ(fetch_round(service, id, 2)[0].status, 200);
  std::string rank1_body = nlohmann::ordered_json::parse(kMeasuredProf)[1].dump();
  ASSERT_EQ(call(service, "POST", "/result/" + id, rank1_body).status, 200);
  EXPECT_FALSE(std::filesystem::exists(folder / "0.prof.json"));
  // Rank 0 sends its fields in another order, with an extra one zeus's model drops.
  nlohmann::ordered_json rank0_body;
  const nlohmann::ordered_json rank0_measured = nlohmann::ordered_json::parse(kMeasuredProf)[0];
  for (const char* key : {"energy_breakdown", "time_breakdown", "iter_energy", "iter_time", "rank"}) {
    rank0_body[key] = rank0_measured.at(key);
  }
  rank0_body["note"] = "ignored";
  ASSERT_EQ(call(service, "POST", "/result/" + id, rank0_body.dump()).status, 200);
  EXPECT_EQ(read_text_file(folder / "0.prof.json"), kMeasuredProf);
  EXPECT_EQ(read_text_file(folder / "0.sched.json"),
            R"([{"rank": 0, "frequencies": [["forward", 1410], ["backward", 1400]], "power_states": [1410, 1400]}, )"
            R"({"rank": 1, "frequencies": [["forward", 1300], ["backward", 1290]], "power_states": [1300, 1290]}])");

  // Round 1: integers become floats; a rank's second result of a round does not replace its first.
  ASSERT_EQ(fetch_round(service, id, 2)[1].status, 200);
  ASSERT_EQ(call(service, "POST", "/result/" + id, R"({"rank": 0, "iter_time": [2], "iter_energy": [300]})").status, 200);
  ASSERT_EQ(call(service, "POST", "/result/" + id, R"({"rank": 0, "iter_time": [9], "iter_energy": [9]})").status, 200);
  EXPECT_FALSE(std::filesystem::exists(folder / "1.prof.json"));
  ASSERT_EQ(call(service, "POST", "/result/" + id, R"({"rank": 1, "iter_time": [2.5], "iter_energy": [1e-05]})").status, 200);
  EXPECT_EQ(read_text_file(folder / "1.prof.json"),
            R"([{"rank": 0, "iter_time": [2.0], "iter_energy": [300.0], "time_breakdown": {}, "energy_breakdown": {}}, )"
            R"({"rank": 1, "iter_time": [2.5], "iter_energy": [1e-05], "time_breakdown": {}, "energy_breakdown": {}}])");

  // Round 2 released before every rank reported for it: zeus's server never gets that far
  // (its next round waits for the results), so it has no files.
  ASSERT_EQ(fetch_round(service, id, 2)[0].status, 200);
  ASSERT_EQ(call(service, "POST", "/result/" + id, R"({"rank": 0, "iter_time": [1.0]})").status, 200);
  ASSERT_EQ(fetch_round(service, id, 2)[0].status, 200);
  ASSERT_EQ(call(service, "POST", "/result/" + id, R"({"rank": 1, "iter_time": [1.0]})").status, 200);
  EXPECT_FALSE(std::filesystem::exists(folder / "2.prof.json"));
  EXPECT_FALSE(std::filesystem::exists(folder / "3.prof.json"));
  // perseus's own record of the plans deployed, beside zeus's files.
  EXPECT_TRUE(std::filesystem::exists(folder / "deployments.jsonl"));
}

TEST(Service, DumpFailuresAreLoggedNotTheJobs) {
  TempDir dir;
  std::ostringstream log;
  auto logger = std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::ostream_sink_mt>(log));
  ServiceOptions options = point_options(dir, "PointSolution", {kList0, kList1});
  options.dump_data = true;
  options.dump_dir = dir.write("a-file", "not a directory").string();
  options.logger = logger;
  Service service(options);
  const std::string id = register_job(service, 2, 1, 1);
  register_ranks(service, id, 2, 1, 1, {1410});
  const auto answers = fetch_round(service, id, 2);
  EXPECT_EQ(answers[0].status, 200);
  EXPECT_EQ(answers[1].status, 200);
  logger->flush();
  EXPECT_NE(log.str().find("event=dump_failed"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("file=ranks.json"), std::string::npos) << log.str();
}

TEST(Service, DumpNumbersAreWrittenAsPythonWritesThem) {
  // json.dumps of these floats, as Python 3 writes them.
  const nlohmann::ordered_json floats = {0.1, 1e-05, 1e16, 1e15, 123456789.0, 1.5, 100.0, 1e22, 5e-324,
                                         1.7976931348623157e+308, 0.0001, 0.00012, 1234567890123456.0,
                                         12345678901234567.0, -2.5, -0.0, 0.0, 1.5497207641601562e-05,
                                         9999999999999998.0, 0.30000000000000004, 2e-7};
  EXPECT_EQ(python_json(floats),
            "[0.1, 1e-05, 1e+16, 1000000000000000.0, 123456789.0, 1.5, 100.0, 1e+22, 5e-324, "
            "1.7976931348623157e+308, 0.0001, 0.00012, 1234567890123456.0, 1.2345678901234568e+16, -2.5, -0.0, "
            "0.0, 1.5497207641601562e-05, 9999999999999998.0, 0.30000000000000004, 2e-07]");
  const nlohmann::ordered_json mixed = {{"b", {1, 2}}, {"a", {{"x", nullptr}, {"y", true}}}, {"s", "caf\xc3\xa9\n\""}};
  EXPECT_EQ(python_json(mixed), R"({"b": [1, 2], "a": {"x": null, "y": true}, "s": "caf\u00e9\n\""})");
}

// ---- ZEUS_PFO_SCHEDULER_ARGS ----

TEST(Service, SchedulerArgsTakeNumbersAsPydanticReadsThem) {
  for (const json& microbatches : {json(4), json(4.0), json("4"), json(" 4 ")}) {
    const SchedulerConfig config = parse_scheduler_config("Frontier", {{"microbatches", microbatches}, {"chunks", "1"}});
    ASSERT_TRUE(config.layout) << microbatches.dump();
    EXPECT_EQ(config.layout->microbatches, 4) << microbatches.dump();
  }
  const SchedulerConfig profiling = parse_scheduler_config(
      "InVivoProfiling", {{"p_blocking", "83.64"}, {"iterations_per_frequency", 3.0}, {"max_energy_rises", "2"}});
  EXPECT_DOUBLE_EQ(*profiling.p_blocking, 83.64);
  EXPECT_EQ(profiling.profiling.iterations_per_frequency, 3);
  EXPECT_EQ(profiling.profiling.max_energy_rises, 2);
  // Not whole numbers: refused, not cut to 4 as pydantic v1 would.
  for (const json& bad : {json(4.5), json("4.5"), json("four"), json(true), json::array({4}), json(1e300)}) {
    try {
      parse_scheduler_config("Frontier", {{"microbatches", bad}});
      ADD_FAILURE() << "accepted " << bad.dump();
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("ZEUS_PFO_SCHEDULER_ARGS: 'microbatches' must be a whole number"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW(parse_scheduler_config("InVivoProfiling", {{"p_blocking", "lots"}}), InputError);
  // perseus's own: seconds of the exact MILP at iso-time, for the schedulers that compute a frontier.
  EXPECT_DOUBLE_EQ(parse_scheduler_config("Frontier", {{"exact_seconds", "2.5"}}).exact_seconds, 2.5);
  EXPECT_DOUBLE_EQ(parse_scheduler_config("InVivoProfiling", {{"p_blocking", 83.64}, {"exact_seconds", 10}}).exact_seconds, 10.0);
  EXPECT_EQ(parse_scheduler_config("Frontier", json::object()).exact_seconds, 0.0);
  for (const json& bad : {json(-1), json(601), json("lots"), json(true)}) {
    try {
      parse_scheduler_config("Frontier", {{"exact_seconds", bad}});
      ADD_FAILURE() << "accepted " << bad.dump();
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("'exact_seconds' must be"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(parse_scheduler_config("PointSolution", {{"solution_path", "x.py"}, {"exact_seconds", 1}}), InputError);
}

// A plan written as one rank's list, ["forward", 1410] pairs as zeus's FrequencySchedule holds
// them, is not a plan: refused at start-up, naming the file and the form a plan takes.
TEST(Service, APlanFileThatIsOneRanksListIsRefusedNamingTheFileAndTheForm) {
  TempDir dir;
  for (const char* text : {R"([["forward", 1410], ["backward", 1410]])", "[('forward', 1410), ('backward', 1410)]"}) {
    const auto file = dir.write("freqs_pipeline_00001.py", text);
    for (const char* scheduler : {"PointSolution", "PointSolution3D"}) {
      try {
        parse_scheduler_config(scheduler, {{"solution_path", file.string()}});
        ADD_FAILURE() << "accepted " << text;
      } catch (const InputError& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("ZEUS_PFO_SCHEDULER_ARGS: solution_path: " + file.string() + ": expected a plan"),
                  std::string::npos)
            << message;
        EXPECT_NE(message.find("one list of (instruction, frequency) pairs per pipeline stage"), std::string::npos);
        EXPECT_NE(message.find("got a single list of pairs"), std::string::npos) << message;
      }
    }
  }
  // Stage lists of ["forward", 1410] pairs are a plan: Python reads them as it reads tuples.
  const auto lists = dir.write("freqs_pipeline_00002.py", R"([[["forward", 1410]], [["backward", 1290]]])");
  EXPECT_EQ(parse_scheduler_config("PointSolution3D", {{"solution_path", lists.string()}}).point_plan,
            (PipelineFrequencies{{{"forward", 1410}}, {{"backward", 1290}}}));
}

}  // namespace
}  // namespace perseus::server
