// The compact plan store: every plan of a frontier in one file, `plans.bin`.
//
// A plan is one GPU clock per instruction of every stage. All plans of a frontier clock the
// same instructions in the same order and pick among few clocks, so the store keeps the
// instruction layout and the clock table once, in a JSON header, and each plan as one
// fixed-size record of clock indices (one byte each while there are at most 256 clocks).
// Fixed-size records make plan i one seek away: readers never load the whole file.
//
// Layout (all integers little-endian; docs/formats.md describes every field):
//   bytes 0..15   the magic "perseus.plans/1\n"
//   bytes 16..23  H, the JSON header's length in bytes (uint64)
//   bytes 24..    the JSON header, padded with spaces so the records start at a multiple of 64
//   then          `plans` records of `record_bytes` bytes: for stage 0, 1, ... in turn, for each
//                 of the stage's instructions in execution order, the index of its clock in
//                 `clocks_mhz` (uint8 or uint16, per `index_bytes`)
// The file ends exactly after the last record; anything else is a truncated or damaged store.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "perseus/model/errors.hpp"
#include "perseus/model/frequencies.hpp"
#include "perseus/model/instruction.hpp"

namespace perseus {

inline constexpr std::string_view kPlanStoreMagic = "perseus.plans/1\n";
inline constexpr int kPlanStoreVersion = 1;

// What every plan of a store clocks, and how its records are laid out.
struct PlanStoreLayout {
  std::vector<std::vector<Instruction>> stages;  // per stage, the instructions in execution order
  std::vector<int> clocks_mhz;                   // ascending; records hold indices into it
  std::string problem_digest;                    // identifies the profile and schedule the plans are for

  std::size_t instructions() const;              // over all stages: the clocks per record
  int index_bytes() const { return clocks_mhz.size() <= 256 ? 1 : 2; }
  std::size_t record_bytes() const { return instructions() * static_cast<std::size_t>(index_bytes()); }
};

// Writes a store record by record, so that a writer never holds all plans at once.
// Throws InputError when a file cannot be written or a clock is not in the layout's table.
class PlanStoreWriter {
 public:
  // `expected_plans` is written into the header up front; finish() checks it was met.
  PlanStoreWriter(const std::filesystem::path& path, PlanStoreLayout layout, std::size_t expected_plans);
  ~PlanStoreWriter();
  PlanStoreWriter(const PlanStoreWriter&) = delete;
  PlanStoreWriter& operator=(const PlanStoreWriter&) = delete;

  // One plan: its clocks in record order (stage-major, execution order). O(instructions).
  void add(std::span<const int> clocks_mhz);
  void finish();  // flushes and closes; throws if fewer plans were added than announced

 private:
  std::filesystem::path path_;
  PlanStoreLayout layout_;
  std::size_t expected_ = 0, written_ = 0;
  std::vector<std::uint16_t> index_of_mhz_;  // clock (MHz) -> index + 1; 0: not in the table
  std::vector<unsigned char> record_;
  std::FILE* file_ = nullptr;
};

// Reads a store lazily: opening reads and checks the header and the file's size; each plan
// is read on demand with one positioned read. Every error names the file and what is wrong.
class PlanStore {
 public:
  explicit PlanStore(const std::filesystem::path& path);
  ~PlanStore();
  PlanStore(PlanStore&&) noexcept;
  PlanStore& operator=(PlanStore&&) noexcept;

  const std::filesystem::path& path() const { return path_; }
  const PlanStoreLayout& layout() const { return layout_; }
  std::size_t size() const { return plans_; }

  // Plan i's clocks in record order; InputError when i is out of range or the record holds a
  // clock index beyond the table.
  std::vector<int> clocks(std::size_t i) const;
  // Plan i as per-stage (instruction name, MHz) lists, the form freqs_pipeline files hold.
  PipelineFrequencies frequencies(std::size_t i) const;

 private:
  std::filesystem::path path_;
  PlanStoreLayout layout_;
  std::size_t plans_ = 0;
  std::uint64_t records_offset_ = 0;
  int fd_ = -1;
};

// Writes `plans` (each in record order) as a store, atomically (temporary file, then rename).
void write_plan_store(const std::filesystem::path& path, const PlanStoreLayout& layout,
                      const std::vector<std::vector<int>>& plans);

}  // namespace perseus
