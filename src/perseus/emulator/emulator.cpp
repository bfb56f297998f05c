#include "perseus/emulator/emulator.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "perseus/model/errors.hpp"
#include "perseus/model/limits.hpp"

namespace perseus {

EnergySplit& EnergySplit::operator+=(const EnergySplit& other) {
  computation_j += other.computation_j;
  intrinsic_blocking_j += other.intrinsic_blocking_j;
  extrinsic_blocking_j += other.extrinsic_blocking_j;
  allreduce_j += other.allreduce_j;
  overhead_j += other.overhead_j;
  return *this;
}

std::span<const ExecutedInstruction> EmulationResult::device_timeline(int pipeline, int stage) const {
  const std::size_t device = static_cast<std::size_t>(pipeline) * stages + stage;
  return {timeline.data() + device_begin[device], timeline.data() + device_begin[device + 1]};
}

bool EmulationResult::has_detail(int pipeline) const {
  return std::binary_search(detailed_pipelines.begin(), detailed_pipelines.end(), pipeline);
}

namespace {

void check_amount(double value, const std::string& what) {
  if (!std::isfinite(value) || value < 0.0) {
    throw InputError(fmt::format("{} must be a finite number >= 0, not {}", what, value));
  }
}

void check_link(const LinkSpec& link, const std::string& what) {
  check_amount(link.latency_s, what + " latency");
  check_amount(link.bandwidth_bytes_per_s, what + " bandwidth");
}

void check_plan(const EnergyProblem& problem, const ExecutionPlan& plan, const char* what) {
  const std::size_t n = problem.dag.num_nodes();
  if (plan.time_s.size() != n || plan.energy_j.size() != n || plan.frequency_mhz.size() != n) {
    throw InputError(fmt::format("the {} has {} entries but the schedule has {} instructions "
                                 "(a plan for a different schedule?)",
                                 what, plan.time_s.size(), n));
  }
  if (!plan.clocks || plan.clocks->num_operations() != problem.operations.size()) {
    throw InputError(fmt::format("the {} has no frequency table for this problem's operations", what));
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(plan.time_s[i]) || plan.time_s[i] < 0.0 || !std::isfinite(plan.energy_j[i])) {
      throw InputError(fmt::format("the {} gives instruction {} of stage {} a time of {} s and an energy of {} J",
                                   what, label(problem.dag.instruction(static_cast<Dag::NodeId>(i))),
                                   problem.dag.instruction(static_cast<Dag::NodeId>(i)).stage, plan.time_s[i],
                                   plan.energy_j[i]));
    }
  }
}

void check_config(const EnergyProblem& problem, const EmulationConfig& config) {
  const int stages = problem.dag.num_stages();
  if (config.data_parallel < 1) throw InputError(fmt::format("data parallelism must be >= 1, not {}", config.data_parallel));
  if (static_cast<std::int64_t>(config.data_parallel) * stages > limits::kMaxEmulatedDevices) {
    throw InputError(fmt::format("{} pipelines of {} stages are {} devices, more than the {} the emulator takes",
                                 config.data_parallel, stages, static_cast<std::int64_t>(config.data_parallel) * stages,
                                 limits::kMaxEmulatedDevices));
  }
  if (config.tensor_parallel < 1 || config.tensor_parallel > limits::kMaxTensorParallel) {
    throw InputError(fmt::format("tensor parallelism must be 1..{}, not {}", limits::kMaxTensorParallel,
                                 config.tensor_parallel));
  }
  check_amount(problem.p_blocking, "p_blocking");
  check_amount(config.switch_latency_s, "the frequency switching latency");
  check_amount(config.switching_warning_fraction, "the switching warning threshold");
  check_link(config.p2p, "the point-to-point link");
  for (const auto& [pair, link] : config.p2p_links) {
    const auto [from, to] = pair;
    if (from < 0 || from >= stages || to < 0 || to >= stages || from == to) {
      throw InputError(fmt::format("a link from stage {} to stage {} does not exist in a pipeline of {} stages",
                                   from, to, stages));
    }
    check_link(link, fmt::format("the link from stage {} to stage {}", from, to));
  }
  check_amount(config.activation_bytes, "the activation size");
  check_amount(config.gradient_bytes, "the gradient size");
  check_link(config.allreduce, "the all-reduce link");
  check_amount(config.allreduce_bytes, "the all-reduce size");
  std::set<int> seen;
  for (const Straggler& s : config.stragglers) {
    if (s.pipeline < 0 || s.pipeline >= config.data_parallel) {
      throw InputError(fmt::format("straggler pipeline {} does not exist (there are {} pipelines)", s.pipeline,
                                   config.data_parallel));
    }
    if (!seen.insert(s.pipeline).second) throw InputError(fmt::format("pipeline {} is listed as a straggler twice", s.pipeline));
    // Bounded as the server bounds a straggler notice: beyond them no figure would be finite.
    if (!std::isfinite(s.slowdown) || s.slowdown < 1.0 || s.slowdown > 1000.0) {
      throw InputError(fmt::format("straggler pipeline {}: the slowdown factor must be 1..1000, not {:g}", s.pipeline,
                                   s.slowdown));
    }
    check_amount(s.delay_s, fmt::format("straggler pipeline {}'s delay", s.pipeline));
    if (s.delay_s > 365.0 * 24 * 3600) {
      throw InputError(fmt::format("straggler pipeline {}'s delay: at most a year, not {:g} s", s.pipeline, s.delay_s));
    }
  }
  const IterationOverheads& o = config.overheads;
  check_amount(o.first_stage_load_s, "the first stage's data loading time");
  check_amount(o.last_stage_load_s, "the last stage's data loading time");
  check_amount(o.optimizer_step_s, "the optimizer step's time");
  check_amount(o.between_iterations_s, "the time between iterations");
  check_amount(config.instruction_noise, "the instruction noise");
  if (config.instruction_noise > 0.3) {
    throw InputError(fmt::format("the instruction noise is a relative standard deviation of at most 0.3, not {:g}",
                                 config.instruction_noise));
  }
  check_amount(config.power_sample_s, "the power sampling interval");
  if (!std::isfinite(o.optimizer_power_w)) throw InputError("the optimizer step's power must be finite");
  if (o.first_stage_load_s > 0.0 || o.last_stage_load_s > 0.0) {
    for (std::size_t n = 0; n < problem.dag.num_nodes(); ++n) {
      if (problem.dag.instruction(static_cast<Dag::NodeId>(n)).kind == InstructionKind::kLoad) {
        throw InputError("the schedule already has load instructions (--data-load): give data loading either as "
                         "profiled load instructions or as a loading time per microbatch, not both");
      }
    }
  }
  for (int p : config.detail_pipelines) {
    if (p < 0 || p >= config.data_parallel) {
      throw InputError(fmt::format("pipeline {} cannot keep its timeline: it does not exist (there are {} pipelines)",
                                   p, config.data_parallel));
    }
  }
}

// splitmix64: a counter-based generator, so noise is a pure function of (seed, pipeline, node).
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// EmulationConfig::instruction_noise's factor: 1 + sigma z, z standard normal (Box-Muller) cut at +-3.
double noise_factor(double sigma, std::uint64_t seed, std::int32_t pipeline, Dag::NodeId node) {
  if (sigma == 0.0) return 1.0;
  const std::uint64_t a = mix(seed ^ mix((static_cast<std::uint64_t>(pipeline) << 32) | static_cast<std::uint32_t>(node)));
  const std::uint64_t b = mix(a);
  const double u1 = (static_cast<double>(a >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
  const double u2 = static_cast<double>(b >> 11) * 0x1.0p-53;
  const double z = std::clamp(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2), -3.0, 3.0);
  return std::max(0.05, 1.0 + sigma * z);
}

// The cluster's energy in samples of a fixed width, for EmulationResult::power_w. A constant
// power over an interval adds its energy to the two samples at its ends and its power, through a
// difference array, to those in between: O(1) per interval.
class PowerSamples {
 public:
  explicit PowerSamples(double width) : width_(width) {}

  void add(double from, double to, double watts) {
    if (width_ <= 0.0 || !(to > from) || watts == 0.0) return;
    const std::size_t first = index(from), last = index(to);
    grow(last + 2);
    if (first == last) {
      energy_[first] += watts * (to - from);
      return;
    }
    energy_[first] += watts * (static_cast<double>(first + 1) * width_ - from);
    energy_[last] += watts * (to - static_cast<double>(last) * width_);
    if (last > first + 1) {
      full_[first + 1] += watts;
      full_[last] -= watts;
    }
  }

  // Average power in each sample of [0, end).
  std::vector<double> watts(double end) const {
    if (width_ <= 0.0 || end <= 0.0) return {};
    const std::size_t count = static_cast<std::size_t>(std::ceil(end / width_ - 1e-9));
    std::vector<double> out(count);
    double full = 0.0;
    for (std::size_t i = 0; i < count; ++i) {
      if (i < full_.size()) full += full_[i];
      const double duration = std::min(width_, end - static_cast<double>(i) * width_);
      const double energy = (i < energy_.size() ? energy_[i] : 0.0) + full * width_;
      out[i] = duration > 0.0 ? energy / duration : 0.0;
    }
    return out;
  }

 private:
  static constexpr std::size_t kMaxSamples = 10'000'000;
  std::size_t index(double t) const {
    const double i = std::floor(t / width_);
    if (i >= static_cast<double>(kMaxSamples)) {
      throw InputError(fmt::format("sampling power every {:g} s gives more than {} samples; sample less often",
                                   width_, kMaxSamples));
    }
    return static_cast<std::size_t>(i);
  }
  void grow(std::size_t size) {
    if (energy_.size() < size) {
      energy_.resize(size, 0.0);
      full_.resize(size, 0.0);
    }
  }
  double width_;
  std::vector<double> energy_;  // J in each sample from partly covered intervals
  std::vector<double> full_;    // difference array of the power of intervals covering samples whole
};

// What every pipeline shares: the DAG in flat arrays, per-node links and sizes.
struct Layout {
  int stages = 0;
  std::vector<std::int32_t> device;        // per node
  std::vector<std::int32_t> order;         // nodes by device, in execution order
  std::vector<std::int32_t> device_begin;  // S + 1 offsets into `order`
  std::vector<std::int32_t> pred_count;    // per node
  std::vector<std::int32_t> operation;     // per node
  std::vector<std::uint8_t> constant;      // per node: a constant-time operation
  std::vector<double> send_bytes;          // per node: what it sends to another device
  std::vector<double> load_before;         // per node: data loading right before it (IterationOverheads)
  std::vector<LinkSpec> links;             // S * S, by from * S + to
};

Layout make_layout(const EnergyProblem& problem, const FrequencyTable& clocks, const EmulationConfig& config) {
  const Dag& dag = problem.dag;
  const std::size_t n = dag.num_nodes();
  Layout layout;
  layout.stages = dag.num_stages();
  layout.device.resize(n);
  layout.pred_count.resize(n);
  layout.operation.resize(n);
  layout.constant.resize(n);
  layout.send_bytes.resize(n);
  layout.load_before.resize(n);
  layout.device_begin.push_back(0);
  for (int s = 0; s < layout.stages; ++s) {
    for (Dag::NodeId node : dag.stage_nodes(s)) {
      layout.order.push_back(node);
      layout.device[node] = s;
    }
    layout.device_begin.push_back(static_cast<std::int32_t>(layout.order.size()));
  }
  if (layout.order.size() != n) {
    throw InputError(fmt::format("the schedule's stages hold {} instructions but its DAG has {}", layout.order.size(), n));
  }
  for (std::size_t i = 0; i < n; ++i) {
    const auto node = static_cast<Dag::NodeId>(i);
    layout.pred_count[i] = static_cast<std::int32_t>(dag.predecessors(node).size());
    layout.operation[i] = problem.node_operation[i];
    layout.constant[i] = clocks.is_constant(static_cast<std::size_t>(problem.node_operation[i]));
    const Instruction& instruction = dag.instruction(node);
    layout.send_bytes[i] = instruction.kind == InstructionKind::kBackward ? config.gradient_bytes : config.activation_bytes;
    if (instruction.kind == InstructionKind::kForward) {
      // Virtual stage 0 holds the input, the last virtual stage the loss (and so the labels).
      const int virtual_stage = instruction.chunk * layout.stages + instruction.stage;
      if (virtual_stage == 0) layout.load_before[i] += config.overheads.first_stage_load_s;
      if (virtual_stage == dag.chunks() * layout.stages - 1) layout.load_before[i] += config.overheads.last_stage_load_s;
    }
  }
  layout.links.assign(static_cast<std::size_t>(layout.stages) * layout.stages, config.p2p);
  for (const auto& [pair, link] : config.p2p_links) layout.links[pair.first * layout.stages + pair.second] = link;
  return layout;
}

// How one pipeline ran: per-node figures, in arrays reused from pipeline to pipeline.
struct PipelineRun {
  std::vector<double> start, end, energy;
  std::vector<std::int32_t> clock_at_start;
  std::vector<SwitchOutcome> outcome;
  std::vector<Dag::NodeId> waited_for;
  std::vector<std::int32_t> switches;  // per device
  std::vector<Transfer> transfers;
};

struct PipelineInput {
  const ExecutionPlan* plan = nullptr;
  std::int32_t pipeline = 0;
  double slowdown = 1.0;
  double delay_s = 0.0;
  bool straggler = false;
};

// The discrete-event engine of one pipeline.
class PipelineEngine {
 public:
  PipelineEngine(const Dag& dag, const Layout& layout, const EmulationConfig& config, double switch_latency_s)
      : dag_(dag), layout_(layout), config_(config), latency_(switch_latency_s) {
    const std::size_t n = layout.device.size();
    const std::size_t s = static_cast<std::size_t>(layout.stages);
    remaining_.resize(n);
    ready_.resize(n);
    devices_.resize(s);
    link_free_.resize(s * s);
    run_.start.resize(n);
    run_.end.resize(n);
    run_.energy.resize(n);
    run_.clock_at_start.resize(n);
    run_.outcome.resize(n);
    run_.waited_for.resize(n);
    ready_from_.resize(n);
    run_.switches.resize(s);
  }

  // Emulates one pipeline; `record_transfers` keeps its transfers (when the config does).
  const PipelineRun& run(const PipelineInput& input, bool record_transfers) {
    input_ = input;
    plan_ = input.plan;
    record_transfers_ = record_transfers && config_.record_transfers;
    std::copy(layout_.pred_count.begin(), layout_.pred_count.end(), remaining_.begin());
    std::fill(ready_.begin(), ready_.end(), input.delay_s);
    std::fill(ready_from_.begin(), ready_from_.end(), Dag::NodeId{-1});
    std::fill(link_free_.begin(), link_free_.end(), 0.0);
    std::fill(run_.switches.begin(), run_.switches.end(), 0);
    run_.transfers.clear();
    events_.clear();
    sequence_ = 0;
    finished_ = 0;
    for (int d = 0; d < layout_.stages; ++d) {
      Device& device = devices_[d];
      device.next = 0;
      device.busy = false;
      device.free_s = input.delay_s;
      device.last = -1;
      device.clock = first_clock(d, layout_.device_begin[d]);
      device.requested = device.clock;
      device.last_effective_s = 0.0;
      device.pending.clear();  // keeps its capacity from pipeline to pipeline
    }
    for (int d = 0; d < layout_.stages; ++d) try_start(d);
    while (!events_.empty()) {
      std::pop_heap(events_.begin(), events_.end(), std::greater<>{});
      const Event event = events_.back();
      events_.pop_back();
      if (event.finish) {
        on_finish(event.node, event.time);
      } else {
        arrive(event.node, event.time, event.from);
        try_start(layout_.device[event.node]);
      }
    }
    if (finished_ != layout_.device.size()) {
      throw SolveError(fmt::format("the schedule deadlocks: {} of {} instructions of pipeline {} never became ready",
                                   layout_.device.size() - finished_, layout_.device.size(), input.pipeline));
    }
    return run_;
  }

 private:
  struct Event {
    double time;
    std::uint64_t sequence;  // ties: first scheduled, first served
    Dag::NodeId node;
    Dag::NodeId from;  // an arrival: the node whose output it is
    bool finish;
    bool operator>(const Event& other) const {
      return time != other.time ? time > other.time : sequence > other.sequence;
    }
  };
  struct PendingSwitch {
    double effective_s;
    std::int32_t frequency_mhz;
  };
  struct Device {
    std::int32_t next = 0;  // position of the next instruction in its order
    bool busy = false;
    double free_s = 0.0;
    Dag::NodeId last = -1;       // the instruction that ended at free_s
    std::int32_t clock = 0;      // the clock in effect
    std::int32_t requested = 0;  // the last clock asked for
    double last_effective_s = 0.0;
    std::vector<PendingSwitch> pending;  // asked for, not yet in effect; by time
  };

  // The clock of the first instruction of device d at or after `position` that is not constant.
  std::int32_t first_clock(int d, std::int32_t position) const {
    for (std::int32_t i = position; i < layout_.device_begin[d + 1]; ++i) {
      const Dag::NodeId node = layout_.order[i];
      if (!layout_.constant[node]) return plan_->frequency_mhz[node];
    }
    return 0;
  }

  void push(double time, Dag::NodeId node, bool finish, Dag::NodeId from = -1) {
    events_.push_back({time, sequence_++, node, from, finish});
    std::push_heap(events_.begin(), events_.end(), std::greater<>{});
  }

  void arrive(Dag::NodeId node, double time, Dag::NodeId from) {
    --remaining_[node];
    if (time >= ready_[node]) {
      ready_[node] = time;
      ready_from_[node] = from;
    }
  }

  void try_start(int d) {
    Device& device = devices_[d];
    const std::int32_t position = layout_.device_begin[d] + device.next;
    if (device.busy || position == layout_.device_begin[d + 1]) return;
    const Dag::NodeId node = layout_.order[position];
    if (remaining_[node] > 0) return;
    const double start = std::max(device.free_s, ready_[node]);
    // Ties go to the dependency: the path then follows the data between stages.
    run_.waited_for[node] = ready_[node] >= device.free_s ? ready_from_[node] : device.last;
    device.busy = true;
    // Data loading occupies the device, idle, between the moment the forward could start and
    // its start.
    run_.start[node] = start + layout_.load_before[node];
    run_.end[node] = execute(device, node, run_.start[node]);
    push(run_.end[node], node, true);
  }

  // Runs `node` from `start` across the clock changes in flight; returns its end.
  double execute(Device& device, Dag::NodeId node, double start) {
    auto& pending = device.pending;
    std::size_t applied = 0;
    while (applied < pending.size() && pending[applied].effective_s <= start) device.clock = pending[applied++].frequency_mhz;
    pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(applied));

    const double slowdown = input_.slowdown * noise_factor(config_.instruction_noise, config_.noise_seed,
                                                           input_.pipeline, node);
    const double planned_time = plan_->time_s[node] * slowdown;
    const double planned_energy = plan_->energy_j[node] * slowdown;
    const std::int32_t planned = plan_->frequency_mhz[node];
    run_.clock_at_start[node] = device.clock;
    run_.outcome[node] = SwitchOutcome::kNone;
    if (layout_.constant[node] || (device.clock == planned && pending.empty())) {
      run_.energy[node] = planned_energy;
      return start + planned_time;
    }
    // Piecewise over the clocks in effect: progress is the done fraction of the instruction.
    double t = start, progress = 0.0, energy = 0.0, at_planned = 0.0;
    std::int32_t clock = device.clock;
    std::size_t k = 0;
    while (true) {
      ClockFigures figures{planned_time, planned_energy};
      if (clock != planned) {
        figures = plan_->clocks->while_clocked_at(static_cast<std::size_t>(layout_.operation[node]), clock);
        figures.time_s *= slowdown;
        figures.energy_j *= slowdown;
      }
      const double rest = (1.0 - progress) * figures.time_s;
      if (k == pending.size() || t + rest <= pending[k].effective_s) {
        energy += (1.0 - progress) * figures.energy_j;
        if (clock == planned) at_planned += rest;
        t += rest;
        break;
      }
      const double segment = pending[k].effective_s - t;
      const double done = segment / figures.time_s;
      progress += done;
      energy += done * figures.energy_j;
      if (clock == planned) at_planned += segment;
      t = pending[k].effective_s;
      clock = pending[k].frequency_mhz;
      ++k;
    }
    if (at_planned < t - start) run_.outcome[node] = at_planned > 0.0 ? SwitchOutcome::kLate : SwitchOutcome::kMissed;
    run_.energy[node] = energy;
    return t;
  }

  void on_finish(Dag::NodeId node, double time) {
    const int d = layout_.device[node];
    Device& device = devices_[d];
    device.busy = false;
    device.free_s = time;
    device.last = node;
    ++device.next;
    ++finished_;
    request_clock(d, device);
    const bool blocking = config_.overheads.blocking_sends;
    const int stages = layout_.stages;
    for (Dag::NodeId successor : dag_.successors(node)) {
      const int e = layout_.device[successor];
      if (e == d) {
        arrive(successor, time, node);
        continue;
      }
      const std::size_t link_index = static_cast<std::size_t>(d) * stages + e;
      const LinkSpec& link = layout_.links[link_index];
      if (link.is_free()) {
        arrive(successor, time, node);
        try_start(e);
        continue;
      }
      const double bytes = layout_.send_bytes[node];
      const double send = std::max(time, link_free_[link_index]);
      link_free_[link_index] = send + link.occupancy_s(bytes);
      const double arrival = link_free_[link_index] + link.latency_s;
      push(arrival, successor, false, node);
      // A blocking send holds the device until the receiver has it: its next instruction
      // waits for this one (the wait is idle time, not busy time).
      if (blocking) device.free_s = std::max(device.free_s, arrival);
      if (record_transfers_) {
        run_.transfers.push_back({input_.pipeline, d, e, node, successor, send, arrival, bytes});
      }
    }
    try_start(d);
  }

  // As an instruction finishes, the controller asks for the next one's clock.
  void request_clock(int d, Device& device) {
    const std::int32_t position = layout_.device_begin[d] + device.next;
    if (position == layout_.device_begin[d + 1]) return;
    const Dag::NodeId next = layout_.order[position];
    if (layout_.constant[next] || plan_->frequency_mhz[next] == device.requested) return;
    const double effective = std::max(device.free_s, device.last_effective_s) + latency_;
    device.pending.push_back({effective, plan_->frequency_mhz[next]});
    device.requested = plan_->frequency_mhz[next];
    device.last_effective_s = effective;
    ++run_.switches[d];
  }

  const Dag& dag_;
  const Layout& layout_;
  const EmulationConfig& config_;
  double latency_;
  PipelineInput input_;
  bool record_transfers_ = false;
  const ExecutionPlan* plan_ = nullptr;
  std::vector<std::int32_t> remaining_;
  std::vector<double> ready_;
  std::vector<Dag::NodeId> ready_from_;  // the arrival that set ready_
  std::vector<Device> devices_;
  std::vector<double> link_free_;
  std::vector<Event> events_;
  std::uint64_t sequence_ = 0;
  std::size_t finished_ = 0;
  PipelineRun run_;
};

// Ring all-reduce: 2(D-1) steps, each sending 1/D of the data and paying the latency.
double ring_allreduce_s(const LinkSpec& link, double bytes, int replicas) {
  if (replicas < 2) return 0.0;
  const double steps = 2.0 * (replicas - 1);
  return steps / replicas * link.occupancy_s(bytes) + steps * link.latency_s;
}

std::vector<PipelineInput> pipeline_inputs(const EmulationConfig& config, const ExecutionPlan& plan,
                                           const ExecutionPlan& straggler_plan) {
  std::vector<PipelineInput> inputs(static_cast<std::size_t>(config.data_parallel));
  for (int p = 0; p < config.data_parallel; ++p) inputs[p] = {&plan, p, 1.0, 0.0, false};
  for (const Straggler& s : config.stragglers) inputs[s.pipeline] = {&straggler_plan, s.pipeline, s.slowdown, s.delay_s, true};
  return inputs;
}

// T_sync and the computation energy (per tensor-parallel GPU) with instant switching, to
// tell what switching cost.
std::pair<double, double> run_with_instant_switching(const EnergyProblem& problem, const Layout& layout,
                                                     const EmulationConfig& config,
                                                     const std::vector<PipelineInput>& inputs) {
  PipelineEngine engine(problem.dag, layout, config, 0.0);
  double sync = 0.0, energy = 0.0;
  for (const PipelineInput& input : inputs) {
    const PipelineRun& run = engine.run(input, false);
    for (double end : run.end) sync = std::max(sync, end);
    for (double e : run.energy) energy += e;
  }
  return {sync, energy};
}

// Keeps the timelines and transfers of the pipelines given to record(), in any order, and
// lays them out by pipeline in the result at finish().
class TimelineRecorder {
 public:
  TimelineRecorder(const Dag& dag, const Layout& layout, EmulationResult& result)
      : dag_(dag), layout_(layout), result_(result) {}

