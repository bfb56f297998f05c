#include "perseus/geo/pipeline_emulator.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <deque>
#include <limits>
#include <optional>
#include <map>
#include <queue>
#include <set>

#include <fmt/format.h>

#include "perseus/schedule/schedule.hpp"

namespace perseus::geo {

std::string_view to_string(Scheduler scheduler) {
  switch (scheduler) {
    case Scheduler::kGPipe: return "gpipe";
    case Scheduler::k1F1B: return "1f1b";
    case Scheduler::kVaruna: return "varuna";
    case Scheduler::kAtlas: return "atlas";
  }
  return "?";
}

std::string_view to_string(LinkSharing sharing) { return sharing == LinkSharing::kQueue ? "queue" : "split"; }

LinkSharing parse_link_sharing(std::string_view name) {
  if (name == "queue") return LinkSharing::kQueue;
  if (name == "split") return LinkSharing::kSplit;
  throw InputError(fmt::format("unknown link sharing '{}': expected queue or split", name));
}

Scheduler parse_scheduler(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "gpipe") return Scheduler::kGPipe;
  if (lower == "1f1b" || lower == "megatron") return Scheduler::k1F1B;
  if (lower == "varuna") return Scheduler::kVaruna;
  if (lower == "atlas") return Scheduler::kAtlas;
  throw InputError(fmt::format("unknown scheduler '{}': expected atlas, varuna, gpipe or 1f1b", name));
}

bool recomputes(Scheduler scheduler, const Workload& workload) {
  return workload.spec.recompute && (scheduler == Scheduler::kVaruna || scheduler == Scheduler::kAtlas);
}

