#include "perseus/plan/plan_store.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

namespace perseus {
namespace fs = std::filesystem;

std::size_t PlanStoreLayout::instructions() const {
  std::size_t n = 0;
  for (const auto& stage : stages) n += stage.size();
  return n;
}

namespace {

constexpr std::size_t kRecordAlignment = 64;
constexpr std::size_t kPrefixBytes = 24;  // magic + header length
constexpr int kMaxClockMhz = 65535;

std::string header_json(const PlanStoreLayout& layout, std::size_t plans) {
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& stage : layout.stages) {
    nlohmann::json list = nlohmann::json::array();
    for (const Instruction& i : stage) list.push_back({to_string(i.kind), i.microbatch, i.chunk});
    stages.push_back(std::move(list));
  }
  const nlohmann::json header = {{"schema", "perseus.plans/1"},
                                 {"version", kPlanStoreVersion},
                                 {"plans", plans},
                                 {"stages", layout.stages.size()},
                                 {"index_bytes", layout.index_bytes()},
                                 {"record_bytes", layout.record_bytes()},
                                 {"clocks_mhz", layout.clocks_mhz},
                                 {"problem_digest", layout.problem_digest},
                                 {"instructions", std::move(stages)}};
  std::string text = header.dump();
  const std::size_t end = kPrefixBytes + text.size();
  text.append((kRecordAlignment - end % kRecordAlignment) % kRecordAlignment, ' ');
  return text;
}

void put_u64(std::string& out, std::uint64_t value) {
  for (int b = 0; b < 8; ++b) out.push_back(static_cast<char>((value >> (8 * b)) & 0xff));
}

std::uint64_t get_u64(const unsigned char* bytes) {
  std::uint64_t value = 0;
  for (int b = 7; b >= 0; --b) value = (value << 8) | bytes[b];
  return value;
}

void read_exactly(int fd, void* buffer, std::size_t bytes, std::uint64_t offset, const fs::path& path,
                  std::string_view what) {
  auto* out = static_cast<char*>(buffer);
  std::size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd, out + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw InputError(fmt::format("{}: truncated: cannot read {}", path.string(), what));
    done += static_cast<std::size_t>(n);
  }
}

PlanStoreLayout parse_layout(const nlohmann::json& h, const fs::path& path, std::size_t& plans) {
  const std::string where = path.string() + ": header";
  PlanStoreLayout layout;
  try {
    if (h.at("schema").get<std::string>() != "perseus.plans/1" || h.at("version").get<int>() != kPlanStoreVersion) {
      throw InputError(fmt::format("{}: unsupported schema {} version {}", where, h.at("schema").dump(),
                                   h.at("version").dump()));
    }
    plans = h.at("plans").get<std::size_t>();
    layout.clocks_mhz = h.at("clocks_mhz").get<std::vector<int>>();
    layout.problem_digest = h.at("problem_digest").get<std::string>();
    for (std::size_t k = 0; k < layout.clocks_mhz.size(); ++k) {
      const int c = layout.clocks_mhz[k];
      if (c <= 0 || c > kMaxClockMhz || (k > 0 && c <= layout.clocks_mhz[k - 1])) {
        throw InputError(fmt::format("{}: clocks_mhz must be ascending clocks in 1..{} MHz", where, kMaxClockMhz));
      }
    }
    if (layout.clocks_mhz.empty()) throw InputError(where + ": clocks_mhz is empty");
    const nlohmann::json& stages = h.at("instructions");
    if (!stages.is_array() || stages.size() != h.at("stages").get<std::size_t>()) {
      throw InputError(where + ": 'instructions' must hold one list per stage");
    }
    for (std::size_t s = 0; s < stages.size(); ++s) {
      auto& list = layout.stages.emplace_back();
      for (const nlohmann::json& entry : stages[s]) {
        const auto kind = parse_instruction_kind(entry.at(0).get<std::string>());
        if (!kind) throw InputError(fmt::format("{}: stage {}: unknown instruction {}", where, s, entry.at(0).dump()));
        list.push_back({*kind, static_cast<int>(s), entry.at(1).get<int>(), entry.at(2).get<int>()});
      }
    }
    if (h.at("index_bytes").get<int>() != layout.index_bytes() ||
        h.at("record_bytes").get<std::size_t>() != layout.record_bytes()) {
      throw InputError(fmt::format("{}: index_bytes {} / record_bytes {} disagree with {} clocks and {} instructions",
                                   where, h.at("index_bytes").dump(), h.at("record_bytes").dump(),
                                   layout.clocks_mhz.size(), layout.instructions()));
    }
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: {}", where, e.what()));
  }
  return layout;
}

}  // namespace

