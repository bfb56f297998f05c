// Gavel's scheduling policies as linear programs over an allocation X (docs/cluster.md): X[m][j]
// is the fraction of time job m spends on GPU type j between two recomputations, and job m's
// effective throughput is sum_j T[m][j] X[m][j]. Every policy keeps X valid:
//   0 <= X[m][j] <= 1 (0 where the job cannot run),  sum_j X[m][j] <= 1,
//   sum_m scale_factor[m] X[m][j] <= workers[j].
// Heterogeneity-aware policies see T; agnostic ones (the baselines) see every GPU type as alike
// (T = 1 wherever a job can run), so a job's time falls on the types it can run in proportion to
// their GPU counts, and are judged on the real T afterwards.
//
//   max-min-fairness  (LAS) maximise min_m  scale_m / w_m * tput(m, X) / tput(m, X_equal),
//                     X_equal[m][j] = workers[j] / total workers (an equal share of each type);
//   fifo              maximise sum_m (M - m) tput(m, X) / max_j T[m][j] (jobs in arrival order);
//   makespan          minimise max_m steps_m / tput(m, X): maximise 1/makespan;
//   finish-time-fairness  (Themis) minimise max_m rho_m, rho_m = (t_m + steps_m / tput(m, X)) /
//                     (t_m + steps_m / tput(m, X_isolated)), X_isolated: 1/n of the cluster;
//                     each rho_m a ratio of affine functions of X, so by the normalised
//                     Dinkelbach method: a few warm LPs (1 when no job has run yet, ~6 at most
//                     seen), each proving the last X optimal or finding one with a lower rho.
//   shortest-job-first  as FIFO, the order by time left at the job's best speed (steps_m /
//                     max_j T[m][j]), shortest first;
//   max-throughput    maximise sum_m tput(m, X) / max_j T[m][j] (the work done, each job's best
//                     speed counting 1; the dissertation's §6.4.1 baseline);
//   min-cost          maximise sum_m sum_j T[m][j] X[m][j] / (max_j T[m][j] c_j): work per dollar,
//                     c_j the price per hour of type j (§6.4.2, per type, as Gavel computes it);
//   min-cost-slo      the same subject to tput(m, X) >= steps_m / slo_m for every job with an SLO
//                     (§6.4.3); an SLO no allocation can meet is an InputError naming the job.
//   hierarchical      weighted max-min fairness across entities (teams), and within each entity
//                     fairness or FIFO, by water filling (§5.4.3, water_filling.hpp): LAS's
//                     normalised throughputs rise together until jobs are bottlenecked (a MILP on
//                     CBC finds them), the rest rise on. With one entity (none given) it is LAS
//                     with water filling, Pareto efficient.
// Space sharing (aware policies, a matrix with pair throughputs: Gavel's file): X also has a row
// per pair of jobs of one scale factor, the time the two spend together on scale_factor GPUs of a
// type, each at its shared speed; tput(m, X) adds its pairs' terms, sum_j X[m][j] adds its pairs'
// time, and a pair takes its GPUs once in the capacity rows (the dissertation's §5.4). A pair is
// offered on a type only where sharing beats taking turns, T_ab / T_a + T_ba / T_b > 1 (else
// time-slicing the two alone gives each as much for no more time and no more GPUs).
// An LP's optimum is a vertex that may leave GPUs idle once the objective's bottleneck is met, so
// every policy then spends what is left: with its objective held at the optimum, a second LP
// maximises the work done, sum_m tput(m, X) / max_j T[m][j] (FIFO's objective already does; FTF's
// feasibility LPs maximise it directly).
// One or two LPs on CLP (FTF a few more); O(simplex) in jobs x GPU types.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "perseus/cluster/throughputs.hpp"

namespace perseus::cluster {

enum class PolicyKind : std::uint8_t {
  kMaxMinFairness,
  kFifo,
  kMakespan,
  kFinishTimeFairness,
  kShortestJobFirst,
  kMaxThroughput,
  kMinCost,
  kMinCostSlo,
  kHierarchical,
};
std::string_view to_string(PolicyKind policy);
// "max-min-fairness" (or "las"), "fifo", "makespan", "finish-time-fairness" (or "ftf"),
// "shortest-job-first" (or "sjf"), "max-throughput", "min-cost", "min-cost-slo",
// "hierarchical"; InputError listing them.
PolicyKind parse_policy(std::string_view name);
// Whether the policy needs each job's steps left, and a price per GPU type.
bool needs_steps(PolicyKind policy);
bool needs_prices(PolicyKind policy);

struct Job {
  int type = 0;            // row of the throughput matrix
  double weight = 1.0;     // max-min fairness; hierarchical: within its entity (fairness)
  double steps = 0.0;      // iterations left (makespan, finish-time fairness)
  double elapsed_s = 0.0;  // since it arrived (finish-time fairness)
  double slo_s = kNoSlo;   // time left to its deadline (min-cost-slo); kNoSlo: none
  int entity = 0;          // hierarchical: index into PolicySpec::entities
  static constexpr double kNoSlo = std::numeric_limits<double>::infinity();
};

// A party sharing the cluster under the hierarchical policy (a team, a user): its share of the
// cluster is proportional to its weight, and its jobs divide it by fairness (their weights) or
// FIFO (the earliest job that can still gain takes all of it).
enum class EntityPolicy : std::uint8_t { kFairness, kFifo };
std::string_view to_string(EntityPolicy policy);  // "fairness", "fifo"
struct Entity {
  std::string name;
  double weight = 1.0;
  EntityPolicy policy = EntityPolicy::kFairness;
};

struct PolicySpec {
  // The fields most specs set, in order, so that `{kind, aware, prices, slack}` reads as before
  // each new field (a constructor, not an aggregate: a field added later needs no edit of
  // every brace list).
  PolicySpec(PolicyKind policy = PolicyKind::kMaxMinFairness, bool heterogeneity_aware = true,
             std::vector<double> prices_per_hour = {}, std::optional<double> energy_slack = {}, bool space_sharing = false)
      : policy(policy),
        heterogeneity_aware(heterogeneity_aware),
        prices_per_hour(std::move(prices_per_hour)),
        energy_slack(energy_slack),
        space_sharing(space_sharing) {}