namespace {

constexpr double kTouch_s = 1e-9;

enum class EventType : std::uint8_t { kTaskEnd, kChannelDone, kArrival };

struct Event {
  double time;
  std::uint64_t sequence;  // ties in time run in the order they were made: deterministic
  EventType type;
  std::int32_t a;          // GPU, channel or transfer
  std::uint32_t version;   // channel events: stale when the channel changed since
  bool operator>(const Event& other) const {
    return time != other.time ? time > other.time : sequence > other.sequence;
  }
};

// A channel shared by processor sharing: every active transfer gets bandwidth / n. `work` is
// the bytes each active transfer has been served since the channel was made; a transfer ends
// when `work` reaches the value it had at the transfer's start plus its bytes.
struct Channel {
  double bandwidth = 0.0, latency = 0.0;
  double work = 0.0, updated_s = 0.0;
  std::priority_queue<std::pair<double, std::int32_t>, std::vector<std::pair<double, std::int32_t>>, std::greater<>>
      active;
  std::uint32_t version = 0;
  bool fifo = true;                                          // one transfer at a time, in order
  std::deque<std::pair<double, std::int32_t>> waiting;      // FIFO: (bytes, transfer) behind the one sent
  std::vector<Interval> reserved;  // Atlas: sorted, disjoint
  void advance(double t) {
    if (!active.empty()) work += (t - updated_s) * bandwidth / static_cast<double>(active.size());
    updated_s = t;
  }
};

struct Choice {
  InstructionKind kind;
  int microbatch;
  double start_s;
};

struct GpuState {
  bool busy = false;
  int next_forward = 0;
  int lowest_unfinished = 0;     // lowest microbatch without its backward
  int in_flight = 0;
  int outstanding_recompute = -1;
  std::size_t position = 0;      // static orders
  std::vector<std::uint8_t> forward_done, recompute_done, backward_done, input_arrived;
  std::set<int> gradient_ready;  // backward's input here, backward not run
};

class Engine {
 public:
  Engine(const Workload& workload, const NetworkSpec& network, const Placement& placement, Scheduler scheduler,
         LinkSharing sharing, const std::vector<std::vector<Interval>>& held, const GeoEmulation* recorded,
         const TaskCosts* costs = nullptr)
      : w_(workload), net_(network), pl_(placement), scheduler_(scheduler), sharing_(sharing), held_(held),
        recorded_(recorded), costs_(costs) {
    S_ = pl_.stages, M_ = workload.spec.microbatches, P_ = pl_.pipelines;
    recompute_ = recorded ? false : recomputes(scheduler, workload);
    gpus_.resize(static_cast<std::size_t>(pl_.num_gpus()));
    for (GpuState& g : gpus_) {
      g.forward_done.assign(M_, 0), g.recompute_done.assign(M_, 0), g.backward_done.assign(M_, 0);
      g.input_arrived.assign(M_, 0);
    }
    if (recorded) {
      orders_ = &recorded->tasks;
      orders_per_gpu_ = true;
    } else if (scheduler == Scheduler::kGPipe || scheduler == Scheduler::k1F1B) {
      // The project's schedules (schedule/schedule.hpp), one order per stage for every pipeline.
      const Schedule schedule = make_schedule(
          {scheduler == Scheduler::kGPipe ? ScheduleKind::kGPipe : ScheduleKind::k1F1B, S_, M_, 1, false});
      for (const std::vector<Instruction>& stage : schedule.per_stage) {
        std::vector<GeoTask>& order = stage_orders_.emplace_back();
        for (const Instruction& i : stage) order.push_back({i.kind, i.microbatch, 0.0, 0.0});
      }
      orders_ = &stage_orders_;
    }
    // Channels: each pipeline's hop and direction, then (Atlas) each cell's pooled WAN hop and direction.
    const int hops = std::max(0, S_ - 1);
    pooled_base_ = P_ * hops * 2;
    channels_.resize(static_cast<std::size_t>(pooled_base_ + pl_.num_cells() * hops * 2));
    for (int p = 0; p < P_; ++p)
      for (int h = 0; h < hops; ++h)
        for (int dir = 0; dir < 2; ++dir) {
          Channel& c = channels_[own_channel(p, h, dir)];
          c.fifo = sharing_ == LinkSharing::kQueue;
          c.bandwidth = net_.pair_bandwidth(pl_.dc_of(p, h), pl_.dc_of(p, h + 1));
          c.latency = net_.latency_s(pl_.dc_of(p, h), pl_.dc_of(p, h + 1));
        }
    for (int cell = 0; cell < pl_.num_cells(); ++cell) {
      const int members = std::min(pl_.cell_size, P_ - cell * pl_.cell_size);
      for (int h = 0; h < hops; ++h)
        for (int dir = 0; dir < 2; ++dir) {
          Channel& c = channels_[pooled_channel(cell, h, dir)];
          c.fifo = sharing_ == LinkSharing::kQueue;
          c.bandwidth = members * net_.wan_pair_bandwidth();
          c.latency = net_.wan_latency_ms * 1e-3;
        }
    }
    backwards_left_.assign(S_, P_ * M_);
    stage_last_backward_.assign(S_, 0.0);
    result_.scheduler = scheduler;
    result_.sharing = sharing;
    result_.placement = placement;
    result_.tasks.resize(gpus_.size());
    for (auto& t : result_.tasks) t.reserve(static_cast<std::size_t>(M_) * (recompute_ ? 3 : 2));
    result_.peak_in_flight.assign(S_, 0);
  }

  GeoEmulation run() {
    for (int g = 0; g < pl_.num_gpus(); ++g) try_start(g, 0.0);
    while (!events_.empty()) {
      const Event e = events_.top();
      events_.pop();
      switch (e.type) {
        case EventType::kTaskEnd: finish_task(e.a, e.time); break;
        case EventType::kChannelDone: channel_done(e.a, e.version, e.time); break;
        case EventType::kArrival: arrive(e.a, e.time); break;
      }
    }
    for (int s = 0; s < S_; ++s)
      if (backwards_left_[s] != 0)
        throw SolveError(fmt::format("geo emulation stalled: stage {} has {} backwards left (scheduler {})", s,
                                     backwards_left_[s], to_string(scheduler_)));
    finish_iteration();
    return std::move(result_);
  }

 private:
  std::size_t own_channel(int p, int hop, int dir) const { return static_cast<std::size_t>((p * (S_ - 1) + hop) * 2 + dir); }
  std::size_t pooled_channel(int cell, int hop, int dir) const {
    return static_cast<std::size_t>(pooled_base_ + (cell * (S_ - 1) + hop) * 2 + dir);
  }
  bool pooled(int p, int hop) const { return scheduler_ == Scheduler::kAtlas && pl_.crosses_wan(p, hop); }
  std::size_t channel_of(int p, int hop, int dir) const {
    return pooled(p, hop) ? pooled_channel(pl_.cell_of(p), hop, dir) : own_channel(p, hop, dir);
  }
  bool needs_recompute(int s) const { return recompute_ && s < S_ - 1; }