  void record(const PipelineInput& input, const PipelineRun& run) {
    chunks_.push_back({input.pipeline, result_.timeline.size(), result_.transfers.size()});
    for (std::int32_t i = 0; i < static_cast<std::int32_t>(layout_.order.size()); ++i) {
      const Dag::NodeId node = layout_.order[i];
      result_.timeline.push_back({dag_.instruction(node), input.pipeline, node, run.start[node], run.end[node],
                                  run.energy[node], layout_.load_before[node], input.plan->frequency_mhz[node],
                                  run.clock_at_start[node],
                                  run.outcome[node], run.waited_for[node]});
    }
    result_.transfers.insert(result_.transfers.end(), run.transfers.begin(), run.transfers.end());
  }

  // Orders the recorded pipelines (only the few recorded after the others need moving) and
  // sets device_begin and detailed_pipelines.
  void finish() {
    const bool ordered = std::is_sorted(chunks_.begin(), chunks_.end(),
                                        [](const Chunk& a, const Chunk& b) { return a.pipeline < b.pipeline; });
    if (!ordered) {
      std::vector<std::size_t> timeline_end, transfers_end;
      for (std::size_t k = 0; k < chunks_.size(); ++k) {
        timeline_end.push_back(k + 1 < chunks_.size() ? chunks_[k + 1].timeline_begin : result_.timeline.size());
        transfers_end.push_back(k + 1 < chunks_.size() ? chunks_[k + 1].transfers_begin : result_.transfers.size());
      }
      std::vector<std::size_t> by_pipeline(chunks_.size());
      for (std::size_t k = 0; k < by_pipeline.size(); ++k) by_pipeline[k] = k;
      std::sort(by_pipeline.begin(), by_pipeline.end(),
                [&](std::size_t a, std::size_t b) { return chunks_[a].pipeline < chunks_[b].pipeline; });
      std::vector<ExecutedInstruction> timeline;
      std::vector<Transfer> transfers;
      timeline.reserve(result_.timeline.size());
      transfers.reserve(result_.transfers.size());
      std::vector<Chunk> chunks;
      for (std::size_t k : by_pipeline) {
        chunks.push_back({chunks_[k].pipeline, timeline.size(), transfers.size()});
        timeline.insert(timeline.end(), result_.timeline.begin() + static_cast<std::ptrdiff_t>(chunks_[k].timeline_begin),
                        result_.timeline.begin() + static_cast<std::ptrdiff_t>(timeline_end[k]));
        transfers.insert(transfers.end(),
                         result_.transfers.begin() + static_cast<std::ptrdiff_t>(chunks_[k].transfers_begin),
                         result_.transfers.begin() + static_cast<std::ptrdiff_t>(transfers_end[k]));
      }
      result_.timeline = std::move(timeline);
      result_.transfers = std::move(transfers);
      chunks_ = std::move(chunks);
    }
    // A detailed pipeline's devices cover its instructions in stage order; the others' are empty.
    const int stages = layout_.stages;
    result_.device_begin.assign(1, 0);
    result_.device_begin.reserve(static_cast<std::size_t>(result_.data_parallel) * stages + 1);
    result_.detailed_pipelines.clear();
    std::size_t next = 0, at = 0;
    for (int p = 0; p < result_.data_parallel; ++p) {
      const bool detailed = next < chunks_.size() && chunks_[next].pipeline == p;
      if (detailed) {
        result_.detailed_pipelines.push_back(p);
        ++next;
      }
      for (int d = 0; d < stages; ++d) {
        if (detailed) at += static_cast<std::size_t>(layout_.device_begin[d + 1] - layout_.device_begin[d]);
        result_.device_begin.push_back(at);
      }
    }
  }

