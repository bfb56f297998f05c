// perseus._perseus: the C++ library for Python. The solver (profile -> frontier -> plans),
// plan files and selection, the GPU backends, the frequency controller, the client with the
// training hooks, and an in-process server. Long calls (the solver, HTTP requests, hooks
// that wait at the server's barrier) release the GIL.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "perseus/client/frequency_controller.hpp"
#include "perseus/client/perseus_client.hpp"
#include "perseus/client/server_connection.hpp"
#include "perseus/gpu/emulated_gpu.hpp"
#include "perseus/gpu/nvml_backend.hpp"
#include "perseus/model/errors.hpp"
#include "perseus/plan/frontier_io.hpp"
#include "perseus/plan/plan_files.hpp"
#include "perseus/profile/profile.hpp"
#include "perseus/protocol/protocol.hpp"
#include "perseus/server/http_server.hpp"
#include "perseus/server/service.hpp"
#include "perseus/solver/exact_milp.hpp"
#include "perseus/solver/solve.hpp"

namespace py = pybind11;
using json = nlohmann::json;

namespace perseus::python {
namespace {

using GilRelease = py::call_guard<py::gil_scoped_release>;

// JSON crosses into Python as text and is read by the json module: values, never code.
py::object to_python(const json& value) {
  return py::module_::import("json").attr("loads")(value.dump(-1, ' ', false, json::error_handler_t::replace));
}
json from_python(const py::handle& value) {
  const std::string text = py::module_::import("json").attr("dumps")(value).cast<std::string>();
  return json::parse(text);
}

ScheduleSpec make_spec(const std::string& schedule, int stages, int microbatches, int chunks, bool data_load) {
  return ScheduleSpec{parse_schedule_kind(schedule), stages, microbatches, chunks, data_load};
}

// A solved frontier with everything needed to turn its points into plans and files.
struct SolvedFrontier {
  EnergyProblem problem;
  CrawlResult crawl;
  Frontier frontier;
  RunInfo info;
  std::vector<double> times;

  const FrontierPoint& point(std::size_t index) const {
    if (index >= frontier.points.size()) {
      throw py::index_error("frontier point " + std::to_string(index) + " of " +
                            std::to_string(frontier.points.size()));
    }
    return frontier.points[index];
  }
  Plan plan(std::size_t index) const { return make_plan(problem, point(index).option_choice()); }
};

PipelineFrequencies frequencies_of(const Plan& plan) {
  PipelineFrequencies out;
  for (const auto& stage : plan.stages) {
    auto& list = out.emplace_back();
    for (const PlannedInstruction& p : stage) list.emplace_back(std::string(to_string(p.instruction.kind)), p.frequency_mhz);
  }
  return out;
}

// A per-point figure of the frontier as a new float64 numpy array (a copy: writing to it
// leaves the frontier as it is).
template <typename Get>
py::array_t<double> per_point(const SolvedFrontier& f, Get get) {
  py::array_t<double> out(static_cast<py::ssize_t>(f.frontier.points.size()));
  double* data = out.mutable_data();
  for (const FrontierPoint& p : f.frontier.points) *data++ = get(p);
  return out;
}

py::dict figures(const MeasuredFigures& m) {
  py::dict d;
  d["time_s"] = m.time_s;
  d["energy_j"] = m.energy_j;
  d["computation_energy_j"] = m.computation_energy_j;
  d["blocking_energy_j"] = m.blocking_energy_j;
  return d;
}

// Frontier.exact's and StoredFrontier.exact's answer.
py::dict exact_dict(const EnergyProblem& problem, const ExactSolution& exact, std::size_t row, double deadline_s) {
  py::dict d = figures(exact.measured);
  d["point"] = row;
  d["deadline_s"] = deadline_s;
  d["energy_at_deadline_j"] = exact.energy_at_deadline_j;
  d["lower_bound_j"] = exact.lower_bound_j;
  d["improved"] = exact.improved;
  d["proven_optimal"] = exact.proven_optimal;
  d["seconds"] = exact.seconds;
  d["plan"] = frequencies_of(make_plan(problem, exact.choice));
  return d;
}

std::shared_ptr<SolvedFrontier> optimize(const Profile& profile, int microbatches, double p_blocking, double unit_time,
                                         const std::string& schedule, int chunks, bool data_load, bool refine,
                                         const std::string& coefficients, int stages, double certify_seconds,
                                         bool certify) {
  SolveRequest request;
  request.schedule = make_spec(schedule, stages, microbatches, chunks, data_load);
  request.options = {unit_time, p_blocking, {}};
  if (!coefficients.empty()) request.options.overrides = read_cost_overrides(coefficients);
  request.frontier.refine = refine;
  request.frontier.certify = certify;
  request.frontier.certify_for(certify_seconds);
  Solution solution = [&] {
    py::gil_scoped_release release;  // a long solve lets other Python threads run
    return solve(profile, request);
  }();
  RunInfo info{profile.source(), solution.schedule, solution.solve_seconds(), {}};
  for (const Warning& w : solution.warnings) info.warnings.push_back(w.message);
  std::vector<double> times;
  for (const FrontierPoint& p : solution.frontier.points) times.push_back(p.measured.time_s);
  return std::shared_ptr<SolvedFrontier>(new SolvedFrontier{std::move(solution.problem), std::move(solution.crawl),
                                                            std::move(solution.frontier), std::move(info),
                                                            std::move(times)});
}

// `perseus serve` in this process: a Service and its HTTP front end on a background thread.
class InProcessServer {
 public:
  InProcessServer(const std::string& scheduler, const std::string& scheduler_args, const std::string& host, int port,
                  const std::string& db, const std::string& token, bool straggler_only_token, double barrier_timeout_s,
                  double max_job_idle_time_s, std::size_t threads) {
    const json args = json::parse(scheduler_args, nullptr, false);
    if (args.is_discarded()) throw InputError("scheduler_args: not valid JSON: " + scheduler_args);
    server::ServiceOptions options;
    options.scheduler = server::parse_scheduler_config(scheduler, args);
    options.db_path = db;
    options.token = token;
    options.token_scope = straggler_only_token ? server::TokenScope::kStragglerOnly : server::TokenScope::kAllChanges;
    options.barrier_timeout_s = barrier_timeout_s;
    options.max_job_idle_s = max_job_idle_time_s;
    service_ = std::make_unique<server::Service>(std::move(options));
    server::HttpOptions http;
    http.host = host;
    http.port = port;
    http.max_threads = threads;
    http_ = std::make_unique<server::HttpServer>(*service_, http);
    http_->start();
    host_ = host;
  }
  ~InProcessServer() { stop(); }
  int port() const { return http_ ? http_->port() : 0; }
  std::string url() const { return "http://" + host_ + ":" + std::to_string(port()); }
  bool wait_until_idle(double seconds) {
    return service_->wait_until_idle(std::chrono::milliseconds(static_cast<long long>(seconds * 1000)));
  }
  void stop() {
    if (http_) http_->stop();
    if (service_) service_->shutdown();
  }