  // Time and energy of GPU g's next computation: a replay's given cost, else the stage's
  // (recomputation: the forward's).
  std::pair<double, double> cost(int g, InstructionKind kind) const {
    if (costs_) {
      const TaskCost& c = (*costs_)[static_cast<std::size_t>(g)][gpus_[static_cast<std::size_t>(g)].position];
      return {c.time_s, c.energy_j};
    }
    const StageWork& work = w_.stages[static_cast<std::size_t>(g % S_)];
    if (kind == InstructionKind::kBackward) return {work.backward_s, work.backward_j};
    if (kind == InstructionKind::kRecompute) return {work.recompute_s, work.recompute_j};
    return {work.forward_s, work.forward_j};
  }
  double duration(int g, InstructionKind kind) const { return cost(g, kind).first; }

  bool ready(int g, InstructionKind kind, int m) const {
    const GpuState& st = gpus_[g];
    const int s = g % S_;
    switch (kind) {
      case InstructionKind::kForward: return !st.forward_done[m] && (s == 0 || st.input_arrived[m]);
      case InstructionKind::kRecompute: return st.forward_done[m] && !st.recompute_done[m];
      default:
        return st.gradient_ready.count(m) && (!needs_recompute(s) || st.recompute_done[m]);
    }
  }

  // Atlas: the pooled WAN channel a computation's output crosses, and how long its transfer
  // holds it; null when it sends nothing across the WAN (or the scheduler is another).
  std::pair<Channel*, double> pooled_link(int g, InstructionKind kind) {
    if (scheduler_ != Scheduler::kAtlas || recorded_) return {nullptr, 0.0};
    const int p = g / S_, s = g % S_;
    if (kind == InstructionKind::kForward && s < S_ - 1 && pooled(p, s)) {
      Channel* link = &channels_[channel_of(p, s, 0)];
      return {link, w_.activation_bytes / link->bandwidth};
    }
    if (kind == InstructionKind::kBackward && s > 0 && pooled(p, s - 1)) {
      Channel* link = &channels_[channel_of(p, s - 1, 1)];
      return {link, w_.gradient_bytes / link->bandwidth};
    }
    return {nullptr, 0.0};
  }

  // The earliest start >= t at which the GPU is not held and (Atlas) the transfer the
  // computation sends across the WAN finds its pooled channel free right at its end (rule 3).
  double earliest_start(int g, InstructionKind kind, double t) {
    const double d = duration(g, kind);
    const auto [link, occupancy] = pooled_link(g, kind);
    const std::vector<Interval>* held = held_.empty() ? nullptr : &held_[static_cast<std::size_t>(g)];
    for (int guard = 0; guard < 100000; ++guard) {
      double next = t;
      // Held intervals touching a computation's ends are not in its way (1 ns: the prefills'
      // times are folded into one iteration in floating point).
      if (held)
        for (const Interval& h : *held)
          if (h.start_s < next + d - kTouch_s && next < h.end_s - kTouch_s) next = h.end_s;
      if (link) {
        // The first reservation ending after the transfer would start: walk the gaps from there.
        auto it = std::lower_bound(link->reserved.begin(), link->reserved.end(), next + d,
                                   [](const Interval& r, double v) { return r.end_s <= v; });
        for (; it != link->reserved.end(); ++it) {
          if (it->start_s >= next + d + occupancy - 1e-12) break;
          next = it->end_s - d;
        }
      }
      if (next <= t) return t;
      t = next;
    }
    throw SolveError("geo emulation: no start found for a computation (held intervals too dense)");
  }

  // Books the pooled channel for the transfer of a computation starting at `start`.
  void reserve(int g, InstructionKind kind, double start) {
    const auto [link, occupancy] = pooled_link(g, kind);
    if (!link) return;
    const double from = start + duration(g, kind);
    link->reserved.insert(std::lower_bound(link->reserved.begin(), link->reserved.end(), from,
                                           [](const Interval& a, double v) { return a.start_s < v; }),
                          Interval{from, from + occupancy});
  }