 private:
  struct Chunk {
    std::int32_t pipeline;
    std::size_t timeline_begin, transfers_begin;
  };
  const Dag& dag_;
  const Layout& layout_;
  EmulationResult& result_;
  std::vector<Chunk> chunks_;  // in recording order
};

// The fastest pipeline and a typical one (EmulationResult::fastest_pipeline, typical_pipeline).
void pick_notable_pipelines(EmulationResult& result) {
  const auto& pipelines = result.pipelines;
  std::int32_t fastest = 0;
  for (const PipelineSummary& p : pipelines) {
    if (p.time_s < pipelines[fastest].time_s) fastest = p.pipeline;
  }
  std::vector<std::pair<double, double>> figures;  // (time, energy) of the non-stragglers
  for (const PipelineSummary& p : pipelines) {
    if (!p.straggler) figures.emplace_back(p.time_s, p.energy.total_j());
  }
  const bool all_straggle = figures.empty();
  if (all_straggle) {
    for (const PipelineSummary& p : pipelines) figures.emplace_back(p.time_s, p.energy.total_j());
  }
  const auto median = figures.begin() + static_cast<std::ptrdiff_t>((figures.size() - 1) / 2);
  std::nth_element(figures.begin(), median, figures.end());
  std::int32_t typical = 0;
  for (const PipelineSummary& p : pipelines) {
    if ((all_straggle || !p.straggler) && std::pair{p.time_s, p.energy.total_j()} == *median) {
      typical = p.pipeline;
      break;
    }
  }
  result.fastest_pipeline = fastest;
  result.typical_pipeline = typical;
}

}  // namespace

