#include "perseus/report/svg.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

namespace perseus::report {

std::string escape_xml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string px(double value) {
  if (!std::isfinite(value)) value = 0.0;
  std::string s = fmt::format("{:.2f}", value);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  if (s == "-0") s = "0";
  return s;
}

LinearScale::LinearScale(double domain_lo, double domain_hi, double range_lo, double range_hi)
    : lo_(domain_lo), hi_(domain_hi), range_lo_(range_lo) {
  if (!(hi_ > lo_)) {
    const double half = std::max(std::abs(lo_) * 0.05, 1e-9);
    lo_ -= half;
    hi_ += half;
  }
  factor_ = (range_hi - range_lo) / (hi_ - lo_);
}

namespace {

double tick_step(double lo, double hi, int count) {
  const double raw = (hi - lo) / std::max(1, count);
  if (!(raw > 0.0) || !std::isfinite(raw)) return 1.0;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double r = raw / magnitude;
  return magnitude * (r < 1.5 ? 1.0 : r < 3.5 ? 2.0 : r < 7.5 ? 5.0 : 10.0);
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int count) {
  std::vector<double> ticks;
  if (!(hi > lo)) return {lo};
  const double step = tick_step(lo, hi, count);
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
    if (ticks.size() > 100) break;
  }
  return ticks;
}

std::string tick_label(double value, double step) {
  const int decimals = step > 0.0 ? std::clamp(static_cast<int>(std::ceil(-std::log10(step) - 1e-9)), 0, 6) : 2;
  return fmt::format("{:.{}f}", value, decimals);
}

std::pair<double, double> padded(double lo, double hi, double fraction) {
  double width = hi - lo;
  if (!(width > 0.0)) width = std::max(std::abs(lo), 1.0) * 0.1;
  return {lo - width * fraction, hi + width * fraction};
}

std::string power_colour(double value, double lo, double hi) {
  // Viridis, sampled at 9 stops.
  static constexpr std::array<std::array<int, 3>, 9> kStops = {{{68, 1, 84},
                                                                {71, 44, 122},
                                                                {59, 81, 139},
                                                                {44, 113, 142},
                                                                {33, 144, 141},
                                                                {39, 173, 129},
                                                                {92, 200, 99},
                                                                {170, 220, 50},
                                                                {253, 231, 37}}};
  double t = hi > lo ? (value - lo) / (hi - lo) : 0.5;
  if (!std::isfinite(t)) t = 0.5;
  t = std::clamp(t, 0.0, 1.0) * (kStops.size() - 1);
  const std::size_t i = std::min(static_cast<std::size_t>(t), kStops.size() - 2);
  const double w = t - static_cast<double>(i);
  int rgb[3];
  for (int c = 0; c < 3; ++c) rgb[c] = static_cast<int>(std::lround(kStops[i][c] + w * (kStops[i + 1][c] - kStops[i][c])));
  return fmt::format("#{:02x}{:02x}{:02x}", rgb[0], rgb[1], rgb[2]);
}

std::string colour_bar(double x, double y, double width, double height, double lo, double hi, std::string_view unit) {
  constexpr int kSteps = 32;
  std::string out = fmt::format(R"~(<g class="colour-bar" transform="translate({},{})">)~", px(x), px(y));
  for (int i = 0; i < kSteps; ++i) {
    const double v = lo + (hi - lo) * (i + 0.5) / kSteps;
    out += fmt::format(R"(<rect x="{}" y="0" width="{}" height="{}" fill="{}"/>)", px(width * i / kSteps),
                       px(width / kSteps + 0.5), px(height), power_colour(v, lo, hi));
  }
  const std::string u = escape_xml(unit);
  out += fmt::format(R"(<text x="-6" y="{}" text-anchor="end" class="small">{:.0f} {}</text>)", px(height - 1), lo, u);
  out += fmt::format(R"(<text x="{}" y="{}" class="small">{:.0f} {}</text>)", px(width + 6), px(height - 1), hi, u);
  out += "</g>";
  return out;
}

}  // namespace perseus::report