  std::optional<Choice> choose_static(int g, double t) {
    GpuState& st = gpus_[g];
    const std::vector<GeoTask>& order = (*orders_)[static_cast<std::size_t>(orders_per_gpu_ ? g : g % S_)];
    if (st.position >= order.size()) return std::nullopt;
    const GeoTask& next = order[st.position];
    if (!ready(g, next.kind, next.microbatch)) return std::nullopt;
    const double not_before = recorded_ ? std::max(t, next.start_s) : t;
    return Choice{next.kind, next.microbatch, earliest_start(g, next.kind, not_before)};
  }

  // The candidates of a dynamic scheduler in priority order; the first that can start now
  // runs, else the one that can start first (Atlas may have to put a computation off until its
  // transfer finds the pooled link free: meanwhile a later candidate may run).
  std::optional<Choice> choose_dynamic(int g, double t) {
    GpuState& st = gpus_[g];
    const int s = g % S_;
    const bool atlas = scheduler_ == Scheduler::kAtlas;
    std::vector<std::pair<InstructionKind, int>>& candidates = candidates_;
    candidates.clear();
    if (st.outstanding_recompute >= 0) {
      // Its activations are rebuilt: its backward next (Atlas's rule 4), or wait.
      if (ready(g, InstructionKind::kBackward, st.outstanding_recompute))
        candidates.emplace_back(InstructionKind::kBackward, st.outstanding_recompute);
      else if (atlas)
        return std::nullopt;
    }
    if (candidates.empty()) {
      // A ready backward first (rule 5), lowest microbatch first; a gradient waiting for its
      // recomputation gets it.
      for (int m : st.gradient_ready) {
        if (!needs_recompute(s) || st.recompute_done[m]) {
          candidates.emplace_back(InstructionKind::kBackward, m);
          break;
        }
        if (st.outstanding_recompute < 0) {
          candidates.emplace_back(InstructionKind::kRecompute, m);
          break;
        }
      }
      const int m = st.next_forward;
      if (m < M_ && (s == 0 || st.input_arrived[m])) {
        const int limit = w_.stages[static_cast<std::size_t>(s)].max_in_flight;
        if (!atlas || st.in_flight < limit) candidates.emplace_back(InstructionKind::kForward, m);
      }
      // Idle with every forward run: recompute ahead for the next backward (one at a time). Not
      // while forwards remain: a recomputation holds the GPU to its backward (rule 4), and a
      // forward arriving meanwhile would wait behind it.
      if (candidates.empty() && needs_recompute(s) && st.outstanding_recompute < 0 && st.next_forward == M_) {
        int next = st.lowest_unfinished;
        while (next < st.next_forward && (st.backward_done[next] || st.recompute_done[next])) ++next;
        if (next < st.next_forward) candidates.emplace_back(InstructionKind::kRecompute, next);
      }
    }
    if (candidates.empty()) return std::nullopt;
    std::size_t best = 0;
    double best_start = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      const double start = earliest_start(g, candidates[i].first, t);
      if (start < best_start) best = i, best_start = start;
      if (start <= t) break;
    }
    return Choice{candidates[best].first, candidates[best].second, best_start};
  }

  void try_start(int g, double t) {
    GpuState& st = gpus_[g];
    if (st.busy) return;
    const std::optional<Choice> choice = orders_ ? choose_static(g, t) : choose_dynamic(g, t);
    if (!choice) return;
    reserve(g, choice->kind, choice->start_s);
    const auto [d, energy] = cost(g, choice->kind);
    st.busy = true;
    ++st.position;
    if (choice->kind == InstructionKind::kForward) st.next_forward = std::max(st.next_forward, choice->microbatch + 1);
    result_.tasks[g].push_back({choice->kind, choice->microbatch, choice->start_s, choice->start_s + d});
    result_.busy_s += d;
    result_.computation_j += energy;
    push(choice->start_s + d, EventType::kTaskEnd, g, 0);
  }

