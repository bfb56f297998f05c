// Runs a shell command for a test and keeps its exit status and output (stdout and stderr
// together): how the CLI tests run `perseus` as a user does.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace perseus::testing {

struct CommandOutput {
  int status = -1;  // the exit status; -1 when it could not run or was killed
  std::string out;
};

inline CommandOutput run_command(const std::string& command) {
  CommandOutput run;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return run;
  std::array<char, 4096> buffer;
  std::size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) run.out.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

}  // namespace perseus::testing
