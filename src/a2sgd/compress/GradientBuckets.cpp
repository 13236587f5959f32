#include <a2sgd/compress/GradientBuckets.hpp>
#include <a2sgd/core/Error.hpp>

#include <algorithm>

namespace a2sgd {

void BucketOptions::validate() const {
  if (bytes > 0 && first_bytes > bytes)
    throw InvalidArgument("first bucket of " + std::to_string(first_bytes) + " bytes is larger than the bucket cap of " +
                          std::to_string(bytes) + " bytes");
}

std::string BucketOptions::signature() const {
  return "bucket_bytes=" + std::to_string(bytes) + ";first_bucket_bytes=" + std::to_string(first_bytes);
}

namespace {

void check_cover(std::vector<GradientRange> groups, Index n) {
  std::sort(groups.begin(), groups.end(), [](const GradientRange& a, const GradientRange& b) { return a.begin < b.begin; });
  Index next = 0;
  for (const GradientRange& g : groups) {
    if (g.begin < 0 || g.end > n || g.begin >= g.end)
      throw InvalidArgument("gradient order: group [" + std::to_string(g.begin) + ", " + std::to_string(g.end) +
                            ") is empty or outside the gradient's " + std::to_string(n) + " values");
    if (g.begin != next)
      throw InvalidArgument("gradient order: " +
                            (g.begin > next ? "values [" + std::to_string(next) + ", " + std::to_string(g.begin) +
                                                  ") are in no group"
                                            : "group [" + std::to_string(g.begin) + ", " + std::to_string(g.end) +
                                                  ") overlaps another"));
    next = g.end;
  }
  if (next != n)
    throw InvalidArgument("gradient order: values [" + std::to_string(next) + ", " + std::to_string(n) +
                          ") are in no group");
}

}  // namespace

std::vector<GradientRange> plan_buckets(const std::vector<GradientRange>& order, Index n,
                                        const BucketOptions& options) {
  options.validate();
  if (order.empty() || options.bytes == 0 || n == 0) return {GradientRange{0, n}};
  check_cover(order, n);
  std::vector<GradientRange> buckets;
  GradientRange open{};
  bool has_open = false;
  for (const GradientRange& g : order) {
    const std::size_t cap = buckets.empty() ? options.first_bytes : options.bytes;
    const bool adjacent = has_open && (g.end == open.begin || g.begin == open.end);
    const auto bytes = static_cast<std::size_t>(open.size() + g.size()) * sizeof(float);
    if (adjacent && bytes <= cap) {
      open = {std::min(open.begin, g.begin), std::max(open.end, g.end)};
      continue;
    }
    if (has_open) buckets.push_back(open);
    open = g;
    has_open = true;
  }
  buckets.push_back(open);
  return buckets;
}

}  // namespace a2sgd