  void push(double time, EventType type, std::int32_t a, std::uint32_t version) {
    events_.push(Event{time, sequence_++, type, a, version});
  }

  void send(int p, int from, int to, int m, bool gradient, double t) {
    const int hop = std::min(from, to);
    const std::size_t c = channel_of(p, hop, gradient ? 1 : 0);
    GeoTransfer transfer;
    transfer.pipeline = p, transfer.from_stage = from, transfer.to_stage = to, transfer.microbatch = m;
    transfer.gradient = gradient;
    transfer.wan = pl_.crosses_wan(p, hop);
    transfer.channel = static_cast<std::int32_t>(c);
    transfer.start_s = t;
    transfer.bytes = gradient ? w_.gradient_bytes : w_.activation_bytes;
    const auto index = static_cast<std::int32_t>(result_.transfers.size());
    result_.transfers.push_back(transfer);
    Channel& ch = channels_[c];
    ch.advance(t);
    if (ch.fifo && !ch.active.empty()) {
      ch.waiting.emplace_back(transfer.bytes, index);
      return;
    }
    ch.active.push({ch.work + transfer.bytes, index});
    reschedule(static_cast<std::int32_t>(c));
  }

  void reschedule(std::int32_t c) {
    Channel& ch = channels_[static_cast<std::size_t>(c)];
    ++ch.version;
    if (ch.active.empty()) return;
    const double left = std::max(0.0, ch.active.top().first - ch.work);
    push(ch.updated_s + left * static_cast<double>(ch.active.size()) / ch.bandwidth, EventType::kChannelDone, c,
         ch.version);
  }

  void channel_done(std::int32_t c, std::uint32_t version, double t) {
    Channel& ch = channels_[static_cast<std::size_t>(c)];
    if (version != ch.version) return;
    ch.advance(t);
    // Done when what is left would take under a picosecond: with a fast link, the time left can
    // be below what the clock's floating point can add to `t`.
    while (!ch.active.empty() &&
           (ch.active.top().first - ch.work) * static_cast<double>(ch.active.size()) / ch.bandwidth <= 1e-12) {
      const std::int32_t index = ch.active.top().second;
      ch.active.pop();
      GeoTransfer& transfer = result_.transfers[static_cast<std::size_t>(index)];
      transfer.sent_s = t;
      transfer.arrival_s = t + ch.latency;
      push(transfer.arrival_s, EventType::kArrival, index, 0);
    }
    if (ch.fifo && ch.active.empty() && !ch.waiting.empty()) {
      const auto [bytes, next] = ch.waiting.front();
      ch.waiting.pop_front();
      ch.active.push({ch.work + bytes, next});
      result_.transfers[static_cast<std::size_t>(next)].start_s = t;
    }
    reschedule(c);
  }

  void arrive(std::int32_t index, double t) {
    const GeoTransfer& transfer = result_.transfers[static_cast<std::size_t>(index)];
    const int g = pl_.gpu(transfer.pipeline, transfer.to_stage);
    GpuState& st = gpus_[g];
    if (transfer.gradient)
      st.gradient_ready.insert(transfer.microbatch);
    else
      st.input_arrived[transfer.microbatch] = 1;
    try_start(g, t);
  }

  void finish_task(int g, double t) {
    GpuState& st = gpus_[g];
    st.busy = false;
    const GeoTask& task = result_.tasks[g].back();
    const int p = g / S_, s = g % S_, m = task.microbatch;
    switch (task.kind) {
      case InstructionKind::kForward:
        st.forward_done[m] = 1;
        ++st.in_flight;
        result_.peak_in_flight[s] = std::max(result_.peak_in_flight[s], st.in_flight);
        if (s < S_ - 1)
          send(p, s, s + 1, m, false, t);
        else
          st.gradient_ready.insert(m);
        break;
      case InstructionKind::kRecompute:
        st.recompute_done[m] = 1;
        st.outstanding_recompute = m;
        break;
      default:
        st.backward_done[m] = 1;
        st.gradient_ready.erase(m);
        --st.in_flight;
        if (st.outstanding_recompute == m) st.outstanding_recompute = -1;
        while (st.lowest_unfinished < M_ && st.backward_done[st.lowest_unfinished]) ++st.lowest_unfinished;
        if (s > 0) send(p, s, s - 1, m, true, t);
        stage_last_backward_[s] = std::max(stage_last_backward_[s], t);
        --backwards_left_[s];
        break;
    }
    try_start(g, t);
  }

