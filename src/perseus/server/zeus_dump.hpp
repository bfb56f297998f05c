// The files zeus's server writes when ZEUS_PFO_DUMP_DATA is on (zeus's common.py: save_ranks,
// save_sched, save_prof), written as its pydantic models serialise them (json.dumps: ", " and
// ": " separators, ASCII only) so that zeus's load_ranks, load_sched and load_prof read them.
// Per job, in <dump_dir>/<job_id>/:
//   ranks.json    every rank's RankInfo, by rank, once the last rank has registered;
//   N.sched.json  the FrequencySchedule every rank was served in round N (0, 1, ...), by rank,
//                 each with "power_states" too: its clocks alone, the key of the Perseus
//                 artifact's measured runs (data/measured), which zeus's loader ignores;
//   N.prof.json   the ProfilingResult every rank reported after round N, by rank.
// N's two files are written once every rank has reported after round N, as zeus writes them; a
// round released before then is never written (zeus's server would not release it).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "perseus/server/api.hpp"
#include "perseus/server/schedulers.hpp"

namespace perseus::server {

// Python's json.dumps(value), which pydantic v1's .json() returns; object keys keep their order.
std::string python_json(const nlohmann::ordered_json& value);

// The folder of a job's files: its id, as zeus names it, when that is a plain file name of at
// most 200 bytes; otherwise the id with '/' and control characters as '_', cut at 200 bytes,
// with a hash of the whole id appended, so that no id leaves the dump directory, makes a name
// the file system refuses, or shares a folder with another id.
std::string dump_folder_name(const std::string& job_id);

// ranks.json.
std::string ranks_file(const std::map<int, RankInfo>& ranks);
// N.sched.json: what `deployment` serves every rank. ApiError 409 when it has no list for one.
std::string schedules_file(const Deployment& deployment, const std::map<int, RankInfo>& ranks);
// A rank's result as zeus's ProfilingResult model keeps it: the model's fields in its order,
// every measurement a float, the instructions of the breakdowns in the order the rank sent
// them. `body` is one parse_profiling_result accepted.
nlohmann::ordered_json zeus_profiling_result(std::string_view body);
// N.prof.json.
std::string profiling_results_file(const std::map<int, nlohmann::ordered_json>& results);

// Round N's files in the making: the plan served in the round and, by rank, the first result
// each rank reported after it. Complete when every rank has reported.
struct DumpRound {
  std::uint64_t round = 0;
  std::shared_ptr<const Deployment> deployment;
  std::map<int, nlohmann::ordered_json> results;
  std::map<int, RankInfo> ranks;  // filled when complete
};

}  // namespace perseus::server
