#include "perseus/server/zeus_dump.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

namespace perseus::server {
namespace {

using ordered_json = nlohmann::ordered_json;

constexpr std::size_t kMaxFolderNameBytes = 200;  // file systems allow 255; room for the hash

// Python's repr of a float: the shortest digits that read back as `value` (ties rounded to
// even, as std::to_chars does and nlohmann's Grisu2 does not always), fixed notation for
// exponents from -4 to 15 with at least one decimal ("2.0"), else d.ddde+XX ("1e-05").
std::string python_float_repr(double value) {
  if (std::isnan(value)) return "NaN";  // json.dumps's spelling; results never carry one
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  if (value == 0) return std::signbit(value) ? "-0.0" : "0.0";
  char buffer[64];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), std::fabs(value), std::chars_format::scientific);
  const std::string_view text(buffer, static_cast<std::size_t>(end - buffer));  // "d.ddde±XX"
  const std::size_t e = text.find('e');
  std::string digits(text.substr(0, e));
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exponent = std::stoi(std::string(text.substr(e + 1)));
  std::string out = value < 0 ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    out += fmt::format("e{}{:02}", exponent < 0 ? '-' : '+', std::abs(exponent));
  } else if (exponent < 0) {
    out += "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
  } else {
    const auto whole = static_cast<std::size_t>(exponent) + 1;
    if (digits.size() < whole) digits.append(whole - digits.size(), '0');
    out += digits.substr(0, whole) + "." + (digits.size() > whole ? digits.substr(whole) : "0");
  }
  return out;
}

void append_python_json(const ordered_json& value, std::string& out) {
  if (value.is_array()) {
    out += '[';
    for (std::size_t i = 0; i < value.size(); ++i) {
      if (i) out += ", ";
      append_python_json(value[i], out);
    }
    out += ']';
  } else if (value.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [key, item] : value.items()) {
      if (!first) out += ", ";
      first = false;
      out += ordered_json(key).dump(-1, ' ', /*ensure_ascii=*/true);
      out += ": ";
      append_python_json(item, out);
    }
    out += '}';
  } else if (value.is_number_float()) {
    out += python_float_repr(value.get<double>());
  } else {
    // Strings with every non-ASCII character escaped, as json.dumps does by default.
    out += value.dump(-1, ' ', /*ensure_ascii=*/true);
  }
}

bool plain_in_file_name(unsigned char c) { return c >= 0x20 && c != 0x7f && c != '/'; }

std::uint64_t fnv1a(std::string_view text) {
  std::uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

// At most `limit` bytes of `text`, never ending inside a UTF-8 character.
std::string utf8_prefix(const std::string& text, std::size_t limit) {
  if (text.size() <= limit) return text;
  std::size_t end = limit;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

ordered_json floats(const ordered_json& values) {
  ordered_json out = ordered_json::array();
  if (values.is_array()) {
    for (const ordered_json& v : values) out.push_back(v.get<double>());
  }
  return out;
}

ordered_json breakdown(const ordered_json& given) {
  ordered_json out = ordered_json::object();
  if (!given.is_object()) return out;
  for (const auto& [instruction, iterations] : given.items()) {
    ordered_json lists = ordered_json::array();
    for (const ordered_json& iteration : iterations) lists.push_back(floats(iteration));
    out[instruction] = std::move(lists);
  }
  return out;
}

const ordered_json& field(const ordered_json& object, const char* name) {
  static const ordered_json kNull;
  return object.contains(name) ? object.at(name) : kNull;
}

}  // namespace

std::string python_json(const ordered_json& value) {
  std::string out;
  append_python_json(value, out);
  return out;
}

std::string dump_folder_name(const std::string& job_id) {
  const bool plain = !job_id.empty() && job_id != "." && job_id != ".." && job_id.size() <= kMaxFolderNameBytes &&
                     std::all_of(job_id.begin(), job_id.end(), [](char c) { return plain_in_file_name(c); });
  if (plain) return job_id;
  std::string name;
  for (char c : utf8_prefix(job_id, kMaxFolderNameBytes)) name += plain_in_file_name(c) ? c : '_';
  return fmt::format("{}-{:016x}", name, fnv1a(job_id));
}

std::string ranks_file(const std::map<int, RankInfo>& ranks) {
  ordered_json list = ordered_json::array();
  for (const auto& [rank, info] : ranks) {
    ordered_json entry;
    entry["rank"] = info.rank;
    entry["dp_rank"] = info.dp_rank;
    entry["pp_rank"] = info.pp_rank;
    entry["tp_rank"] = info.tp_rank;
    entry["available_frequencies"] = info.available_frequencies;
    list.push_back(std::move(entry));
  }
  return python_json(list);
}

std::string schedules_file(const Deployment& deployment, const std::map<int, RankInfo>& ranks) {
  ordered_json list = ordered_json::array();
  for (const auto& [rank, info] : ranks) {
    ordered_json frequencies = ordered_json::array();
    ordered_json power_states = ordered_json::array();
    for (const auto& [name, mhz] : deployment.for_rank(info)) {
      frequencies.push_back(ordered_json::array({name, mhz}));
      power_states.push_back(mhz);
    }
    ordered_json entry;
    entry["rank"] = rank;
    entry["frequencies"] = std::move(frequencies);
    entry["power_states"] = std::move(power_states);
    list.push_back(std::move(entry));
  }
  return python_json(list);
}

ordered_json zeus_profiling_result(std::string_view body) {
  const ordered_json given = ordered_json::parse(body);
  ordered_json out;
  out["rank"] = given.at("rank").get<std::int64_t>();
  out["iter_time"] = floats(field(given, "iter_time"));
  out["iter_energy"] = floats(field(given, "iter_energy"));
  out["time_breakdown"] = breakdown(field(given, "time_breakdown"));
  out["energy_breakdown"] = breakdown(field(given, "energy_breakdown"));
  return out;
}

std::string profiling_results_file(const std::map<int, ordered_json>& results) {
  ordered_json list = ordered_json::array();
  for (const auto& [rank, result] : results) list.push_back(result);
  return python_json(list);
}

}  // namespace perseus::server