  PolicyKind policy = PolicyKind::kMaxMinFairness;
  bool heterogeneity_aware = true;
  // $ per GPU-hour of each type, for the cost policies (and the simulator's cost); empty: none.
  std::vector<double> prices_per_hour;
  // Set (0 <= slack < 1): after the policy, the energy stage (energy_stage.hpp) minimises the
  // cluster's power with every job keeping (1 - slack) of its throughput. Needs a matrix with
  // energy figures; not for the cost policies (their objective is not made of throughputs).
  std::optional<double> energy_slack;
  // Let pairs of jobs share GPUs (see above). Heterogeneity-aware only; needs pair throughputs;
  // not with the energy stage (no energy figures for jobs sharing a GPU).
  bool space_sharing = false;
  // The hierarchical policy's entities; empty: one, with fairness.
  std::vector<Entity> entities;
};

// The hierarchical policy's entities: spec.entities, or (none given) one, "all", with fairness.
std::vector<Entity> entities_of(const PolicySpec& spec);
// The index of the entity named `name` among `entities`, or -1.
int find_entity(const std::vector<Entity>& entities, std::string_view name);
// The entity the index-th job is dealt to when its input names none: round-robin.
int dealt_entity(std::size_t index, const PolicySpec& spec);

// On-demand prices of Gavel's GPU types in $/GPU-hour (AWS p2.xlarge K80 0.90, p3.2xlarge V100
// 3.06; P100 1.46, Google Cloud's GPU price): one per type of `matrix`, InputError naming a type
// it has no price for.
std::vector<double> default_prices(const ThroughputMatrix& matrix);

// Two jobs sharing GPUs and the time they spend together on each type (each at its speed in
// ThroughputMatrix::shared_speeds).
struct SharedShare {
  int first = 0, second = 0;               // job indices, first < second
  std::vector<double> share;               // [gpu type]: fraction of time, together
};

struct Allocation {
  std::vector<std::vector<double>> share;  // [job][gpu type]: fraction of time alone
  // [job][gpu type]: steps/s while the job runs on that type, and the power its GPUs draw there
  // (W; 0 without energy figures): the fastest operating point, or the energy stage's mix.
  std::vector<std::vector<double>> speed;
  std::vector<std::vector<double>> power_w;
  std::vector<SharedShare> pairs;          // space sharing: a job's time is its share plus its pairs'
  std::vector<double> throughput;          // [job]: effective steps/s, sum_j share x speed, plus its pairs'
  double power_w_total = 0.0;              // sum over jobs and types of share x power
  double objective = 0.0;                  // the policy's, as its LP saw it (before the energy stage)
  int lp_solves = 0;
};

// Throws InputError for a job type outside the matrix, a negative weight, steps that a policy
// needs missing (makespan, finish-time fairness, shortest job first, SLOs), workers not one
// count per GPU type, prices missing or not > 0 for a cost policy, an SLO that cannot be met,
// an energy slack outside [0, 1), on a matrix without energy figures or with a cost policy, or
// space sharing that is agnostic, on a matrix without pair throughputs, or with energy, a job of
// an entity not given or an entity weight not > 0 (hierarchical);
// SolveError when CLP fails.
Allocation allocate(const std::vector<Job>& jobs, const ThroughputMatrix& matrix, const std::vector<int>& workers,
                    const PolicySpec& spec);

// The reference allocations the policies are judged against: an equal share of each type
// (X_equal, capped by what a job can use) and 1/n of the cluster (X_isolated).
std::vector<std::vector<double>> equal_share(const std::vector<Job>& jobs, const ThroughputMatrix& matrix,
                                             const std::vector<int>& workers);
std::vector<std::vector<double>> isolated_share(const std::vector<Job>& jobs, const ThroughputMatrix& matrix,
                                                const std::vector<int>& workers);
// sum_j T[m][j] X[m][j].
double effective_throughput(const ThroughputMatrix& matrix, int job_type, const std::vector<double>& share);
// Steps/s of a job of this type alone on its fastest GPU type among those with at least its
// scale factor of GPUs in `workers`; 0 when it fits none.
double best_speed(const ThroughputMatrix& matrix, int job_type, const std::vector<int>& workers);
// The SLO a scheduler hands a policy for a job `slo_left_s` from its deadline with `steps_left`
// to do: a round early, as rounds realise an allocation only to within a round (aimed at the
// deadline itself, a cost workload's tight SLOs were missed by up to 0.04 %: 101 of 500 jobs);
// the deadline when less than a round is left; Job::kNoSlo once it cannot be met even at
// `best_steps_per_s` (it is counted as missed, and binds no more).
double slo_to_aim(double slo_left_s, double steps_left, double best_steps_per_s, double round_s);

}  // namespace perseus::cluster