  void finish_iteration() {
    result_.allreduces.resize(S_);
    for (int s = 0; s < S_; ++s) {
      bool one_dc = true;
      for (int p = 1; p < P_; ++p) one_dc = one_dc && pl_.dc_of(p, s) == pl_.dc_of(0, s);
      const double bandwidth = one_dc ? net_.pair_bandwidth(pl_.dc_of(0, s), pl_.dc_of(0, s)) : net_.wan_pair_bandwidth();
      StageAllReduce& a = result_.allreduces[s];
      a.start_s = stage_last_backward_[s];
      a.end_s = a.start_s + ring_allreduce_s(w_.stages[s].parameters, P_, bandwidth);
      a.wan = !one_dc && P_ > 1;
      result_.pipeline_time_s = std::max(result_.pipeline_time_s, a.start_s);
      result_.iteration_time_s = std::max(result_.iteration_time_s, a.end_s);
      const StageWork& work = w_.stages[s];
      const double per_microbatch = recompute_ ? work.stash_bytes : work.working_bytes;
      result_.peak_memory_bytes.push_back(work.resident_bytes + result_.peak_in_flight[s] * per_microbatch +
                                          (recompute_ ? work.working_bytes : 0.0));
      if (result_.peak_memory_bytes.back() > w_.memory_bytes)
        result_.warnings.push_back(fmt::format(
            "stage {} holds {:.1f} GiB at its peak ({} microbatches in flight), over the GPU's {:.1f} GiB", s,
            result_.peak_memory_bytes.back() / (1024.0 * 1024 * 1024), result_.peak_in_flight[s],
            w_.memory_bytes / (1024.0 * 1024 * 1024)));
    }
  }

  const Workload& w_;
  const NetworkSpec& net_;
  const Placement& pl_;
  Scheduler scheduler_;
  LinkSharing sharing_;
  const std::vector<std::vector<Interval>>& held_;
  const GeoEmulation* recorded_;
  const TaskCosts* costs_;  // a replay's per-task costs; null: the stages'
  int S_ = 0, M_ = 0, P_ = 0;
  bool recompute_ = false;
  std::vector<GpuState> gpus_;
  std::vector<std::pair<InstructionKind, int>> candidates_;
  // The order each GPU runs: per stage (GPipe, 1F1B) or per GPU (a replay); null: chosen as it goes.
  std::vector<std::vector<GeoTask>> stage_orders_;
  const std::vector<std::vector<GeoTask>>* orders_ = nullptr;
  bool orders_per_gpu_ = false;
  int pooled_base_ = 0;  // channels below are each pipeline's own
  std::vector<Channel> channels_;
  std::vector<int> backwards_left_;
  std::vector<double> stage_last_backward_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::uint64_t sequence_ = 0;
  GeoEmulation result_;
};

void check_shapes(const Workload& workload, const Placement& placement) {
  if (placement.stages != workload.num_stages())
    throw InputError(fmt::format("the placement has {} stages, the workload {}", placement.stages, workload.num_stages()));
  if (placement.pipelines < 1) throw InputError("no pipeline to emulate");
}

}  // namespace

GeoEmulation emulate(const Workload& workload, const NetworkSpec& network, const Placement& placement,
                     const EmulationOptions& options) {
  validate(network);
  check_shapes(workload, placement);
  if (!options.held.empty() && options.held.size() != static_cast<std::size_t>(placement.num_gpus()))
    throw InputError("held intervals: one list per GPU expected");
  Engine engine(workload, network, placement, options.scheduler, options.sharing, options.held, nullptr);
  return engine.run();
}

GeoEmulation replay(const Workload& workload, const NetworkSpec& network, const GeoEmulation& recorded,
                    const std::vector<std::vector<Interval>>& held) {
  validate(network);
  check_shapes(workload, recorded.placement);
  if (!held.empty() && held.size() != static_cast<std::size_t>(recorded.placement.num_gpus()))
    throw InputError("held intervals: one list per GPU expected");
  Engine engine(workload, network, recorded.placement, recorded.scheduler, recorded.sharing, held, &recorded);
  GeoEmulation result = engine.run();
  return result;
}