EmulationResult emulate(const EnergyProblem& problem, const ExecutionPlan& plan, const EmulationConfig& config,
                        const ExecutionPlan* straggler_plan) {
  check_plan(problem, plan, "plan");
  if (straggler_plan) check_plan(problem, *straggler_plan, "straggler plan");
  check_config(problem, config);

  const Layout layout = make_layout(problem, *plan.clocks, config);
  const int stages = layout.stages;
  const int replicas = config.data_parallel;
  const double tp = config.tensor_parallel;
  const double p_blocking = problem.p_blocking;
  const std::vector<PipelineInput> inputs = pipeline_inputs(config, plan, straggler_plan ? *straggler_plan : plan);

  EmulationResult result;
  result.stages = stages;
  result.data_parallel = replicas;
  result.tensor_parallel = config.tensor_parallel;
  result.p_blocking_w = p_blocking;
  result.switch_latency_s = config.switch_latency_s;
  result.detail = config.detail;
  result.overheads = config.overheads;
  result.devices.reserve(static_cast<std::size_t>(replicas) * stages);
  result.pipelines.reserve(static_cast<std::size_t>(replicas));

  // Which pipelines keep their timeline from the start; the fastest and the typical one are
  // known only once every pipeline ran.
  std::vector<std::uint8_t> detailed(static_cast<std::size_t>(replicas), config.detail == TimelineDetail::kAll);
  if (config.detail == TimelineDetail::kNotable) {
    for (const Straggler& s : config.stragglers) detailed[s.pipeline] = 1;
  }
  for (int p : config.detail_pipelines) detailed[p] = 1;
  result.timeline.reserve(layout.order.size() * static_cast<std::size_t>(std::count(detailed.begin(), detailed.end(), 1)));
  TimelineRecorder recorder(problem.dag, layout, result);

  PowerSamples power(config.power_sample_s);
  PipelineEngine engine(problem.dag, layout, config, config.switch_latency_s);
  for (const PipelineInput& input : inputs) {
    const PipelineRun& run = engine.run(input, detailed[input.pipeline]);
    if (detailed[input.pipeline]) recorder.record(input, run);
    if (config.power_sample_s > 0.0) {
      // Above p_blocking (added for every GPU over the whole iteration below).
      for (std::size_t node = 0; node < run.start.size(); ++node) {
        const double duration = run.end[node] - run.start[node];
        if (duration > 0.0) power.add(run.start[node], run.end[node], tp * (run.energy[node] / duration - p_blocking));
      }
    }
    PipelineSummary summary{input.pipeline, input.straggler, input.slowdown, input.delay_s, 0.0, {}};
    for (int d = 0; d < stages; ++d) {
      DeviceSummary device{input.pipeline, d, 0.0, input.delay_s, {}, run.switches[d], 0, 0};
      for (std::int32_t i = layout.device_begin[d]; i < layout.device_begin[d + 1]; ++i) {
        const Dag::NodeId node = layout.order[i];
        device.busy_s += run.end[node] - run.start[node];
        device.finish_s = std::max(device.finish_s, run.end[node]);
        device.energy.computation_j += run.energy[node];
        device.late_switches += run.outcome[node] != SwitchOutcome::kNone;
        device.missed_switches += run.outcome[node] == SwitchOutcome::kMissed;
      }
      summary.time_s = std::max(summary.time_s, device.finish_s);
      result.devices.push_back(device);
    }
    for (int d = 0; d < stages; ++d) {
      DeviceSummary& device = result.devices[result.devices.size() - stages + d];
      device.energy.intrinsic_blocking_j = p_blocking * (summary.time_s - device.busy_s);
    }
    result.sync_time_s = std::max(result.sync_time_s, summary.time_s);
    result.pipelines.push_back(summary);
  }

  // Gradient all-reduce of each stage once its last replica is done.
  result.iteration_time_s = result.sync_time_s;
  if (replicas > 1) {
    const double duration = ring_allreduce_s(config.allreduce, config.allreduce_bytes / tp, replicas);
    for (int d = 0; d < stages; ++d) {
      double start = 0.0;
      for (int p = 0; p < replicas; ++p) start = std::max(start, result.devices[p * stages + d].finish_s);
      result.allreduces.push_back({d, start, start + duration, config.allreduce_bytes / tp});
      result.iteration_time_s = std::max(result.iteration_time_s, start + duration);
    }
  }
  // Then the optimizer step and the gap, on every GPU at once.
  const IterationOverheads& overheads = config.overheads;
  result.communication_end_s = result.iteration_time_s;
  result.iteration_time_s += overheads.optimizer_step_s + overheads.between_iterations_s;
  const double optimizer_power = overheads.optimizer_power_w < 0.0 ? p_blocking : overheads.optimizer_power_w;
  const double overhead_j = optimizer_power * overheads.optimizer_step_s + p_blocking * overheads.between_iterations_s;
  if (config.power_sample_s > 0.0) {
    const double gpus = static_cast<double>(result.num_gpus());
    power.add(0.0, result.iteration_time_s, gpus * p_blocking);
    power.add(result.communication_end_s, result.communication_end_s + overheads.optimizer_step_s,
              gpus * (optimizer_power - p_blocking));
    result.power_sample_s = config.power_sample_s;
    result.power_w = power.watts(result.iteration_time_s);
  }

  for (DeviceSummary& device : result.devices) {
    PipelineSummary& pipeline = result.pipelines[device.pipeline];
    device.energy.extrinsic_blocking_j = p_blocking * (result.sync_time_s - pipeline.time_s);
    device.energy.allreduce_j = p_blocking * (result.communication_end_s - result.sync_time_s);
    device.energy.overhead_j = overhead_j;
    EnergySplit gpus = device.energy;
    gpus.computation_j *= tp;
    gpus.intrinsic_blocking_j *= tp;
    gpus.extrinsic_blocking_j *= tp;
    gpus.allreduce_j *= tp;
    gpus.overhead_j *= tp;
    pipeline.energy += gpus;
    result.energy += gpus;
    result.switches += device.switches;
    result.late_switches += device.late_switches;
    result.missed_switches += device.missed_switches;
  }

  pick_notable_pipelines(result);
  if (config.detail == TimelineDetail::kNotable) {
    // The engine is deterministic: running these again gives the runs their summaries came from.
    for (const std::int32_t p : {result.fastest_pipeline, result.typical_pipeline}) {
      if (detailed[p]) continue;
      detailed[p] = 1;
      recorder.record(inputs[p], engine.run(inputs[p], true));
    }
  }
  recorder.finish();

  if (result.late_switches > 0) {
    const auto [instant_sync, instant_energy] = run_with_instant_switching(problem, layout, config, inputs);
    result.switching_delay_s = result.sync_time_s - instant_sync;
    result.switching_energy_j = result.energy.computation_j - instant_energy * tp;
    // Late switches are normal (a clock change rarely hides entirely in idle time); only a
    // cost worth noticing makes the plan suspect. Running faster or cheaper is no cost.
    const double fraction = config.switching_warning_fraction;
    const bool costly = result.switching_delay_s > fraction * result.iteration_time_s ||
                        result.switching_energy_j > fraction * result.energy.total_j();
    if (costly) {
      result.warnings.push_back(fmt::format(
          "the plan switches frequency more often than it can pay for: {} of {} switches (latency {} ms) had not "
          "taken effect when their instruction started ({} never did); the slowest pipeline takes {:.6f} s instead "
          "of {:.6f} s, and computation {:.3f} J more, than with instant switching (warned above {:g}% of the "
          "iteration's time or energy)",
          result.late_switches, result.switches, config.switch_latency_s * 1e3, result.missed_switches,
          result.sync_time_s, instant_sync, result.switching_energy_j, 100.0 * fraction));
    }
  }
  return result;
}

