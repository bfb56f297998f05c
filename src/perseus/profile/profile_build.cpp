#include <algorithm>

#include "perseus/profile/profile.hpp"

namespace perseus {

Profile Profile::from_operations(std::string source_name, std::vector<OperationProfile> operations) {
  Profile profile;
  profile.source_ = std::move(source_name);
  std::sort(operations.begin(), operations.end(), [](const OperationProfile& a, const OperationProfile& b) {
    return std::pair(a.stage, a.kind) < std::pair(b.stage, b.kind);
  });
  for (const OperationProfile& op : operations) profile.num_stages_ = std::max(profile.num_stages_, op.stage + 1);
  profile.operations_ = std::move(operations);
  return profile;
}

}  // namespace perseus