GeoEmulation replay(const Workload& workload, const NetworkSpec& network, const GeoEmulation& recorded,
                    const std::vector<std::vector<Interval>>& held, const TaskCosts& costs) {
  validate(network);
  check_shapes(workload, recorded.placement);
  if (!held.empty() && held.size() != static_cast<std::size_t>(recorded.placement.num_gpus()))
    throw InputError("held intervals: one list per GPU expected");
  bool shaped = costs.size() == recorded.tasks.size();
  for (std::size_t g = 0; shaped && g < costs.size(); ++g) shaped = costs[g].size() == recorded.tasks[g].size();
  if (!shaped) throw InputError("replay costs: one per recorded computation expected");
  Engine engine(workload, network, recorded.placement, recorded.scheduler, recorded.sharing, held, &recorded, &costs);
  return engine.run();
}

TaskCosts stretch_into_slack(const GeoEmulation& recorded, const StretchChooser& stretch) {
  const Placement& pl = recorded.placement;
  const int S = pl.stages;
  const int G = pl.num_gpus();
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // Where each (kind, microbatch) sits in its GPU's order.
  auto slot = [](InstructionKind kind, int m) {
    return static_cast<std::size_t>(3 * m + (kind == InstructionKind::kForward ? 0 : kind == InstructionKind::kRecompute ? 1 : 2));
  };
  std::vector<std::vector<int>> index_of(static_cast<std::size_t>(G));
  for (int g = 0; g < G; ++g) {
    const auto& tasks = recorded.tasks[static_cast<std::size_t>(g)];
    int top = 0;
    for (const GeoTask& t : tasks) top = std::max(top, t.microbatch + 1);
    index_of[g].assign(static_cast<std::size_t>(3 * top), -1);
    for (std::size_t i = 0; i < tasks.size(); ++i) index_of[g][slot(tasks[i].kind, tasks[i].microbatch)] = static_cast<int>(i);
  }
  // The next transfer on each one's channel (FIFO order: the order they were sent).
  const std::size_t X = recorded.transfers.size();
  std::vector<std::int64_t> next_on_channel(X, -1);
  {
    std::map<std::int32_t, std::size_t> last;
    for (std::size_t k = 0; k < X; ++k) {
      const std::int32_t channel = recorded.transfers[k].channel;
      if (auto it = last.find(channel); it != last.end()) next_on_channel[it->second] = static_cast<std::int64_t>(k);
      last[channel] = k;
    }
  }
  const bool fifo = recorded.sharing == LinkSharing::kQueue;

  TaskCosts costs(static_cast<std::size_t>(G));
  std::vector<std::vector<double>> latest_start(static_cast<std::size_t>(G));
  for (int g = 0; g < G; ++g) {
    costs[g].resize(recorded.tasks[g].size());
    latest_start[g].assign(recorded.tasks[g].size(), kInf);
  }
  std::vector<double> latest_request(X, kInf), latest_transfer_start(X, kInf);

  // Items latest first: every dependency points from an item to one that starts strictly later.
  struct Item {
    double start_s;
    bool transfer;
    int gpu;
    std::size_t index;
  };
  std::vector<Item> items;
  for (int g = 0; g < G; ++g)
    for (std::size_t i = 0; i < recorded.tasks[g].size(); ++i) items.push_back({recorded.tasks[g][i].start_s, false, g, i});
  for (std::size_t k = 0; k < X; ++k) items.push_back({recorded.transfers[k].start_s, true, -1, k});
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return a.start_s != b.start_s ? a.start_s > b.start_s : a.transfer < b.transfer;  // at a tie, a transfer before its sender
  });
  // The transfer each computation sends, by (gpu, index), and when it was asked for (the
  // sender's end; a transfer's start_s is when it left its queue).
  std::vector<std::vector<std::int64_t>> sends(static_cast<std::size_t>(G));
  std::vector<double> requested_s(X, 0.0);
  for (int g = 0; g < G; ++g) sends[g].assign(recorded.tasks[g].size(), -1);
  for (std::size_t k = 0; k < X; ++k) {
    const GeoTransfer& x = recorded.transfers[k];
    const int g = pl.gpu(x.pipeline, x.from_stage);
    const int i = index_of[g][slot(x.gradient ? InstructionKind::kBackward : InstructionKind::kForward, x.microbatch)];
    if (i < 0) throw InputError("stretch_into_slack: a transfer without its sender in the recorded run");
    sends[g][static_cast<std::size_t>(i)] = static_cast<std::int64_t>(k);
    requested_s[k] = recorded.tasks[g][static_cast<std::size_t>(i)].end_s;
  }

  for (const Item& item : items) {
    if (item.transfer) {
      const std::size_t k = item.index;
      const GeoTransfer& x = recorded.transfers[k];
      const int receiver = pl.gpu(x.pipeline, x.to_stage);
      const int r = index_of[receiver][slot(x.gradient ? InstructionKind::kBackward : InstructionKind::kForward, x.microbatch)];
      double latest_sent = r >= 0 ? latest_start[receiver][static_cast<std::size_t>(r)] - (x.arrival_s - x.sent_s) : kInf;
      const std::int64_t next = next_on_channel[k];
      if (next >= 0) latest_sent = std::min(latest_sent, latest_transfer_start[static_cast<std::size_t>(next)]);
      latest_transfer_start[k] = latest_sent - (x.sent_s - x.start_s);
      // Its request (the sender's end) stays before the next one's on the channel (FIFO order);
      // on a link that splits its bandwidth every request changes the others' shares: none moves.
      latest_request[k] = fifo ? std::min(latest_transfer_start[k],
                                          next >= 0 ? requested_s[static_cast<std::size_t>(next)] - kTouch_s : kInf)
                               : requested_s[k];
      continue;
    }
    const int g = item.gpu;
    const std::size_t i = item.index;
    const GeoTask& task = recorded.tasks[g][i];
    double latest_end = recorded.allreduces[static_cast<std::size_t>(g % S)].start_s;
    if (i + 1 < recorded.tasks[g].size()) latest_end = std::min(latest_end, latest_start[g][i + 1]);
    if (const std::int64_t k = sends[g][i]; k >= 0) latest_end = std::min(latest_end, latest_request[static_cast<std::size_t>(k)]);
    const double recorded_time = task.end_s - task.start_s;
    // A hair of margin keeps the replay's events in their recorded order.
    const double window = std::max(recorded_time, latest_end - task.start_s - kTouch_s);
    TaskCost chosen = stretch(g, static_cast<int>(i), window);
    if (!(chosen.time_s <= window + 1e-12)) chosen.time_s = window;
    costs[g][i] = chosen;
    latest_start[g][i] = std::max(task.start_s, latest_end - chosen.time_s);
  }
  return costs;
}

