// A child process for tests: fork + exec with stdout and stderr sent to files or drained
// into memory, an optional extra descriptor handed down as fd 3, and kill/wait helpers.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace perseus::testing {

struct ChildProcessOptions {
  std::string stdout_path;  // empty: /dev/null
  std::string stderr_path;  // empty: kept in memory (see log())
  int pass_fd = -1;         // handed down as fd 3 when >= 0
  // The child's whole environment ("NAME=value" each); nullopt: this process's.
  std::optional<std::vector<std::string>> environment;
};

class ChildProcess {
 public:
  using Options = ChildProcessOptions;

  ChildProcess(const std::string& binary, const std::vector<std::string>& args, Options options = {}) {
    // Everything the child needs is built before fork: after it, only exec-safe calls.
    std::vector<std::string> copy = args;
    std::string program = binary;
    std::vector<char*> argv;
    argv.push_back(program.data());
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> environment = options.environment.value_or(std::vector<std::string>{});
    std::vector<char*> envp;
    for (std::string& e : environment) envp.push_back(e.data());
    envp.push_back(nullptr);
    const int out = ::open(options.stdout_path.empty() ? "/dev/null" : options.stdout_path.c_str(),
                           O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int err = -1;
    int pipe_fds[2] = {-1, -1};
    if (options.stderr_path.empty()) {
      if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
      err = pipe_fds[1];
    } else {
      err = ::open(options.stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    }
    if (out < 0 || err < 0) throw std::runtime_error("cannot open the child's output files");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out, STDOUT_FILENO);
      ::dup2(err, STDERR_FILENO);
      if (options.pass_fd == 3) {
        ::fcntl(3, F_SETFD, 0);
      } else if (options.pass_fd >= 0) {
        ::dup2(options.pass_fd, 3);  // dup2 clears close-on-exec
      }
      if (options.environment) {
        ::execve(program.c_str(), argv.data(), envp.data());
      } else {
        ::execv(program.c_str(), argv.data());
      }
      ::_exit(127);
    }
    ::close(out);
    ::close(err);
    if (pipe_fds[0] >= 0) {
      reader_ = std::thread([this, fd = pipe_fds[0]] {
        char buffer[4096];
        ssize_t n;
        while ((n = ::read(fd, buffer, sizeof(buffer))) > 0) {
          std::lock_guard lock(mutex_);
          log_.append(buffer, static_cast<std::size_t>(n));
        }
        ::close(fd);
      });
    }
  }
  ~ChildProcess() {
    if (pid_ > 0) kill_and_wait(SIGKILL);
    if (reader_.joinable()) reader_.join();
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }

  // The first group of `pattern` in what the child wrote to stderr (in-memory mode), waiting
  // up to `timeout`; nullopt if it never appears.
  std::optional<std::string> wait_for_log(const std::regex& pattern, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      {
        std::lock_guard lock(mutex_);
        std::smatch m;
        if (std::regex_search(log_, m, pattern)) return m.size() > 1 ? m[1].str() : m[0].str();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return std::nullopt;
  }

  // Waits for the child to end; its wait status, or nullopt (and the child killed) after `timeout`.
  std::optional<int> wait(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (pid_ > 0) {
      int status = 0;
      const pid_t done = ::waitpid(pid_, &status, WNOHANG);
      if (done == pid_) {
        pid_ = -1;
        if (reader_.joinable()) reader_.join();
        return status;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        kill_and_wait(SIGKILL);
        return std::nullopt;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return std::nullopt;
  }

  int kill_and_wait(int signal) {
    ::kill(pid_, signal);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    if (reader_.joinable()) reader_.join();
    return status;
  }

  std::string log() {
    std::lock_guard lock(mutex_);
    return log_;
  }

 private:
  pid_t pid_ = -1;
  std::thread reader_;
  std::mutex mutex_;
  std::string log_;
};

}  // namespace perseus::testing
