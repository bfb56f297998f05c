// Writing outputs so that nothing a user has is lost: whole files and whole directories put
// in place by a rename (a failed run leaves nothing half-written), `--force` replacing only
// what perseus wrote, never an input, a device or a directory of the user's.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace perseus {

// Writes `content` to a temporary file beside `path`, then renames it into place, so a
// reader never sees half a file. Throws InputError on failure.
void write_file_atomically(const std::filesystem::path& path, std::string_view content);
// A whole file as text; InputError naming it when it cannot be read or is a directory.
std::string read_text_file(const std::filesystem::path& path);
// The file perseus puts in every directory it writes: `--force` replaces only directories that
// hold it, never one a user made.
inline constexpr std::string_view kOutputMarker = ".perseus-output";

// Writes the directory `dir`: `fill` writes into a fresh staging directory beside it, which
// then takes its place. Throws InputError, leaving `dir` as it was and no staging directory
// behind, when
//   - `dir` is empty, ".", "..", the root, or the current directory or one above it;
//   - `dir` is or holds one of `inputs` (the files the command reads);
//   - `dir` exists and !force, or it exists and is not a directory perseus wrote (a file, a
//     link, a device, a directory without kOutputMarker), force or not;
//   - another run wrote `dir` meanwhile, or writing fails.
void write_directory_atomically(const std::filesystem::path& dir, bool force,
                                const std::function<void(const std::filesystem::path& staging)>& fill,
                                const std::vector<std::filesystem::path>& inputs = {});
// The refusals of write_directory_atomically that need no writing, for a command to make
// before long work rather than after it; returns whether `dir` exists (and may be replaced).
bool check_output_directory(const std::filesystem::path& dir, bool force,
                            const std::vector<std::filesystem::path>& inputs = {});
// The same with the files given as (name, content) pairs; a name may hold subdirectories.
void write_directory_atomically(const std::filesystem::path& dir, bool force,
                                const std::vector<std::pair<std::string, std::string>>& files,
                                const std::vector<std::filesystem::path>& inputs = {});
// Before replacing a single output file: InputError when `path` is empty or one of `inputs`, or
// exists and is not a regular file (force or not), or exists and !force.
void check_replaceable_file(const std::filesystem::path& path, bool force,
                            const std::vector<std::filesystem::path>& inputs = {});
// The directory an output `path` is written into, created with its parents if missing (as
// `mkdir -p`). Throws InputError when it cannot be (a file in the way, no permission).
std::filesystem::path prepare_output_parent(const std::filesystem::path& path);

}  // namespace perseus
