#include "perseus/protocol/protocol.hpp"

#include <cstdlib>
#include <ctime>
#include <regex>

#include <gtest/gtest.h>

#include "perseus/server/api.hpp"

namespace perseus::server {
namespace {

using json = nlohmann::json;

json valid_job() {
  return {{"job_id", ""}, {"pp_degree", 4}, {"dp_degree", 2}, {"tp_degree", 2}, {"world_size", 16},
          {"job_metadata", nullptr}};
}

int status_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ApiError& e) {
    return e.status();
  }
  return 0;
}

std::string detail_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ApiError& e) {
    return e.what();
  }
  return "";
}

TEST(Protocol, JobInfoReadsTheExistingFields) {
  const JobInfo info = parse_job_info(valid_job());
  EXPECT_EQ(info.pp_degree, 4);
  EXPECT_EQ(info.dp_degree, 2);
  EXPECT_EQ(info.tp_degree, 2);
  EXPECT_EQ(info.world_size, 16);
  EXPECT_FALSE(info.job_metadata);
  EXPECT_FALSE(info.layout);
}

TEST(Protocol, JobInfoRejectsAProductThatIsNotTheWorldSize) {
  json job = valid_job();
  job["world_size"] = 15;
  EXPECT_EQ(status_of([&] { parse_job_info(job); }), 422);
  EXPECT_NE(detail_of([&] { parse_job_info(job); }).find("world_size = 15"), std::string::npos);
}

TEST(Protocol, JobInfoNamesTheFieldOfEveryTypeError) {
  for (const char* field : {"pp_degree", "dp_degree", "tp_degree", "world_size"}) {
    for (const json& bad : {json("4"), json(4.5), json(true), json(nullptr), json::array(), json(0), json(-1)}) {
      json job = valid_job();
      job[field] = bad;
      const std::string detail = detail_of([&] { parse_job_info(job); });
      EXPECT_NE(detail.find(std::string("JobInfo.") + field), std::string::npos) << field << " = " << bad.dump();
    }
    json job = valid_job();
    job.erase(field);
    EXPECT_NE(detail_of([&] { parse_job_info(job); }).find("field required"), std::string::npos);
  }
  json job = valid_job();
  job.erase("job_id");  // optional: the existing client's model defaults it to ""
  EXPECT_EQ(parse_job_info(job).job_id, "");
  job["job_id"] = nullptr;
  EXPECT_EQ(status_of([&] { parse_job_info(job); }), 422);
  job["job_id"] = "chosen-by-client";
  EXPECT_EQ(status_of([&] { parse_job_info(job); }), 422);
  job["job_id"] = 7;
  EXPECT_EQ(status_of([&] { parse_job_info(job); }), 422);
  // Huge integers do not wrap around into valid ones.
  job = valid_job();
  job["pp_degree"] = json(18446744073709551615ull);
  EXPECT_EQ(status_of([&] { parse_job_info(job); }), 422);
  // Sizes beyond the solver's limits are refused before anything is allocated for them.
  job = valid_job();
  job["pp_degree"] = 4096;
  job["dp_degree"] = 1;
  job["tp_degree"] = 1;
  job["world_size"] = 4096;
  EXPECT_EQ(status_of([&] { parse_job_info(job); }), 422);
  job["pp_degree"] = 1024;
  job["world_size"] = 1024;
  EXPECT_EQ(parse_job_info(job).pp_degree, 1024);
  job["microbatches"] = 65536;  // 1024 stages x 65,536 microbatches: far beyond the instruction limit
  EXPECT_EQ(status_of([&] { parse_job_info(job); }), 422);
  job["microbatches"] = 65537;
  EXPECT_EQ(status_of([&] { parse_job_info(job); }), 422);
}

// zeus's JobInfo takes any string as job_metadata; only one too long for the job id to fit in
// a request line is refused.
TEST(Protocol, JobMetadataIsAnyStringAsInZeus) {
  json job = valid_job();
  const std::vector<std::string> accepted = {"bloom-176b_run=3,lr=1e-4", "a/b", "../x", "a?b", "a#b", "a%2F",
                                             "100%", "back\\slash", "line\nbreak", std::string("nul\0ctl\x01", 8),
                                             "tab\there", "caf\xc3\xa9", std::string(300, 'm'), std::string(4096, 'x'),
                                             ""};
  for (const std::string& metadata : accepted) {
    job["job_metadata"] = metadata;
    EXPECT_EQ(status_of([&] { parse_job_info(job); }), 0) << metadata;
    EXPECT_EQ(*parse_job_info(job).job_metadata, metadata);
  }
  job["job_metadata"] = std::string(4097, 'x');
  EXPECT_NE(detail_of([&] { parse_job_info(job); }).find("JobInfo.job_metadata: at most 4096 bytes"), std::string::npos);
}

