// The interconnect of an emulated training job whose ranks are separate processes: a hub
// (in the test process) and one endpoint per rank (in the rank's process), joined by a Unix
// socket each. Ranks run on virtual time: a point-to-point message carries the virtual time
// its sender finished, and the receiver starts no earlier (waiting, blocked, until then), so
// the processes together compute exactly the pipeline's critical path. At the end of every
// iteration all ranks synchronise (the data-parallel gradient all-reduce): each waits until
// the slowest pipeline's end, and the hub tells each rank its slowdown for the next iteration
// (a straggler) and whether to stop.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace perseus::testing {

struct FabricMessage {
  enum Type : std::int32_t { kSend = 1, kDeliver, kSync, kSyncDone, kPublish, kFetch, kFetched };
  std::int32_t type = 0;
  std::int32_t peer = 0;    // kSend: destination rank; kDeliver: source rank
  std::int32_t tag = 0;     // kSend/kDeliver: message tag; kSync: iteration; kSyncDone: stop flag
  std::int32_t length = 0;  // bytes of text that follow (kPublish, kFetched)
  double time = 0.0;        // virtual seconds
  double value = 0.0;       // kSyncDone: the rank's slowdown for the next iteration
};

// What the hub decides at the end of an iteration.
struct IterationDecision {
  bool stop = false;
  std::vector<double> slowdown;  // per rank, for the next iteration; empty: all 1
};

class FabricHub {
 public:
  // Called on the hub's thread once every rank has finished iteration `iteration`, before
  // any rank starts the next; `end_time` is the slowest rank's virtual end time.
  using OnIteration = std::function<IterationDecision(int iteration, double end_time)>;

  FabricHub(int ranks, OnIteration on_iteration);
  ~FabricHub();
  FabricHub(const FabricHub&) = delete;
  FabricHub& operator=(const FabricHub&) = delete;

  // The descriptor rank `rank`'s process must get (as fd 3); close_child_ends() after forking.
  int child_fd(int rank) const { return child_fds_[static_cast<std::size_t>(rank)]; }
  void close_child_ends();
  void start();
  // Waits for the hub's thread: it ends when every rank has hung up.
  void join();
  // Empty, or what went wrong (a rank hung up early, a malformed message).
  std::string error() const;
  int iterations() const;

 private:
  void run();
  void fail(const std::string& why);

  int ranks_;
  OnIteration on_iteration_;
  std::vector<int> parent_fds_, child_fds_;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::string error_;
  int iterations_ = 0;
};

class FabricEndpoint {
 public:
  explicit FabricEndpoint(int fd) : fd_(fd) {}

  void send(int peer, int tag, double time);
  // The virtual time of the message `tag` from `peer`, waiting for it.
  double receive(int peer, int tag);
  struct SyncResult {
    double end_time = 0.0;  // the slowest rank's end of this iteration
    double slowdown = 1.0;  // this rank's for the next iteration
    bool stop = false;
  };
  SyncResult sync(int iteration, double time);
  // Rank 0 publishes a text (the job id) that every rank fetches.
  void publish(const std::string& text);
  std::string fetch();

 private:
  FabricMessage read_message(std::string* text);
  int fd_;
  std::map<std::pair<int, int>, double> early_;  // (peer, tag) -> time, delivered before asked for
};

}  // namespace perseus::testing