std::vector<std::size_t> critical_path(const EmulationResult& result, int pipeline) {
  if (pipeline < 0 || pipeline >= result.data_parallel) {
    throw InputError(fmt::format("pipeline {} does not exist (there are {})", pipeline, result.data_parallel));
  }
  const std::size_t first = result.device_begin[static_cast<std::size_t>(pipeline) * result.stages];
  const std::size_t last = result.device_begin[static_cast<std::size_t>(pipeline + 1) * result.stages];
  if (first == last) return {};
  // Node id -> timeline index within this pipeline.
  Dag::NodeId max_node = 0;
  for (std::size_t i = first; i < last; ++i) max_node = std::max(max_node, result.timeline[i].node);
  std::vector<std::size_t> index_of(static_cast<std::size_t>(max_node) + 1, last);
  std::size_t end = first;
  for (std::size_t i = first; i < last; ++i) {
    index_of[result.timeline[i].node] = i;
    if (result.timeline[i].end_s > result.timeline[end].end_s) end = i;
  }
  std::vector<std::size_t> path;
  for (std::size_t i = end; i != last;) {
    path.push_back(i);
    const Dag::NodeId before = result.timeline[i].waited_for;
    i = before < 0 || static_cast<std::size_t>(before) >= index_of.size() ? last : index_of[before];
    if (path.size() > last - first) break;  // guards a malformed result; waits never form a cycle
  }
  std::reverse(path.begin(), path.end());
  return path;
}