TEST(Protocol, JobInfoMayCarryItsPipelineLayout) {
  json job = valid_job();
  job["microbatches"] = 12;
  job["schedule"] = "gpipe";
  const JobInfo info = parse_job_info(job);
  ASSERT_TRUE(info.layout);
  EXPECT_EQ(info.layout->microbatches, 12);
  EXPECT_EQ(info.layout->kind, ScheduleKind::kGPipe);
  EXPECT_EQ(info.layout->chunks, 1);
  job["schedule"] = "zigzag";
  EXPECT_NE(detail_of([&] { parse_job_info(job); }).find("JobInfo.schedule"), std::string::npos);
}

TEST(Protocol, RankInfo) {
  const json rank = {{"rank", 5}, {"dp_rank", 1}, {"pp_rank", 2}, {"tp_rank", 0},
                     {"available_frequencies", {1410, 1395, 1380}}};
  const RankInfo info = parse_rank_info(rank);
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.pp_rank, 2);
  EXPECT_EQ(info.available_frequencies, (std::vector<int>{1410, 1395, 1380}));
  json bad = rank;
  bad["available_frequencies"] = {1410, "1395"};
  EXPECT_NE(detail_of([&] { parse_rank_info(bad); }).find("RankInfo.available_frequencies[1]"), std::string::npos);
  bad = rank;
  bad["rank"] = -1;
  EXPECT_EQ(status_of([&] { parse_rank_info(bad); }), 422);
  EXPECT_EQ(to_json(info), rank);
}

TEST(Protocol, ProfilingResult) {
  const json body = {{"rank", 1},
                     {"iter_time", {1.5, 1.25}},
                     {"iter_energy", {300.0, 290.0}},
                     {"time_breakdown", {{"forward", {{0.1, 0.11}, {0.1, 0.09}}}, {"backward", {{0.2}, {0.21}}}}},
                     {"energy_breakdown", {{"forward", {{10.0, 11.0}, {10.0, 9.0}}}}}};
  const ProfilingResult result = parse_profiling_result(body);
  EXPECT_EQ(result.rank, 1);
  EXPECT_EQ(result.iter_time, (std::vector<double>{1.5, 1.25}));
  ASSERT_EQ(result.time_breakdown.size(), 2u);
  json bad = body;
  bad["time_breakdown"]["forward"][1][0] = "fast";
  EXPECT_NE(detail_of([&] { parse_profiling_result(bad); }).find("ProfilingResult.time_breakdown.forward[1][0]"),
            std::string::npos);
  bad = body;
  bad["iter_time"] = {1.0, -2.0};
  EXPECT_EQ(status_of([&] { parse_profiling_result(bad); }), 422);
  bad = body;
  bad["energy_breakdown"] = {{"for/ward", json::array()}};
  EXPECT_EQ(status_of([&] { parse_profiling_result(bad); }), 422);
}

TEST(Protocol, ImplausibleMeasurementsAreRefusedNamingTheFieldAndTheLimit) {
  const auto detail = [](const json& body) { return detail_of([&] { parse_profiling_result(body); }); };
  // 1e308 summed twice is infinity: such a value failed the job's profile for good.
  std::string d = detail({{"rank", 0}, {"iter_time", {1.0, 1e308}}});
  EXPECT_EQ(d, "ProfilingResult.iter_time[1]: 1e+308 s is beyond any plausible measurement: at most 86400 s (one day)");
  d = detail({{"rank", 0}, {"iter_energy", {2e9}}});
  EXPECT_EQ(d, "ProfilingResult.iter_energy[0]: 2e+09 J is beyond any plausible measurement: at most 1e+09 J");
  d = detail({{"rank", 0}, {"energy_breakdown", {{"forward", {{1.0, 1e300}}}}}});
  EXPECT_NE(d.find("ProfilingResult.energy_breakdown.forward[0][1]: 1e+300 J"), std::string::npos) << d;
  d = detail({{"rank", 0}, {"time_breakdown", {{"backward", {{-1e-300}}}}}});
  EXPECT_EQ(d, "ProfilingResult.time_breakdown.backward[0][0]: must not be negative, got -1e-300 s");
  EXPECT_EQ(detail({{"rank", 0}, {"iter_time", {0.0}}}), "ProfilingResult.iter_time[0]: must be positive, got 0");
  EXPECT_EQ(status_of([] { parse_profiling_result({{"rank", 0}, {"iter_time", {-1e308}}}); }), 422);
  // Zero is possible where a short span reads no time or energy; the limits themselves pass.
  const json edge = {{"rank", 0},
                     {"iter_time", {86400.0}},
                     {"iter_energy", {0.0, 1e9}},
                     {"time_breakdown", {{"forward", {{0.0, 86400.0}}}}},
                     {"energy_breakdown", {{"forward", {{0.0, 1e9}}}}}};
  EXPECT_EQ(status_of([&] { parse_profiling_result(edge); }), 0);
}