std::vector<std::vector<Interval>> bubbles(const GeoEmulation& emulation, double min_s) {
  const Placement& pl = emulation.placement;
  std::vector<std::vector<Interval>> out(static_cast<std::size_t>(pl.num_gpus()));
  for (int g = 0; g < pl.num_gpus(); ++g) {
    const int s = g % pl.stages;
    const StageAllReduce& a = emulation.allreduces[static_cast<std::size_t>(s)];
    double free_from = 0.0;
    auto add = [&](double from, double to) {
      // An all-reduce inside a DC keeps the GPU (NCCL's kernels): not a bubble. One across the
      // WAN runs over TCP from host memory (Atlas §3.1), leaving the GPU idle.
      auto put = [&](double x, double y) {
        if (y - x > min_s) out[g].push_back({x, y});
      };
      if (a.wan || a.end_s <= from || a.start_s >= to || a.end_s <= a.start_s) return put(from, to);
      put(from, std::min(to, a.start_s));
      put(std::max(from, a.end_s), to);
    };
    for (const GeoTask& task : emulation.tasks[static_cast<std::size_t>(g)]) {
      add(free_from, task.start_s);
      free_from = task.end_s;
    }
    add(free_from, emulation.iteration_time_s);
  }
  return out;
}

}  // namespace perseus::geo
