// Small statistics every module needs alike.
#pragma once

#include <algorithm>
#include <vector>

namespace perseus {

// The median (the mean of the two middle values for an even count); 0 for none. O(n log n).
inline double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace perseus