StragglerResponder::StragglerResponder(const EnergyProblem& problem, std::span<const ExecutionPlan> candidates,
                                       const EmulationConfig& config)
    : problem_(problem), candidates_(candidates), single_(config) {
  if (candidates.empty()) throw InputError("straggler response: no candidate plans");
  // Every candidate alone on one pipeline: its own time and energy.
  single_.data_parallel = 1;
  single_.stragglers.clear();
  single_.record_transfers = false;
  single_.detail = TimelineDetail::kListed;  // only times and energies are compared
  single_.detail_pipelines.clear();
  single_.instruction_noise = 0.0;  // what the plans promise, not one noisy draw
  single_.power_sample_s = 0.0;
  // Effective energy (above idling) decides: waiting until T' costs p_blocking per GPU
  // whatever runs, so over [0, T'] the plan with the least of it uses the least energy.
  for (const ExecutionPlan& candidate : candidates) {
    const EmulationResult alone = emulate(problem, candidate, single_);
    times_s_.push_back(alone.iteration_time_s);
    effective_energy_j_.push_back(alone.energy.total_j() - problem.p_blocking * alone.num_gpus() * alone.iteration_time_s);
  }
  fastest_ = static_cast<std::size_t>(std::min_element(times_s_.begin(), times_s_.end()) - times_s_.begin());
  t_star_s_ = times_s_[static_cast<std::size_t>(std::min_element(effective_energy_j_.begin(), effective_energy_j_.end()) -
                                                effective_energy_j_.begin())];
}