 private:
  std::unique_ptr<server::Service> service_;
  std::unique_ptr<server::HttpServer> http_;
  std::string host_;
};

std::optional<client::PipelineLayout> layout_from(const std::optional<std::string>& schedule,
                                                  std::optional<int> microbatches, int chunks) {
  if (!microbatches) {
    if (schedule) throw InputError("schedule needs microbatches");
    return std::nullopt;
  }
  return client::PipelineLayout{schedule ? parse_schedule_kind(*schedule) : ScheduleKind::k1F1B, *microbatches, chunks};
}

client::ProfilingResult result_from(const py::dict& d) {
  return protocol::parse_profiling_result(from_python(d));
}

}  // namespace
}  // namespace perseus::python

PYBIND11_MODULE(_perseus, m) {
  using namespace perseus;
  using namespace perseus::python;
  m.doc() = "perseus: energy scheduling for pipeline-parallel training (the C++ library)";

  // ---- errors ----
  static py::exception<InputError> input_error(m, "InputError", PyExc_ValueError);
  static py::exception<SolveError> solve_error(m, "SolveError", PyExc_RuntimeError);
  static py::exception<GpuError> gpu_error(m, "GpuError", PyExc_RuntimeError);
  static py::exception<client::ServerError> server_error(m, "ServerError", PyExc_RuntimeError);
  static py::exception<client::ClientError> client_error(m, "ClientError", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const client::ServerError& e) {
      py::object error = py::handle(server_error.ptr())(e.what());
      error.attr("status") = e.status();
      error.attr("detail") = e.detail();
      PyErr_SetObject(server_error.ptr(), error.ptr());
    } catch (const client::ClientError& e) {
      PyErr_SetString(client_error.ptr(), e.what());
    } catch (const InputError& e) {
      PyErr_SetString(input_error.ptr(), e.what());
    } catch (const SolveError& e) {
      PyErr_SetString(solve_error.ptr(), e.what());
    } catch (const GpuError& e) {
      PyErr_SetString(gpu_error.ptr(), e.what());
    } catch (const protocol::ApiError& e) {
      PyErr_SetString(input_error.ptr(), e.what());
    }
  });

  // ---- profiles ----
  py::class_<Profile, std::shared_ptr<Profile>>(m, "Profile", "A measured profile (stage,instruction,frequency,time,energy)")
      .def_static("read_csv", [](const std::filesystem::path& path) { return Profile::read_csv(path); }, py::arg("path"),
                  "Reads a profile CSV; InputError names file, line and column of bad input.")
      .def_static("parse_csv", [](const std::string& text, const std::string& source) { return Profile::parse_csv(text, source); },
                  py::arg("text"), py::arg("source") = "<string>")
      .def_property_readonly("source", &Profile::source)
      .def_property_readonly("num_stages", &Profile::num_stages)
      .def("measurements",
           [](const Profile& p) {
             py::list rows;
             for (const OperationProfile& op : p.operations()) {
               for (const Measurement& m : op.measurements) {
                 rows.append(py::make_tuple(op.stage, std::string(to_string(op.kind)), m.frequency_mhz, m.time_s,
                                            m.energy_j, m.knob));
               }
             }
             return rows;
           },
           "Every row as (stage, instruction, frequency_mhz, time_s, energy_j, knob).")
      .def("__repr__", [](const Profile& p) {
        return "<perseus.Profile " + p.source() + ": " + std::to_string(p.num_stages()) + " stages>";
      });

  // ---- the solver ----
  py::class_<SolvedFrontier, std::shared_ptr<SolvedFrontier>>(
      m, "Frontier", "The iteration time-energy Pareto frontier: points fastest (T_min) first, each a plan")
      .def("__len__", [](const SolvedFrontier& f) { return f.frontier.points.size(); })
      .def("__repr__",
           [](const SolvedFrontier& f) {
             const FrontierPoint &fastest = f.frontier.points.front(), &slowest = f.frontier.points.back();
             return fmt::format("<perseus.Frontier: {} points, T_min {:.4f} s ({:.1f} J), T* {:.4f} s ({:.1f} J)>",
                                f.frontier.points.size(), fastest.measured.time_s, fastest.measured.energy_j,
                                slowest.measured.time_s, slowest.measured.energy_j);
           })
      .def_property_readonly("times",
                             [](const SolvedFrontier& f) {
                               py::array_t<double> out(static_cast<py::ssize_t>(f.times.size()));
                               std::copy(f.times.begin(), f.times.end(), out.mutable_data());
                               return out;
                             },
                             "Iteration time of each point, s (a float64 numpy array, fastest first)")
      .def_property_readonly("energies",
                             [](const SolvedFrontier& f) {
                               return per_point(f, [](const FrontierPoint& p) { return p.measured.energy_j; });
                             },
                             "Iteration energy of each point (computation + blocking), J (a float64 numpy array)")
      .def_property_readonly("effective_energies",
                             [](const SolvedFrontier& f) {
                               return per_point(f, [](const FrontierPoint& p) { return p.effective_energy_j; });
                             },
                             "Energy of each point less p_blocking x stages x time, J (a float64 numpy array)")
      .def_property_readonly("lower_bounds",
                             [](const SolvedFrontier& f) {
                               return per_point(f, [](const FrontierPoint& p) {
                                 return p.lower_bound_j.value_or(std::numeric_limits<double>::quiet_NaN());
                               });
                             },
                             "A proven lower bound on the energy of any plan at each point's time, J (NaN where "
                             "none: refine=False)")
      .def_property_readonly("t_min", [](const SolvedFrontier& f) { return f.times.front(); })
      .def_property_readonly("t_star", [](const SolvedFrontier& f) { return f.times.back(); })
      .def_property_readonly("all_max", [](const SolvedFrontier& f) { return figures(f.frontier.all_max); },
                             "Every instruction at its fastest option")
      .def_property_readonly("stages", [](const SolvedFrontier& f) { return f.problem.num_gpus(); })
      .def_property_readonly("p_blocking", [](const SolvedFrontier& f) { return f.problem.p_blocking; })
      .def_property_readonly("warnings", [](const SolvedFrontier& f) { return f.info.warnings; })
      .def_property_readonly("solve_seconds", [](const SolvedFrontier& f) { return f.info.solve_seconds; })
      .def("point",
           [](const SolvedFrontier& f, std::size_t i) {
             const FrontierPoint& p = f.point(i);
             py::dict d = figures(p.measured);
             d["effective_energy_j"] = p.effective_energy_j;
             d["crawl_step"] = p.crawl_step;
             return d;
           },
           py::arg("index"))
      .def("plan", [](const SolvedFrontier& f, std::size_t i) { return frequencies_of(f.plan(i)); }, py::arg("index"),
           "Per stage, the (instruction, MHz) list in execution order")
      .def("plan_json", [](const SolvedFrontier& f, std::size_t i) { return to_python(plan_to_json(f.plan(i))); },
           py::arg("index"), "The plan as perseus.plan/1 JSON (a dict)")
      .def("freqs_pipeline",
           [](const SolvedFrontier& f, std::size_t i) { return plan_to_freqs_pipeline(f.plan(i), {}); },
           py::arg("index"), "The plan in the freqs_pipeline_%05d.py format existing deployments load")
      .def("select",
           [](const SolvedFrontier& f, double deadline_s) { return select_for_deadline(f.times, deadline_s); },
           py::arg("deadline_s"),
           "Index of the plan for T_opt = min(T*, deadline): the slowest point no slower than it; None when even "
           "T_min is slower")
      .def("exact",
           [](const SolvedFrontier& f, double deadline_s, double seconds) {
             const std::optional<std::size_t> row = select_for_deadline(f.times, deadline_s);
             if (!row) throw InputError(fmt::format("no plan finishes within {} s: the fastest takes {} s", deadline_s, f.times.front()));
             const double deadline = std::max(deadline_s, f.times[*row]);
             std::optional<ExactSolution> exact;
             {
               py::gil_scoped_release released;
               exact = solve_exact(f.problem, deadline, {.time_limit_s = seconds, .start = f.point(*row).option_choice()});
             }
             if (!exact) throw SolveError(fmt::format("the exact MILP found no plan within {} s", deadline));
             return exact_dict(f.problem, *exact, *row, deadline);
           },
           py::arg("deadline_s"), py::arg("seconds") = 10.0,
           "The plan for T_opt = min(T*, deadline) improved by the exact MILP (COIN-OR CBC) within `seconds`, started "
           "from the frontier's: a dict of its figures, energy_at_deadline_j (blocking until the deadline), the "
           "proven lower_bound_j there (NaN if CBC had none in time), improved, proven_optimal and its plan")
      .def("energy_at",
           [](const SolvedFrontier& f, std::size_t i, double iteration_s) {
             return energy_at(f.problem, f.point(i), iteration_s);
           },
           py::arg("index"), py::arg("iteration_s"),
           "Energy of point `index` in an iteration stretched to `iteration_s` (waiting for a straggler)")
      .def("write",
           [](const SolvedFrontier& f, const std::filesystem::path& directory, bool force, std::size_t max_plans,
              const std::string& py_files, bool crawl_csv) {
             OutputOptions options;
             options.force = force;
             options.crawl_csv = crawl_csv;
             options.max_plans = max_plans;
             options.py = parse_py_files(py_files, "py");
             write_frontier_directory(directory, f.problem, f.crawl, f.frontier, f.info, options);
           },
           py::arg("directory"), py::arg("force") = false, py::arg("max_plans") = 0, py::arg("py") = "some",
           py::arg("crawl_csv") = false, GilRelease(),
           "Writes frontier.csv, plans.bin (every plan), summary.json, freqs_pipeline files for `py` of the "
           "plans (and crawl.csv with crawl_csv), as `perseus optimize --out` does")
      .def("summary",
           [](const SolvedFrontier& f) { return to_python(make_summary(f.problem, f.crawl, f.frontier, f.info)); });

  m.def("optimize", &optimize, py::arg("profile"), py::arg("microbatches"), py::arg("p_blocking"),
        py::arg("unit_time") = kDefaultUnitTime, py::arg("schedule") = "1f1b", py::arg("chunks") = 1, py::arg("data_load") = false,
        py::arg("refine") = true, py::arg("coefficients") = "", py::arg("stages") = 0,
        py::arg("certify_seconds") = 0.0, py::arg("certify") = true,  // releases the GIL for the solve itself
        "Computes the frontier of `profile` for a pipeline schedule (stages: the profile's unless given); "
        "certify_seconds: seconds the frontier may take after the crawl, beyond the default, for tighter lower "
        "bounds (lower_bounds) and cheaper plans (the default effort's frontier is built first and kept where "
        "better: no plan dearer, no bound looser than the default's at any deadline). certify=False skips the certification (faster; "
        "bounds only from the LP solves made anyway); certify_seconds > 0 implies it.");

  m.def("read_frontier",
        [](const std::filesystem::path& directory) {
          const FrontierIndex index = read_frontier_directory(directory);
          py::list entries;
          for (const FrontierEntry& e : index.entries) {
            py::dict d;
            d["time_s"] = e.time_s;
            d["energy_j"] = e.energy_j;
            d["effective_energy_j"] = e.effective_energy_j;
            d["plan"] = e.plan ? py::cast(*e.plan) : py::none();
            d["plan_file"] = e.plan_file;
            d["json_file"] = e.json_file;
            entries.append(d);
          }
          return entries;
        },
        py::arg("directory"), "The points of a frontier directory (frontier.csv), fastest first");

  // A frontier directory read back: its figures at once, each plan from plans.bin on demand.
  const auto stored_figure = [](double FrontierEntry::*field) {
    return [field](const FrontierIndex& index) {
      py::array_t<double> out(static_cast<py::ssize_t>(index.entries.size()));
      auto view = out.mutable_unchecked<1>();
      for (std::size_t i = 0; i < index.entries.size(); ++i) view(static_cast<py::ssize_t>(i)) = index.entries[i].*field;
      return out;
    };
  };
  const auto stored_row = [](const FrontierIndex& index, std::size_t i) {
    if (i >= index.entries.size()) {
      throw py::index_error("frontier point " + std::to_string(i) + " of " + std::to_string(index.entries.size()));
    }
    return i;
  };
  py::class_<FrontierIndex>(m, "StoredFrontier",
                            "A directory written by `perseus optimize` (or Frontier.write): frontier.csv and "
                            "summary.json read at once, each plan read from plans.bin only when asked for")
      .def("__len__", [](const FrontierIndex& index) { return index.entries.size(); })
      .def("__repr__",
           [](const FrontierIndex& index) {
             const FrontierEntry &fastest = index.entries.front(), &slowest = index.entries.back();
             return fmt::format("<perseus.StoredFrontier {}: {} points, T_min {:.4f} s ({:.1f} J), T* {:.4f} s ({:.1f} J)>",
                                index.directory.string(), index.entries.size(), fastest.time_s, fastest.energy_j,
                                slowest.time_s, slowest.energy_j);
           })
      .def_property_readonly("directory", [](const FrontierIndex& index) { return index.directory; })
      .def_property_readonly("times", stored_figure(&FrontierEntry::time_s),
                             "Iteration time of each point, s (a float64 numpy array, fastest first)")
      .def_property_readonly("energies", stored_figure(&FrontierEntry::energy_j),
                             "Iteration energy of each point, J (a float64 numpy array)")
      .def_property_readonly("effective_energies", stored_figure(&FrontierEntry::effective_energy_j),
                             "Energy of each point less p_blocking x stages x time, J (a float64 numpy array)")
      .def_property_readonly("lower_bounds", stored_figure(&FrontierEntry::lower_bound_j),
                             "A proven lower bound on the energy of any plan at each point's time, J (NaN where none)")
      .def_property_readonly("t_min", [](const FrontierIndex& index) { return index.entries.front().time_s; })
      .def_property_readonly("t_star", [](const FrontierIndex& index) { return index.entries.back().time_s; })
      .def_property_readonly("summary", [](const FrontierIndex& index) { return to_python(index.summary); })
      .def("has_plan", [=](const FrontierIndex& index, std::size_t i) { return index.has_plan(stored_row(index, i)); },
           py::arg("index"), "False for a point thinned out with --max-plans")
      .def("plan", [=](const FrontierIndex& index, std::size_t i) { return index.frequencies(stored_row(index, i)); },
           py::arg("index"), "Per stage, the (instruction, MHz) list in execution order (one read of plans.bin)")
      .def("plan_json",
           [=](const FrontierIndex& index, std::size_t i) { return to_python(export_plan_json(index, stored_row(index, i))); },
           py::arg("index"), "The plan as perseus.plan/1 JSON (a dict)")
      .def("freqs_pipeline",
           [=](const FrontierIndex& index, std::size_t i) { return export_freqs_pipeline(index, stored_row(index, i)); },
           py::arg("index"), "The plan in the freqs_pipeline_%05d.py format existing deployments load")
      .def("select", [](const FrontierIndex& index, double deadline_s) { return select_entry(index, deadline_s); },
           py::arg("deadline_s"),
           "Index of the plan for T_opt = min(T*, deadline) among the points with a plan; None when even T_min "
           "is slower")
      .def("exact",
           [](const FrontierIndex& index, double deadline_s, double seconds, const std::string& profile) {
             const std::size_t row = require_entry(index, deadline_s);
             const double deadline = std::max(deadline_s, index.entries[row].time_s);
             std::optional<StoredExactSolution> exact;
             {
               py::gil_scoped_release released;
               exact = solve_exact_from(index, row, deadline, seconds, profile);
             }
             return exact_dict(exact->problem, exact->solution, row, deadline);
           },
           py::arg("deadline_s"), py::arg("seconds") = 10.0, py::arg("profile") = "",
           "As Frontier.exact, on the problem rebuilt from the directory's summary.json (the profile by the path "
           "it records, or `profile`), as `perseus select --exact`");
  m.def("load_frontier", &read_frontier_directory, py::arg("directory"),
        "Opens a frontier directory (a StoredFrontier): plans are read from plans.bin one at a time, on demand; "
        "directories written before the store read too");
  m.def("select",
        [](const std::filesystem::path& directory, double deadline_s) {
          return select_entry(read_frontier_directory(directory), deadline_s);
        },
        py::arg("directory"), py::arg("deadline_s"),
        "Index (into read_frontier) of the plan for T_opt = min(T*, deadline), or None");
  m.def("parse_freqs_pipeline", &parse_freqs_pipeline, py::arg("text"), py::arg("source") = "<string>",
        "Reads a freqs_pipeline plan as data (never evaluated)");
  m.def("read_freqs_pipeline", &read_freqs_pipeline, py::arg("path"));

  // ---- GPUs ----
  py::class_<GpuBackend, std::shared_ptr<GpuBackend>>(m, "Gpu", "A GPU backend: clocks, clock locks, energy counter")
      .def_property_readonly("device_count", &GpuBackend::device_count)
      .def("name", &GpuBackend::name, py::arg("device") = 0)
      .def("supported_graphics_clocks", &GpuBackend::supported_graphics_clocks, py::arg("device") = 0)
      .def("max_memory_clock", &GpuBackend::max_memory_clock, py::arg("device") = 0)
      .def("set_locked_graphics_clocks", &GpuBackend::set_locked_graphics_clocks, py::arg("device"), py::arg("min_mhz"),
           py::arg("max_mhz"))
      .def("reset_locked_graphics_clocks", &GpuBackend::reset_locked_graphics_clocks, py::arg("device") = 0)
      .def("total_energy_mj", &GpuBackend::total_energy_mj, py::arg("device") = 0)
      .def("power_mw", &GpuBackend::power_mw, py::arg("device") = 0);
  py::class_<NvmlBackend, GpuBackend, std::shared_ptr<NvmlBackend>>(m, "NvmlGpu",
                                                                     "NVML, loaded at run time (libnvidia-ml.so.1)")
      .def(py::init([](const std::optional<std::string>& library) {
             return std::make_shared<NvmlBackend>(library.value_or(NvmlBackend::default_library_path()));
           }),
           py::arg("library") = py::none())
      .def_property_readonly("library_path", &NvmlBackend::library_path);
  py::class_<EmulatedGpu, GpuBackend, std::shared_ptr<EmulatedGpu>>(
      m, "EmulatedGpu", "A GPU that runs instructions with a profile's measured time and energy, on virtual time")
      .def(py::init([](const Profile& profile, double p_blocking) {
             return std::make_shared<EmulatedGpu>(emulated_gpu_spec_from_profile(profile, p_blocking));
           }),
           py::arg("profile"), py::arg("p_blocking"))
      .def("run",
           [](EmulatedGpu& gpu, const std::string& instruction, int stage) {
             const auto kind = parse_instruction_kind(instruction);
             if (!kind) throw InputError("unknown instruction '" + instruction + "'");
             const EmulatedCost cost = gpu.run(*kind, stage);
             return py::make_tuple(cost.time_s, cost.energy_j);
           },
           py::arg("instruction"), py::arg("stage"), "Runs one instruction at the current clock: (time_s, energy_j)")
      .def("idle", &EmulatedGpu::idle, py::arg("seconds"))
      .def("set_slowdown", &EmulatedGpu::set_slowdown, py::arg("factor"))
      .def_property_readonly("now_s", &EmulatedGpu::now_s)
      .def_property_readonly("energy_j", &EmulatedGpu::energy_j)
      .def_property_readonly("graphics_clock_mhz", &EmulatedGpu::graphics_clock_mhz);

  py::class_<FrequencyController>(m, "FrequencyController",
                                  "Locks the graphics clock on its own thread; resets clocks on exit or crash")
      .def(py::init<GpuBackend&, int>(), py::arg("gpu"), py::arg("device") = 0, py::keep_alive<1, 2>())
      .def("set_frequency", &FrequencyController::set_frequency, py::arg("mhz"))
      .def("wait_idle", &FrequencyController::wait_idle, GilRelease())
      .def_property_readonly("current_frequency", &FrequencyController::current_frequency);

  // ---- the client ----
  py::class_<client::ServerConnection>(m, "ServerConnection", "The perseus server's HTTP/JSON routes")
      .def(py::init([](const std::string& url, const std::string& token, double connect_timeout_s, double read_timeout_s,
                       double retry_for_s) {
             return std::make_unique<client::ServerConnection>(
                 client::ConnectionOptions{url, token, connect_timeout_s, read_timeout_s, retry_for_s});
           }),
           py::arg("url") = "http://127.0.0.1:7787", py::arg("token") = "", py::arg("connect_timeout_s") = 5.0,
           py::arg("read_timeout_s") = 900.0, py::arg("retry_for_s") = 60.0)
      .def("register_job",
           [](client::ServerConnection& c, int pp, int dp, int tp, int world_size,
              const std::optional<std::string>& metadata, const std::optional<std::string>& schedule,
              std::optional<int> microbatches, int chunks) {
             client::JobInfo info;
             info.pp_degree = pp;
             info.dp_degree = dp;
             info.tp_degree = tp;
             info.world_size = world_size;
             info.job_metadata = metadata;
             info.layout = layout_from(schedule, microbatches, chunks);
             py::gil_scoped_release release;
             return c.register_job(info);
           },
           py::arg("pp_degree"), py::arg("dp_degree"), py::arg("tp_degree"), py::arg("world_size"),
           py::arg("job_metadata") = py::none(), py::arg("schedule") = py::none(), py::arg("microbatches") = py::none(),
           py::arg("chunks") = 1)
      .def("register_rank",
           [](client::ServerConnection& c, const std::string& job_id, int rank, int dp_rank, int pp_rank, int tp_rank,
              const std::vector<int>& frequencies) {
             py::gil_scoped_release release;
             c.register_rank(job_id, client::RankInfo{rank, dp_rank, pp_rank, tp_rank, frequencies});
           },
           py::arg("job_id"), py::arg("rank"), py::arg("dp_rank"), py::arg("pp_rank"), py::arg("tp_rank"),
           py::arg("available_frequencies"))
      .def("get_schedule", &client::ServerConnection::get_schedule, py::arg("job_id"), py::arg("rank"),
           py::arg("round") = py::none(), GilRelease())
      .def("post_result",
           [](client::ServerConnection& c, const std::string& job_id, const py::dict& result) {
             const client::ProfilingResult parsed = result_from(result);
             py::gil_scoped_release release;
             c.post_result(job_id, parsed);
           },
           py::arg("job_id"), py::arg("result"))
      .def("upload_profile",
           [](client::ServerConnection& c, const std::string& job_id, const std::string& csv, double p_blocking,
              double unit_time, const std::optional<std::string>& schedule, std::optional<int> microbatches, int chunks) {
             const auto layout = layout_from(schedule, microbatches, chunks);
             json answer;
             {
               py::gil_scoped_release release;
               answer = c.upload_profile(job_id, csv, p_blocking, unit_time, layout);
             }
             return to_python(answer);
           },
           py::arg("job_id"), py::arg("csv"), py::arg("p_blocking"), py::arg("unit_time") = 0.0,
           py::arg("schedule") = py::none(), py::arg("microbatches") = py::none(), py::arg("chunks") = 1)
      .def("announce_straggler",
           [](client::ServerConnection& c, int id, double degree, double delay_s, const std::optional<std::string>& job_id) {
             json answer;
             {
               py::gil_scoped_release release;
               answer = c.announce_straggler(client::StragglerNotice{job_id, id, delay_s, degree});
             }
             return to_python(answer);
           },
           py::arg("id"), py::arg("degree"), py::arg("delay_s") = 0.0, py::arg("job_id") = py::none(),
           "POST /straggler: accelerator `id` runs `degree` times slower from `delay_s` on (degree 1: recovered)")
      .def("get_json",
           [](client::ServerConnection& c, const std::string& path) {
             json answer;
             {
               py::gil_scoped_release release;
               answer = c.get_json(path);
             }
             return to_python(answer);
           },
           py::arg("path"))
      .def("close", &client::ServerConnection::close, "Closes the keep-alive connection");

  py::class_<client::PerseusClient>(m, "Client",
                                    "Registers the job and rank, fetches schedules, sets clocks per instruction, "
                                    "and reports measurements (the C++ client)")
      .def(py::init([](std::shared_ptr<GpuBackend> gpu, const std::string& server_url, int rank, int dp_rank,
                       int pp_rank, int tp_rank, int dp_degree, int pp_degree, int tp_degree, int world_size,
                       const std::string& job_id, const std::optional<std::string>& job_metadata, int device,
                       const std::string& token, bool control_clocks, int steps_per_round, bool measure_energy,
                       std::function<void()> synchronize, std::function<double()> clock,
                       const std::optional<std::string>& schedule, std::optional<int> microbatches, int chunks,
                       double retry_for_s, double read_timeout_s) {
             client::ClientOptions o;
             o.connection = client::ConnectionOptions{server_url, token, 5.0, read_timeout_s, retry_for_s};
             o.rank = rank;
             o.dp_rank = dp_rank;
             o.pp_rank = pp_rank;
             o.tp_rank = tp_rank;
             o.dp_degree = dp_degree;
             o.pp_degree = pp_degree;
             o.tp_degree = tp_degree;
             o.world_size = world_size;
             o.job_id = job_id;
             o.job_metadata = job_metadata;
             o.device = device;
             o.control_clocks = control_clocks;
             o.steps_per_round = steps_per_round;
             o.measure_energy = measure_energy;
             o.synchronize = std::move(synchronize);
             o.clock = std::move(clock);
             o.layout = layout_from(schedule, microbatches, chunks);
             py::gil_scoped_release release;
             return std::make_unique<client::PerseusClient>(std::move(o), *gpu);
           }),
           py::arg("gpu"), py::arg("server_url"), py::arg("rank"), py::arg("dp_rank"), py::arg("pp_rank"),
           py::arg("tp_rank"), py::arg("dp_degree"), py::arg("pp_degree"), py::arg("tp_degree"),
           py::arg("world_size"), py::arg("job_id") = "", py::arg("job_metadata") = py::none(), py::arg("device") = 0,
           py::arg("token") = "", py::arg("control_clocks") = true, py::arg("steps_per_round") = 1,
           py::arg("measure_energy") = true, py::arg("synchronize") = py::none(), py::arg("clock") = py::none(),
           py::arg("schedule") = py::none(), py::arg("microbatches") = py::none(), py::arg("chunks") = 1,
           py::arg("retry_for_s") = 60.0, py::arg("read_timeout_s") = 900.0, py::keep_alive<1, 2>())
      .def_property_readonly("job_id", &client::PerseusClient::job_id)
      .def("on_step_begin", &client::PerseusClient::on_step_begin, GilRelease())
      .def("on_instruction_begin", &client::PerseusClient::on_instruction_begin, py::arg("name"), GilRelease())
      .def("on_instruction_end", &client::PerseusClient::on_instruction_end, py::arg("name"), GilRelease())
      .def("on_step_end", &client::PerseusClient::on_step_end, GilRelease())
      .def_property_readonly("schedule", &client::PerseusClient::schedule)
      .def("wait_for_clock",
           [](client::PerseusClient& c) {
             if (c.controller()) c.controller()->wait_idle();
           },
           GilRelease(), "Waits until the clock asked for has been set (emulation and tests only)")
      .def_property_readonly("current_frequency",
                             [](client::PerseusClient& c) -> std::optional<int> {
                               return c.controller() ? c.controller()->current_frequency() : std::nullopt;
                             })
      .def("stats",
           [](const client::PerseusClient& c) {
             const client::ClientStats s = c.stats();
             py::dict d;
             d["steps"] = s.steps;
             d["rounds"] = s.rounds;
             d["results_posted"] = s.results_posted;
             d["instructions"] = s.instructions;
             d["frequency_requests"] = s.frequency_requests;
             d["energy_error"] = s.energy_error;
             return d;
           })
      .def("pending_result", [](const client::PerseusClient& c) { return to_python(protocol::to_json(c.pending_result())); })
      .def("close", &client::PerseusClient::close, GilRelease());

  // ---- the server, in this process ----
  py::class_<InProcessServer>(m, "Server", "A perseus server running in this process (as `perseus serve`)")
      .def(py::init<const std::string&, const std::string&, const std::string&, int, const std::string&,
                    const std::string&, bool, double, double, std::size_t>(),
           py::arg("scheduler") = "Frontier", py::arg("scheduler_args") = "{}", py::arg("host") = "127.0.0.1",
           py::arg("port") = 0, py::arg("db") = ":memory:", py::arg("token") = "",
           py::arg("straggler_only_token") = false, py::arg("barrier_timeout_s") = 0.0,
           py::arg("max_job_idle_time_s") = 7 * 24 * 3600.0, py::arg("threads") = server::HttpOptions{}.max_threads,
           GilRelease())
      .def_property_readonly("port", &InProcessServer::port)
      .def_property_readonly("url", &InProcessServer::url)
      .def("wait_until_idle", &InProcessServer::wait_until_idle, py::arg("timeout_s") = 60.0, GilRelease(),
           "Waits until no frontier computation is queued or running")
      .def("stop", &InProcessServer::stop, GilRelease(),
           "Stops serving: closes every connection, parked requests included.");
}