TEST(Protocol, LogfmtValuesCannotEndTheirFieldOrLine) {
  EXPECT_EQ(logfmt_value("2024-01-01-00-00-00+dp1+pp2+tp1+Frontier"), "2024-01-01-00-00-00+dp1+pp2+tp1+Frontier");
  EXPECT_EQ(logfmt_value(""), R"("")");
  EXPECT_EQ(logfmt_value("a b"), R"("a b")");
  EXPECT_EQ(logfmt_value("k=v"), R"("k=v")");
  EXPECT_EQ(logfmt_value(R"(x" level=error)"), R"("x\" level=error")");
  EXPECT_EQ(logfmt_value("a\\b"), R"("a\\b")");
  EXPECT_EQ(logfmt_value("one\ntwo\r\t"), R"("one\ntwo\r\t")");
  EXPECT_EQ(logfmt_value(std::string("nul\0bell\a", 9)), R"("nul\u0000bell\u0007")");
  EXPECT_EQ(logfmt_value("caf\xc3\xa9"), "caf\xc3\xa9");  // UTF-8 passes as is
}

TEST(Protocol, StragglerNotice) {
  const StragglerNotice notice = parse_straggler_notice({{"id", 3}, {"delay_s", 2.5}, {"degree", 1.3}});
  EXPECT_EQ(notice.id, 3);
  EXPECT_DOUBLE_EQ(notice.delay_s, 2.5);
  EXPECT_DOUBLE_EQ(notice.degree, 1.3);
  EXPECT_FALSE(notice.job_id);
  EXPECT_EQ(status_of([] { parse_straggler_notice({{"id", 3}, {"degree", 0.5}}); }), 422);
  EXPECT_EQ(status_of([] { parse_straggler_notice({{"id", 3}, {"delay_s", -1}, {"degree", 2}}); }), 422);
  EXPECT_EQ(status_of([] { parse_straggler_notice({{"id", "3"}, {"degree", 2}}); }), 422);
}

TEST(Protocol, NonJsonBodiesAre400AndNonObjects422) {
  EXPECT_EQ(status_of([] { parse_json_object("{\"job_id\": ", "JobInfo"); }), 400);
  EXPECT_EQ(status_of([] { parse_json_object("\xff\xfe", "JobInfo"); }), 400);
  EXPECT_EQ(status_of([] { parse_json_object("[1, 2]", "JobInfo"); }), 422);
  EXPECT_EQ(status_of([] { parse_json_object("{}", "JobInfo"); }), 0);
}

TEST(Protocol, JobIdHasTheExistingServersShape) {
  ::setenv("TZ", "UTC", 1);
  ::tzset();
  JobInfo info = parse_job_info(valid_job());
  // 2024-03-05 07:08:09 UTC
  EXPECT_EQ(make_job_id(info, "PointSolution", 1709622489), "2024-03-05-07-08-09+dp2+pp4+tp2+PointSolution");
  info.job_metadata = "bloom";
  EXPECT_EQ(make_job_id(info, "Frontier", 1709622489), "2024-03-05-07-08-09+dp2+pp4+tp2+Frontier+bloom");
  info.job_metadata = "";  // as zeus's `if self.job_metadata:`, nothing is appended
  EXPECT_EQ(make_job_id(info, "PointSolution3D", 1709622489), "2024-03-05-07-08-09+dp2+pp4+tp2+PointSolution3D");
}

TEST(Protocol, FrequencyScheduleFieldNames) {
  const json schedule = frequency_schedule_json(3, {{"forward", 1410}, {"backward", 1350}});
  EXPECT_EQ(schedule.dump(), R"({"frequencies":[["forward",1410],["backward",1350]],"rank":3})");
  EXPECT_EQ(error_response(404, "unknown job id 'x'").body, R"({"detail":"unknown job id 'x'"})");
}

TEST(Protocol, TheClientReadsBackTheDetailOfTheServersErrorBody) {
  EXPECT_EQ(protocol::error_detail(error_response(409, "rank 3 is already registered").body),
            "rank 3 is already registered");
  EXPECT_EQ(protocol::error_detail(R"({"detail":[1,2]})"), "[1,2]");
  EXPECT_EQ(protocol::error_detail("Bad Gateway"), "Bad Gateway");  // not an error body: as it is
  EXPECT_EQ(protocol::error_detail(std::string(600, 'x')).size(), 500u);
}

TEST(Protocol, StageInstructionNamesFollowTheSchedule) {
  // 1F1B, S = 4, M = 6 (docs/solver.md, "Schedules"): stage 0 runs
  // F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5.
  const auto names = stage_instruction_names(PipelineLayout{ScheduleKind::k1F1B, 6, 1}, 4);
  ASSERT_EQ(names.size(), 4u);
  const std::vector<std::string> stage0 = {"forward",  "forward", "forward",  "forward",  "backward", "forward",
                                           "backward", "forward", "backward", "backward", "backward", "backward"};
  EXPECT_EQ(names[0], stage0);
  for (std::size_t i = 0; i < names[3].size(); ++i) EXPECT_EQ(names[3][i], i % 2 ? "backward" : "forward");
}

}  // namespace
}  // namespace perseus::server