double StragglerResponder::straggler_time_s(std::span<const Straggler> stragglers) const {
  double slowest = times_s_[fastest_];
  EmulationConfig alone = single_;
  for (const Straggler& s : stragglers) {
    alone.stragglers = {Straggler{0, s.slowdown, s.delay_s}};
    slowest = std::max(slowest, emulate(problem_, candidates_[fastest_], alone).iteration_time_s);
  }
  return slowest;
}

std::size_t StragglerResponder::choose(double straggler_time_s) const {
  const double t_opt = std::min(t_star_s_, straggler_time_s);
  std::size_t chosen = fastest_;
  for (std::size_t i = 0; i < times_s_.size(); ++i) {
    if (times_s_[i] > t_opt) continue;
    if (times_s_[i] > times_s_[chosen] || (times_s_[i] == times_s_[chosen] && effective_energy_j_[i] < effective_energy_j_[chosen])) {
      chosen = i;
    }
  }
  return chosen;
}

StragglerResponse emulate_straggler_response(const EnergyProblem& problem, std::span<const ExecutionPlan> candidates,
                                             const EmulationConfig& config) {
  if (candidates.empty()) throw InputError("straggler response: no candidate plans");
  if (config.stragglers.empty()) throw InputError("straggler response: the configuration names no straggler");
  check_config(problem, config);
  const StragglerResponder responder(problem, candidates, config);
  StragglerResponse response;
  response.candidate_times_s = responder.times_s();
  response.straggler_plan = responder.fastest();
  response.t_star_s = responder.t_star_s();
  response.straggler_time_s = responder.straggler_time_s(config.stragglers);
  response.t_opt_s = std::min(response.t_star_s, response.straggler_time_s);
  response.chosen_plan = responder.choose(response.straggler_time_s);
  response.result = emulate(problem, candidates[response.chosen_plan], config, &candidates[response.straggler_plan]);
  return response;
}

}  // namespace perseus
