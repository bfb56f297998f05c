#include "fabric.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>

namespace perseus::testing {
namespace {

// Reads exactly `size` bytes; false on end of file or error.
bool read_all(int fd, void* data, std::size_t size) {
  auto* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = ::read(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

bool write_all(int fd, const void* data, std::size_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

bool write_message(int fd, const FabricMessage& message, const std::string& text = "") {
  FabricMessage m = message;
  m.length = static_cast<std::int32_t>(text.size());
  return write_all(fd, &m, sizeof(m)) && write_all(fd, text.data(), text.size());
}

}  // namespace

// ---- hub ----

FabricHub::FabricHub(int ranks, OnIteration on_iteration) : ranks_(ranks), on_iteration_(std::move(on_iteration)) {
  for (int r = 0; r < ranks; ++r) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) throw std::runtime_error("socketpair failed");
    parent_fds_.push_back(fds[0]);
    child_fds_.push_back(fds[1]);
  }
}

FabricHub::~FabricHub() {
  close_child_ends();
  for (int& fd : parent_fds_) {
    if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
  }
  if (thread_.joinable()) thread_.join();
  for (int fd : parent_fds_) {
    if (fd >= 0) ::close(fd);
  }
}

void FabricHub::close_child_ends() {
  for (int& fd : child_fds_) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
}

void FabricHub::start() {
  thread_ = std::thread([this] { run(); });
}

void FabricHub::join() {
  if (thread_.joinable()) thread_.join();
}

std::string FabricHub::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

int FabricHub::iterations() const {
  std::lock_guard lock(mutex_);
  return iterations_;
}

void FabricHub::fail(const std::string& why) {
  {
    std::lock_guard lock(mutex_);
    if (error_.empty()) error_ = why;
  }
  // Every rank still waiting on the fabric sees it close and gives up.
  for (int fd : parent_fds_) ::shutdown(fd, SHUT_RDWR);
}

void FabricHub::run() {
  std::vector<bool> open(static_cast<std::size_t>(ranks_), true);
  std::vector<bool> stopped(static_cast<std::size_t>(ranks_), false);
  std::vector<std::optional<double>> synced(static_cast<std::size_t>(ranks_));
  int sync_iteration = -1;
  std::optional<std::string> published;
  std::vector<int> waiting_for_text;
  int open_count = ranks_;
  while (open_count > 0) {
    std::vector<pollfd> polled;
    for (int r = 0; r < ranks_; ++r) {
      if (open[static_cast<std::size_t>(r)]) polled.push_back({parent_fds_[static_cast<std::size_t>(r)], POLLIN, 0});
    }
    if (::poll(polled.data(), polled.size(), -1) < 0) {
      if (errno == EINTR) continue;
      fail("poll failed");
      return;
    }
    for (const pollfd& p : polled) {
      if (p.revents == 0) continue;
      const int rank = static_cast<int>(std::find(parent_fds_.begin(), parent_fds_.end(), p.fd) - parent_fds_.begin());
      const auto r = static_cast<std::size_t>(rank);
      FabricMessage m;
      if (!read_all(p.fd, &m, sizeof(m))) {
        open[r] = false;
        --open_count;
        if (!stopped[r]) fail("rank " + std::to_string(rank) + " hung up before it was told to stop");
        continue;
      }
      std::string text(static_cast<std::size_t>(std::max(0, m.length)), '\0');
      if (!text.empty() && !read_all(p.fd, text.data(), text.size())) {
        fail("rank " + std::to_string(rank) + " sent a truncated message");
        continue;
      }
      switch (m.type) {
        case FabricMessage::kSend: {
          if (m.peer < 0 || m.peer >= ranks_) {
            fail("rank " + std::to_string(rank) + " sent to unknown rank " + std::to_string(m.peer));
            break;
          }
          FabricMessage out{FabricMessage::kDeliver, rank, m.tag, 0, m.time, 0.0};
          write_message(parent_fds_[static_cast<std::size_t>(m.peer)], out);
          break;
        }
        case FabricMessage::kSync: {
          if (sync_iteration != -1 && m.tag != sync_iteration) {
            fail("rank " + std::to_string(rank) + " synchronised iteration " + std::to_string(m.tag) + " while others "
                 "are at " + std::to_string(sync_iteration));
            break;
          }
          sync_iteration = m.tag;
          synced[r] = m.time;
          if (std::all_of(synced.begin(), synced.end(), [](const auto& t) { return t.has_value(); })) {
            double end = 0.0;
            for (const auto& t : synced) end = std::max(end, *t);
            IterationDecision decision = on_iteration_(sync_iteration, end);
            {
              std::lock_guard lock(mutex_);
              iterations_ = sync_iteration + 1;
            }
            for (int q = 0; q < ranks_; ++q) {
              const auto qi = static_cast<std::size_t>(q);
              const double slowdown = qi < decision.slowdown.size() ? decision.slowdown[qi] : 1.0;
              FabricMessage out{FabricMessage::kSyncDone, 0, decision.stop ? 1 : 0, 0, end, slowdown};
              write_message(parent_fds_[qi], out);
              if (decision.stop) stopped[qi] = true;
              synced[qi].reset();
            }
            sync_iteration = -1;
          }
          break;
        }
        case FabricMessage::kPublish:
          published = text;
          for (int q : waiting_for_text) {
            write_message(parent_fds_[static_cast<std::size_t>(q)], FabricMessage{FabricMessage::kFetched}, *published);
          }
          waiting_for_text.clear();
          break;
        case FabricMessage::kFetch:
          if (published) {
            write_message(p.fd, FabricMessage{FabricMessage::kFetched}, *published);
          } else {
            waiting_for_text.push_back(rank);
          }
          break;
        default:
          fail("rank " + std::to_string(rank) + " sent message type " + std::to_string(m.type));
      }
    }
  }
}

// ---- endpoint ----

FabricMessage FabricEndpoint::read_message(std::string* text) {
  FabricMessage m;
  if (!read_all(fd_, &m, sizeof(m))) throw std::runtime_error("the fabric hub hung up");
  std::string body(static_cast<std::size_t>(std::max(0, m.length)), '\0');
  if (!body.empty() && !read_all(fd_, body.data(), body.size())) throw std::runtime_error("the fabric hub hung up");
  if (text) *text = std::move(body);
  return m;
}

void FabricEndpoint::send(int peer, int tag, double time) {
  if (!write_message(fd_, FabricMessage{FabricMessage::kSend, peer, tag, 0, time, 0.0})) {
    throw std::runtime_error("the fabric hub hung up");
  }
}

double FabricEndpoint::receive(int peer, int tag) {
  for (;;) {
    if (const auto it = early_.find({peer, tag}); it != early_.end()) {
      const double time = it->second;
      early_.erase(it);
      return time;
    }
    const FabricMessage m = read_message(nullptr);
    if (m.type != FabricMessage::kDeliver) throw std::runtime_error("unexpected fabric message while receiving");
    early_[{m.peer, m.tag}] = m.time;
  }
}

FabricEndpoint::SyncResult FabricEndpoint::sync(int iteration, double time) {
  if (!write_message(fd_, FabricMessage{FabricMessage::kSync, 0, iteration, 0, time, 0.0})) {
    throw std::runtime_error("the fabric hub hung up");
  }
  for (;;) {
    const FabricMessage m = read_message(nullptr);
    if (m.type == FabricMessage::kSyncDone) return SyncResult{m.time, m.value, m.tag != 0};
    if (m.type != FabricMessage::kDeliver) throw std::runtime_error("unexpected fabric message while synchronising");
    early_[{m.peer, m.tag}] = m.time;
  }
}

void FabricEndpoint::publish(const std::string& text) {
  if (!write_message(fd_, FabricMessage{FabricMessage::kPublish}, text)) throw std::runtime_error("the fabric hub hung up");
}

std::string FabricEndpoint::fetch() {
  if (!write_message(fd_, FabricMessage{FabricMessage::kFetch})) throw std::runtime_error("the fabric hub hung up");
  for (;;) {
    std::string text;
    const FabricMessage m = read_message(&text);
    if (m.type == FabricMessage::kFetched) return text;
    throw std::runtime_error("unexpected fabric message while fetching");
  }
}

}  // namespace perseus::testing
