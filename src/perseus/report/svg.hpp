// Small pieces every picture shares: XML escaping, number formatting, linear scales with
// readable ticks, and the colour scale for power.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace perseus::report {

// Text safe inside XML/HTML content and attribute values.
std::string escape_xml(std::string_view text);

// A coordinate or size for SVG: fixed point, at most 2 decimals, no trailing zeros.
std::string px(double value);

// Maps [domain_lo, domain_hi] linearly onto [range_lo, range_hi]. A zero-width domain is
// widened so that a single value still lands inside the range.
class LinearScale {
 public:
  LinearScale(double domain_lo, double domain_hi, double range_lo, double range_hi);
  double operator()(double value) const { return range_lo_ + (value - lo_) * factor_; }
  double lo() const { return lo_; }
  double hi() const { return hi_; }

 private:
  double lo_, hi_, range_lo_, factor_;
};

// About `count` round tick values (1, 2 or 5 times a power of ten apart) inside [lo, hi].
std::vector<double> nice_ticks(double lo, double hi, int count);
// A tick label with just enough digits for ticks `step` apart.
std::string tick_label(double value, double step);
// [lo, hi] widened by `fraction` of its width on each side (and to a nonzero width).
std::pair<double, double> padded(double lo, double hi, double fraction);

// Colour for `value` in [lo, hi] on a perceptual scale (dark blue: low, yellow: high), "#rrggbb".
std::string power_colour(double value, double lo, double hi);

// A horizontal colour bar with its end labels, as an SVG group at (x, y).
std::string colour_bar(double x, double y, double width, double height, double lo, double hi, std::string_view unit);

}  // namespace perseus::report