PlanStoreWriter::PlanStoreWriter(const fs::path& path, PlanStoreLayout layout, std::size_t expected_plans)
    : path_(path), layout_(std::move(layout)), expected_(expected_plans) {
  if (layout_.clocks_mhz.empty()) throw InputError(path.string() + ": a plan store needs at least one clock");
  std::sort(layout_.clocks_mhz.begin(), layout_.clocks_mhz.end());
  layout_.clocks_mhz.erase(std::unique(layout_.clocks_mhz.begin(), layout_.clocks_mhz.end()), layout_.clocks_mhz.end());
  if (layout_.clocks_mhz.front() <= 0 || layout_.clocks_mhz.back() > kMaxClockMhz) {
    throw InputError(fmt::format("{}: clocks must lie in 1..{} MHz", path.string(), kMaxClockMhz));
  }
  index_of_mhz_.assign(static_cast<std::size_t>(layout_.clocks_mhz.back()) + 1, 0);
  for (std::size_t k = 0; k < layout_.clocks_mhz.size(); ++k) {
    index_of_mhz_[static_cast<std::size_t>(layout_.clocks_mhz[k])] = static_cast<std::uint16_t>(k + 1);
  }
  record_.resize(layout_.record_bytes());
  const std::string header = header_json(layout_, expected_);
  std::string prefix(kPlanStoreMagic);
  put_u64(prefix, header.size());
  file_ = std::fopen(path.c_str(), "wb");
  if (!file_) throw InputError(fmt::format("{}: cannot write: {}", path.string(), std::strerror(errno)));
  if (std::fwrite(prefix.data(), 1, prefix.size(), file_) != prefix.size() ||
      std::fwrite(header.data(), 1, header.size(), file_) != header.size()) {
    throw InputError(path.string() + ": write failed (disk full?)");
  }
}

PlanStoreWriter::~PlanStoreWriter() {
  if (file_) std::fclose(file_);
}

void PlanStoreWriter::add(std::span<const int> clocks_mhz) {
  if (clocks_mhz.size() != layout_.instructions()) {
    throw InputError(fmt::format("{}: plan {} has {} clocks, the layout {}", path_.string(), written_,
                                 clocks_mhz.size(), layout_.instructions()));
  }
  if (written_ == expected_) throw InputError(fmt::format("{}: more than the {} plans announced", path_.string(), expected_));
  const bool wide = layout_.index_bytes() == 2;
  for (std::size_t k = 0; k < clocks_mhz.size(); ++k) {
    const int mhz = clocks_mhz[k];
    const std::uint16_t index =
        mhz > 0 && static_cast<std::size_t>(mhz) < index_of_mhz_.size() ? index_of_mhz_[static_cast<std::size_t>(mhz)] : 0;
    if (index == 0) throw InputError(fmt::format("{}: plan {}: clock {} MHz is not in the store's table", path_.string(), written_, mhz));
    if (wide) {
      record_[2 * k] = static_cast<unsigned char>((index - 1) & 0xff);
      record_[2 * k + 1] = static_cast<unsigned char>((index - 1) >> 8);
    } else {
      record_[k] = static_cast<unsigned char>(index - 1);
    }
  }
  if (std::fwrite(record_.data(), 1, record_.size(), file_) != record_.size()) {
    throw InputError(path_.string() + ": write failed (disk full?)");
  }
  ++written_;
}

void PlanStoreWriter::finish() {
  if (written_ != expected_) {
    throw InputError(fmt::format("{}: {} plans written, {} announced", path_.string(), written_, expected_));
  }
  const int closed = std::fclose(file_);
  file_ = nullptr;
  if (closed != 0) throw InputError(path_.string() + ": write failed (disk full?)");
}

void write_plan_store(const fs::path& path, const PlanStoreLayout& layout, const std::vector<std::vector<int>>& plans) {
  const fs::path temporary = path.parent_path() / (".perseus-tmp-" + std::to_string(::getpid()) + "-" + path.filename().string());
  try {
    PlanStoreWriter writer(temporary, layout, plans.size());
    for (const auto& plan : plans) writer.add(plan);
    writer.finish();
    fs::rename(temporary, path);
  } catch (...) {
    std::error_code ignored;
    fs::remove(temporary, ignored);
    throw;
  }
}

