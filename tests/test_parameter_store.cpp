#include "TestingCatch.hpp"

#include <a2sgd/core/Error.hpp>
#include <a2sgd/core/ParameterStore.hpp>

using namespace a2sgd;
using namespace a2sgd::testing;

TEST_CASE("tensors are contiguous named slices of one flat buffer", "[store]") {
  ParameterStore store;
  store.add("fc1.weight", {3, 4});
  store.add("fc1.bias", {3});
  store.add("fc2.weight", {2, 3});
  store.allocate();
  REQUIRE(store.size() == 12 + 3 + 6);
  CHECK(store.info("fc1.bias").offset == 12);
  CHECK(store.info("fc2.weight").offset == 15);
  CHECK(store.describe() == "fc1.weight[3,4];fc1.bias[3];fc2.weight[2,3]");

  // Writing through a slice and a matrix view lands in the flat buffers at the right offsets.
  Kokkos::deep_copy(store.param("fc1.bias"), 7.0f);
  auto w2 = store.param_matrix(store.index_of("fc2.weight"));
  Kokkos::parallel_for(
      "fill", Kokkos::RangePolicy<ExecutionSpace>(0, 2), KOKKOS_LAMBDA(int r) {
        for (int c = 0; c < 3; ++c) w2(r, c) = static_cast<float>(10 * r + c);
      });
  Kokkos::deep_copy(store.grad("fc1.weight"), 1.0f);
  const auto x = to_host(store.params());
  const auto g = to_host(store.grads());
  for (int i = 0; i < 12; ++i) CHECK(x[i] == 0.0f);
  for (int i = 12; i < 15; ++i) CHECK(x[i] == 7.0f);
  CHECK(x[15 + 1 * 3 + 2] == 12.0f);  // row-major (1, 2)
  for (int i = 0; i < 12; ++i) CHECK(g[i] == 1.0f);
  for (int i = 12; i < 21; ++i) CHECK(g[i] == 0.0f);

  store.zero_grads();
  for (float v : to_host(store.grads())) CHECK(v == 0.0f);
}

TEST_CASE("invalid layouts are rejected with the tensor named", "[store]") {
  ParameterStore store;
  store.add("w", {2, 2});
  CHECK_THROWS_WITH(store.add("w", {1}), A2SGD_CONTAINS("duplicate tensor name \"w\""));
  CHECK_THROWS_WITH(store.add("b", {0}), A2SGD_CONTAINS("\"b\"") && A2SGD_CONTAINS("not positive"));
  CHECK_THROWS_WITH(store.add("", {1}), A2SGD_CONTAINS("empty tensor name"));
  CHECK_THROWS_AS(store.params(), InvalidArgument);
  CHECK_THROWS_WITH(ParameterStore().allocate(), A2SGD_CONTAINS("no tensors"));
  store.allocate();
  CHECK_THROWS_WITH(store.add("late", {1}), A2SGD_CONTAINS("already allocated"));
  CHECK_THROWS_WITH(store.param("nope"), A2SGD_CONTAINS("no tensor named \"nope\""));
}
