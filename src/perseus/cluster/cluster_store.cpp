#include "perseus/cluster/cluster_store.hpp"

#include <cmath>

#include <fmt/format.h>

#include "perseus/model/errors.hpp"

namespace perseus::cluster {
namespace {

using json = nlohmann::json;

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS cluster_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cluster_jobs(id INTEGER PRIMARY KEY, job TEXT NOT NULL);
INSERT OR IGNORE INTO cluster_meta(key, value) VALUES('schema', 'perseus.cluster/1');
)sql";

std::string dump(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

// The matrix's shape, which a database belongs to: its GPU types and job types in order.
json shape_of(const ThroughputMatrix& matrix) {
  json types = json::array();
  for (const JobType& t : matrix.job_types) types.push_back(t.name());
  return {{"gpu_types", matrix.gpu_types}, {"job_types", types}};
}

std::string entity_name(int entity, const PolicySpec& policy) {
  const std::vector<Entity> entities = entities_of(policy);
  return entity >= 0 && entity < static_cast<int>(entities.size()) ? entities[static_cast<std::size_t>(entity)].name : "";
}

using Statement = server::SqliteDatabase::Statement;

}  // namespace

json job_to_json(const ScheduledJob& job, const ThroughputMatrix& matrix, const PolicySpec& policy) {
  const JobRequest& r = job.request;
  const bool over = job.finished_s >= 0.0;
  json gpu_hours = json::object();
  for (std::size_t g = 0; g < matrix.gpu_types.size(); ++g) gpu_hours[matrix.gpu_types[g]] = g < job.gpu_s.size() ? job.gpu_s[g] / 3600.0 : 0.0;
  return {{"id", job.id},
          {"type", matrix.job_types[static_cast<std::size_t>(r.type)].name()},
          {"steps", r.steps},
          {"weight", r.weight},
          {"slo_s", r.slo_s == Job::kNoSlo ? json(nullptr) : json(r.slo_s)},
          {"entity", entity_name(r.entity, policy)},
          {"command", r.command},
          {"status", to_string(job.status)},
          {"steps_done", job.steps_done},
          {"submitted_s", job.submitted_s},
          {"finished_s", over ? json(job.finished_s) : json(nullptr)},
          {"jct_s", job.status == JobStatus::kFinished ? json(job.finished_s - job.submitted_s) : json(nullptr)},
          {"started_s", job.started_s >= 0.0 ? json(job.started_s) : json(nullptr)},
          {"rounds", job.rounds},
          {"preemptions", job.preemptions},
          {"migrations", job.migrations},
          {"gpu", job.gpu_type >= 0 ? json(matrix.gpu_types[static_cast<std::size_t>(job.gpu_type)]) : json(nullptr)},
          {"partner", job.partner >= 0 ? json(job.partner) : json(nullptr)},
          {"gpu_hours", gpu_hours},
          {"energy_j", job.energy_j},
          {"isolated_s", job.isolated_s},
          {"ftf_rho", job.status == JobStatus::kFinished ? json(job.finish_time_fairness()) : json(nullptr)},
          {"cancel_requested", job.cancel_requested},
          {"detail", job.detail}};
}

ScheduledJob job_from_json(const json& j, const ThroughputMatrix& matrix, const PolicySpec& policy) {
  const auto field = [&](const char* name) -> const json& {
    if (!j.is_object() || !j.contains(name)) throw InputError(fmt::format("job: no field '{}'", name));
    return j.at(name);
  };
  const auto number = [&](const char* name) {
    const json& v = field(name);
    if (!v.is_number()) throw InputError(fmt::format("job: '{}' is not a number", name));
    return v.get<double>();
  };
  const auto text = [&](const char* name) {
    const json& v = field(name);
    if (!v.is_string()) throw InputError(fmt::format("job: '{}' is not a string", name));
    return v.get<std::string>();
  };
  ScheduledJob job;
  job.id = static_cast<int>(number("id"));
  job.request.type = matrix.job_index(text("type"));
  job.request.steps = number("steps");
  job.request.weight = number("weight");
  job.request.slo_s = field("slo_s").is_null() ? Job::kNoSlo : number("slo_s");
  const std::string entity = text("entity");
  job.request.entity = find_entity(entities_of(policy), entity);
  if (job.request.entity < 0) throw InputError(fmt::format("job {}: entity '{}' is not one of the policy's", job.id, entity));
  job.request.command = text("command");
  const std::string status = text("status");
  for (JobStatus s : kJobStatuses)
    if (status == to_string(s)) job.status = s;
  if (status != to_string(job.status)) throw InputError(fmt::format("job {}: status '{}'", job.id, status));
  job.steps_done = number("steps_done");
  job.submitted_s = number("submitted_s");
  job.finished_s = field("finished_s").is_null() ? -1.0 : number("finished_s");
  job.rounds = static_cast<int>(number("rounds"));
  job.preemptions = static_cast<int>(number("preemptions"));
  job.detail = text("detail");
  // Written since the simulator and the live scheduler share one loop; a database from before
  // has none of them (the job's GPU time, energy and isolated time start from 0).
  const auto optional_number = [&](const char* name, double absent) {
    return j.contains(name) && !j.at(name).is_null() ? number(name) : absent;
  };
  job.started_s = optional_number("started_s", -1.0);
  job.migrations = static_cast<int>(optional_number("migrations", 0.0));
  job.energy_j = optional_number("energy_j", 0.0);
  job.isolated_s = optional_number("isolated_s", 0.0);
  if (j.contains("cancel_requested")) {
    if (!j.at("cancel_requested").is_boolean()) throw InputError(fmt::format("job {}: 'cancel_requested' is not true or false", job.id));
    job.cancel_requested = j.at("cancel_requested").get<bool>();
  }
  job.gpu_s.assign(matrix.gpu_types.size(), 0.0);
  if (j.contains("gpu_hours")) {
    const json& hours = j.at("gpu_hours");
    if (!hours.is_object()) throw InputError(fmt::format("job {}: 'gpu_hours' is not an object", job.id));
    for (const auto& [gpu, h] : hours.items()) {
      if (!h.is_number()) throw InputError(fmt::format("job {}: gpu_hours of {} is not a number", job.id, gpu));
      job.gpu_s[static_cast<std::size_t>(matrix.gpu_index(gpu))] = h.get<double>() * 3600.0;
    }
  }
  return job;
}

ClusterStore::ClusterStore(const std::string& path, const ThroughputMatrix& matrix) : db_(path, "cluster database") {
  db_.exec(kSchema);
  Statement schema(db_, "SELECT value FROM cluster_meta WHERE key = 'schema'");
  if (!schema.step() || schema.column_text(0) != "perseus.cluster/1")
    throw InputError(fmt::format("{}: not a perseus cluster database (schema '{}')", path, schema.column_text(0)));
  const json shape = shape_of(matrix);
  Statement get(db_, "SELECT value FROM cluster_meta WHERE key = 'matrix'");
  if (get.step()) {
    const json stored = json::parse(get.column_text(0), nullptr, false);
    if (stored != shape)
      throw InputError(fmt::format("{}: written for GPU types {} and job types {}, not this matrix's {} and {}: give the "
                                   "throughputs it was written with, or another --db",
                                   path, dump(stored.value("gpu_types", json())), dump(stored.value("job_types", json())),
                                   dump(shape["gpu_types"]), dump(shape["job_types"])));
  } else {
    Statement(db_, "INSERT INTO cluster_meta(key, value) VALUES('matrix', ?)").text(1, dump(shape)).run();
  }
}

void ClusterStore::put_job(int id, const json& job) {
  Statement(db_, "INSERT OR REPLACE INTO cluster_jobs(id, job) VALUES(?, ?)").integer(1, id).text(2, dump(job)).run();
}

void ClusterStore::add_job(int id, const json& job) {
  std::lock_guard lock(mutex_);
  put_job(id, job);
}

void ClusterStore::save_round(const std::vector<std::pair<int, json>>& jobs, const SchedulerState& state) {
  std::lock_guard lock(mutex_);
  db_.transaction([&] {
    for (const auto& [id, job] : jobs) put_job(id, job);
    Statement(db_, "INSERT OR REPLACE INTO cluster_meta(key, value) VALUES('state', ?)")
        .text(1, dump({{"clock_s", state.clock_s},
                       {"rounds", state.rounds},
                       {"steps_per_s", state.steps_per_s},
                       {"measurements", state.measurements}}))
        .run();
  });
}

std::vector<json> ClusterStore::load_jobs() const {
  std::lock_guard lock(mutex_);
  std::vector<json> jobs;
  Statement all(db_, "SELECT id, job FROM cluster_jobs ORDER BY id");
  while (all.step()) {
    if (all.column_integer(0) != static_cast<long long>(jobs.size()))
      throw InputError(fmt::format("{}: job {} missing (ids must be 0, 1, ...)", db_.path(), jobs.size()));
    json job = json::parse(all.column_text(1), nullptr, false);
    if (job.is_discarded()) throw InputError(fmt::format("{}: job {} is not valid JSON", db_.path(), jobs.size()));
    jobs.push_back(std::move(job));
  }
  return jobs;
}

SchedulerState ClusterStore::load_state() const {
  std::lock_guard lock(mutex_);
  SchedulerState state;
  Statement get(db_, "SELECT value FROM cluster_meta WHERE key = 'state'");
  if (!get.step()) return state;
  const json j = json::parse(get.column_text(0), nullptr, false);
  try {
    state.clock_s = j.at("clock_s").get<double>();
    state.rounds = j.at("rounds").get<int>();
    state.steps_per_s = j.at("steps_per_s").get<std::vector<std::vector<double>>>();
    state.measurements = j.at("measurements").get<std::vector<std::vector<int>>>();
  } catch (const json::exception& e) {
    throw InputError(fmt::format("{}: the scheduler's saved state is malformed: {}", db_.path(), e.what()));
  }
  return state;
}

}  // namespace perseus::cluster
