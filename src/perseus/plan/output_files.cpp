#include "perseus/plan/output_files.hpp"

#include <cerrno>
#include <csignal>
#include <fstream>

#include <unistd.h>

#include "perseus/model/errors.hpp"
#include "perseus/profile/profile.hpp"

namespace perseus {

std::string read_text_file(const std::filesystem::path& path) { return csv::read_file(path); }

std::filesystem::path prepare_output_parent(const std::filesystem::path& path) {
  const std::filesystem::path parent = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  std::error_code error;
  std::filesystem::create_directories(parent, error);
  if (error || !std::filesystem::is_directory(parent)) {
    throw InputError(parent.string() + ": cannot create the output's directory" +
                     (error ? " (" + error.message() + ")" : std::string(" (a file is in the way)")));
  }
  return parent;
}

void write_file_atomically(const std::filesystem::path& path, std::string_view content) {
  const std::filesystem::path temporary =
      path.parent_path() / (".tmp-" + std::to_string(::getpid()) + "-" + path.filename().string());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError(path.string() + ": cannot open for writing");
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.close();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(temporary, ignored);
      throw InputError(path.string() + ": write failed (disk full?)");
    }
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    std::filesystem::remove(temporary, error);
    throw InputError(path.string() + ": cannot rename temporary file into place");
  }
}

namespace {

namespace fs = std::filesystem;

// Whether `inner` is `outer` or lies inside it (both made absolute, symbolic links resolved).
bool is_within(const fs::path& inner, const fs::path& outer) {
  std::error_code error;
  const fs::path a = fs::weakly_canonical(fs::absolute(inner), error);
  const fs::path b = fs::weakly_canonical(fs::absolute(outer), error);
  auto ai = a.begin();
  for (auto bi = b.begin(); bi != b.end(); ++bi, ++ai) {
    if (bi->empty()) continue;  // a trailing separator
    if (ai == a.end() || *ai != *bi) return false;
  }
  return true;
}

}  // namespace

bool check_output_directory(const fs::path& dir, bool force, const std::vector<fs::path>& inputs) {
  if (dir.empty()) throw InputError("the output directory is an empty path: give the directory to write");
  const std::string name = dir.lexically_normal().filename().string();
  if (name == "." || name == ".." || dir.lexically_normal() == dir.root_path() ||
      is_within(fs::current_path(), dir)) {
    throw InputError(dir.string() + ": is the current directory, one above it or the root; give a new directory "
                     "for the output");
  }
  for (const fs::path& input : inputs) {
    if (!input.empty() && is_within(input, dir)) {
      throw InputError(dir.string() + ": the output would replace the input " + input.string() +
                       "; write the output elsewhere");
    }
  }
  std::error_code error;
  const fs::file_status status = fs::symlink_status(dir, error);
  if (!fs::exists(status)) return false;
  if (!force) throw InputError(dir.string() + ": exists (use --force to replace a directory perseus wrote)");
  if (fs::is_symlink(status) || !fs::is_directory(status)) {
    throw InputError(dir.string() + ": exists and is not a directory perseus wrote (a file, a link or a device): "
                     "not replaced, even with --force");
  }
  if (!fs::exists(dir / kOutputMarker)) {
    throw InputError(dir.string() + ": exists and perseus did not write it (no " + std::string(kOutputMarker) +
                     " in it): not replaced, even with --force; remove it yourself or choose another directory");
  }
  return true;
}

namespace {

// A run killed mid-write (SIGKILL, a power cut) leaves its staging or retired copy beside the
// output, named with its pid: the next run writing the same output removes those of dead runs.
void remove_abandoned_copies(const fs::path& parent, const std::string& name) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(parent, error)) {
    const std::string file = entry.path().filename().string();
    for (const std::string prefix : {".perseus-tmp-", ".perseus-old-"}) {
      if (file.rfind(prefix, 0) != 0 || !file.ends_with("-" + name)) continue;
      const std::string pid_text = file.substr(prefix.size(), file.size() - prefix.size() - name.size() - 1);
      if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
      const long pid = std::stol(pid_text);
      if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) fs::remove_all(entry.path(), error);
    }
  }
}

}  // namespace

void write_directory_atomically(const fs::path& given, bool force, const std::function<void(const fs::path&)>& fill,
                                const std::vector<fs::path>& inputs) {
  // "out/" names "out": without the trailing separator, the path has a name to stage beside.
  fs::path dir = given.lexically_normal();
  if (!dir.has_filename() && dir.has_relative_path()) dir = dir.parent_path();
  const bool exists = check_output_directory(dir, force, inputs);
  const fs::path parent = prepare_output_parent(dir);
  const std::string tag = std::to_string(::getpid());
  const std::string name = dir.lexically_normal().filename().string();
  const fs::path staging = parent / (".perseus-tmp-" + tag + "-" + name);
  const fs::path retired = parent / (".perseus-old-" + tag + "-" + name);
  std::error_code ignored;
  fs::remove_all(staging, ignored);
  remove_abandoned_copies(parent, name);
  bool moved_old = false;
  try {
    fs::create_directories(staging);
    fill(staging);
    write_file_atomically(staging / kOutputMarker,
                          "This directory was written by perseus; `--force` may replace it as a whole.\n");
    // Rename, not remove then rename: the old directory stays whole until the new one is in place.
    if (exists) {
      fs::rename(dir, retired);
      moved_old = true;
    }
    fs::rename(staging, dir);
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(staging, ignored);
    if (moved_old && !fs::exists(dir)) fs::rename(retired, dir, ignored);  // put the old one back
    if (e.code() == std::errc::directory_not_empty || e.code() == std::errc::file_exists) {
      throw InputError(dir.string() + ": written by another run meanwhile; this run's output was discarded");
    }
    throw InputError(dir.string() + ": cannot write output: " + e.code().message());
  } catch (...) {
    fs::remove_all(staging, ignored);
    if (moved_old && !fs::exists(dir)) fs::rename(retired, dir, ignored);
    throw;
  }
  if (exists) fs::remove_all(retired, ignored);
}

void write_directory_atomically(const std::filesystem::path& dir, bool force,
                                const std::vector<std::pair<std::string, std::string>>& files,
                                const std::vector<std::filesystem::path>& inputs) {
  write_directory_atomically(
      dir, force,
      [&](const std::filesystem::path& staging) {
        for (const auto& [name, content] : files) {
          const std::filesystem::path path = staging / name;
          if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
          write_file_atomically(path, content);
        }
      },
      inputs);
}

void check_replaceable_file(const std::filesystem::path& path, bool force, const std::vector<std::filesystem::path>& inputs) {
  namespace fs = std::filesystem;
  if (path.empty()) throw InputError("the output file is an empty path: give the file to write");
  for (const fs::path& input : inputs) {
    if (!input.empty() && is_within(input, path)) {
      throw InputError(path.string() + ": the output would replace the input " + input.string());
    }
  }
  std::error_code error;
  const fs::file_status status = fs::symlink_status(path, error);
  if (!fs::exists(status)) return;
  if (!fs::is_regular_file(status)) {
    throw InputError(path.string() + ": exists and is not a regular file (a directory, a link or a device): "
                     "not replaced, even with --force");
  }
  if (!force) throw InputError(path.string() + ": exists (use --force to replace it)");
}

}  // namespace perseus
