#include "TestingCatch.hpp"

#include <a2sgd/compress/GradientBuckets.hpp>
#include <a2sgd/core/Error.hpp>

using namespace a2sgd;

namespace {
BucketOptions caps(std::size_t first_values, std::size_t values) {
  BucketOptions o;
  o.first_bytes = first_values * sizeof(float);
  o.bytes = values * sizeof(float);
  return o;
}
}  // namespace

TEST_CASE("buckets pack the backward order's groups under DDP's caps", "[buckets]") {
  // The MLP 784-256-256-10 of the Fashion-MNIST runs: layers of 200,960, 65,792 and 2,570 values,
  // finished last layer first. DDP's caps (1 MiB first, 25 MiB after): the last two layers make
  // the first bucket (68,362 values, 273 kB), the first layer (803 kB more would pass 1 MiB) the
  // second.
  const std::vector<GradientRange> mlp = {{266752, 269322}, {200960, 266752}, {0, 200960}};
  const auto b = plan_buckets(mlp, 269322, BucketOptions{});
  const std::vector<GradientRange> expected = {{200960, 269322}, {0, 200960}};
  CHECK(b == expected);

  // Caps in values: the first bucket holds at most 1,100, the others 2,500; a group over the cap is
  // a bucket of its own; groups join only while adjacent.
  const std::vector<GradientRange> order = {{4000, 5003}, {3000, 4000}, {1000, 3000}, {0, 1000}};
  const std::vector<GradientRange> four = {{4000, 5003}, {3000, 4000}, {1000, 3000}, {0, 1000}};
  CHECK(plan_buckets(order, 5003, caps(1100, 2500)) == four);
  const std::vector<GradientRange> two = {{4000, 5003}, {0, 4000}};
  CHECK(plan_buckets(order, 5003, caps(1100, 4000)) == two);
  const std::vector<GradientRange> big = {{3000, 5003}, {0, 3000}};
  CHECK(plan_buckets(order, 5003, caps(2003, 4000)) == big);
  // Not adjacent: [0, 10) after [20, 30) opens a bucket although the cap would allow more.
  const std::vector<GradientRange> gap = {{20, 30}, {0, 10}, {10, 20}};
  const std::vector<GradientRange> gap_buckets = {{20, 30}, {0, 20}};
  CHECK(plan_buckets(gap, 30, caps(100, 100)) == gap_buckets);

  // One bucket: no order (a model that reports nothing), a zero cap.
  const std::vector<GradientRange> whole = {{0, 5003}};
  CHECK(plan_buckets({}, 5003, BucketOptions{}) == whole);
  CHECK(plan_buckets(order, 5003, caps(1100, 0)) == whole);
}

TEST_CASE("a gradient order that does not cover the gradient exactly once is refused", "[buckets]") {
  const auto refused = [](std::vector<GradientRange> order, Index n, const std::string& what) {
    CHECK_THROWS_AS(plan_buckets(order, n, BucketOptions{}), InvalidArgument);
    CHECK_THROWS_WITH(plan_buckets(order, n, BucketOptions{}), A2SGD_CONTAINS(what));
  };
  refused({{5, 10}, {0, 4}}, 10, "values [4, 5) are in no group");
  refused({{0, 6}, {5, 10}}, 10, "overlaps another");
  refused({{0, 6}}, 10, "values [6, 10) are in no group");
  refused({{0, 12}}, 10, "outside");
  refused({{3, 3}, {0, 10}}, 10, "empty");
  BucketOptions bad;
  bad.first_bytes = bad.bytes + 4;
  CHECK_THROWS_AS(plan_buckets({{0, 10}}, 10, bad), InvalidArgument);
  CHECK_THROWS_WITH(plan_buckets({{0, 10}}, 10, bad), A2SGD_CONTAINS("larger than the bucket cap"));
}