PlanStore::PlanStore(const fs::path& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw InputError(fmt::format("{}: cannot open: {}", path.string(), std::strerror(errno)));
  try {
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) throw InputError(path.string() + ": not a regular file");
    const auto size = static_cast<std::uint64_t>(st.st_size);
    unsigned char prefix[kPrefixBytes];
    if (size < kPrefixBytes) throw InputError(path.string() + ": not a perseus plan store (too short)");
    read_exactly(fd_, prefix, kPrefixBytes, 0, path, "the header");
    if (std::memcmp(prefix, kPlanStoreMagic.data(), kPlanStoreMagic.size()) != 0) {
      throw InputError(path.string() + ": not a perseus plan store (it does not start with 'perseus.plans/1')");
    }
    const std::uint64_t header_bytes = get_u64(prefix + 16);
    if (header_bytes > size - kPrefixBytes) {
      throw InputError(fmt::format("{}: truncated: the header claims {} bytes, the file has {}", path.string(),
                                   header_bytes, size));
    }
    std::string header(header_bytes, '\0');
    read_exactly(fd_, header.data(), header.size(), kPrefixBytes, path, "the header");
    nlohmann::json parsed;
    try {
      parsed = nlohmann::json::parse(header);
    } catch (const nlohmann::json::exception& e) {
      throw InputError(fmt::format("{}: header is not valid JSON: {}", path.string(), e.what()));
    }
    layout_ = parse_layout(parsed, path, plans_);
    records_offset_ = kPrefixBytes + header_bytes;
    const std::uint64_t record = layout_.record_bytes();
    if (record == 0) throw InputError(path.string() + ": header: a plan must clock at least one instruction");
    const std::uint64_t expected = records_offset_ + record * plans_;
    if (plans_ > (size / record) + 1 || size != expected) {
      throw InputError(fmt::format("{}: {}: the header announces {} plans of {} bytes ({} bytes in all), the file "
                                   "has {} bytes",
                                   path.string(), size < expected ? "truncated" : "damaged (trailing bytes)", plans_,
                                   record, expected, size));
    }
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

PlanStore::~PlanStore() {
  if (fd_ >= 0) ::close(fd_);
}

PlanStore::PlanStore(PlanStore&& other) noexcept
    : path_(std::move(other.path_)),
      layout_(std::move(other.layout_)),
      plans_(other.plans_),
      records_offset_(other.records_offset_),
      fd_(std::exchange(other.fd_, -1)) {}

PlanStore& PlanStore::operator=(PlanStore&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    layout_ = std::move(other.layout_);
    plans_ = other.plans_;
    records_offset_ = other.records_offset_;
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

std::vector<int> PlanStore::clocks(std::size_t i) const {
  if (i >= plans_) throw InputError(fmt::format("{}: no plan {} (the store holds {})", path_.string(), i, plans_));
  const std::size_t record = layout_.record_bytes();
  std::vector<unsigned char> bytes(record);
  read_exactly(fd_, bytes.data(), record, records_offset_ + record * i, path_, fmt::format("plan {}", i));
  const std::size_t n = layout_.instructions();
  const bool wide = layout_.index_bytes() == 2;
  std::vector<int> clocks(n);
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t index = wide ? bytes[2 * k] | (static_cast<std::size_t>(bytes[2 * k + 1]) << 8) : bytes[k];
    if (index >= layout_.clocks_mhz.size()) {
      throw InputError(fmt::format("{}: plan {}, clock {}: index {} beyond the {} clocks of the table", path_.string(),
                                   i, k, index, layout_.clocks_mhz.size()));
    }
    clocks[k] = layout_.clocks_mhz[index];
  }
  return clocks;
}

PipelineFrequencies PlanStore::frequencies(std::size_t i) const {
  const std::vector<int> flat = clocks(i);
  PipelineFrequencies out(layout_.stages.size());
  std::size_t k = 0;
  for (std::size_t s = 0; s < layout_.stages.size(); ++s) {
    out[s].reserve(layout_.stages[s].size());
    for (const Instruction& instruction : layout_.stages[s]) {
      out[s].emplace_back(std::string(to_string(instruction.kind)), flat[k++]);
    }
  }
  return out;
}

}  // namespace perseus
