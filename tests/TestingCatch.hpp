#pragma once
// One include for Catch2 2.x and 3.x, plus small helpers shared by the tests.
#if A2SGD_CATCH2_MAJOR >= 3
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_floating_point.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#define A2SGD_CONTAINS(text) Catch::Matchers::ContainsSubstring(text)
#else
#include <catch2/catch.hpp>
#define A2SGD_CONTAINS(text) Catch::Matchers::Contains(text)
#endif

#include <a2sgd/core/Types.hpp>

#include <mpi.h>

#include <string>
#include <vector>

using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

namespace a2sgd::testing {

/// Whether this is the AddressSanitizer build (scripts/dev/sanitize.sh): tests that are expensive
/// only because of their size run a sample there, the full check in the regular build.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool address_sanitizer_build = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool address_sanitizer_build = true;
#else
inline constexpr bool address_sanitizer_build = false;
#endif
#else
inline constexpr bool address_sanitizer_build = false;
#endif

// Rounding-error bounds behind the tests' tolerances (docs/testing.md). u is the unit roundoff:
// fl(x op y) = (x op y)(1 + d) with |d| <= u. gamma(n) = n u / (1 - n u) bounds the relative error
// of an n-term sum or dot product, |fl(sum) - sum| <= gamma(n - 1) sum |x_i|, in any summation
// order and with or without FMA (Higham, Accuracy and Stability of Numerical Algorithms, 3.1): it
// holds for every BLAS kernel, SIMD width, thread count and MPI reduction order.
inline constexpr double u32 = 0x1p-24;
inline constexpr double u64 = 0x1p-53;
inline double gamma32(double n) {
  return n * u32 / (1.0 - n * u32);
}
inline double gamma64(double n) {
  return n * u64 / (1.0 - n * u64);
}

inline FloatView to_device(const std::vector<float>& values, const std::string& label = "test") {
  FloatView v(label, values.size());
  auto host = Kokkos::create_mirror_view(v);
  for (std::size_t i = 0; i < values.size(); ++i) host(i) = values[i];
  Kokkos::deep_copy(v, host);
  return v;
}

inline std::vector<float> to_host(const FloatView& v) {
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  return std::vector<float>(host.data(), host.data() + host.extent(0));
}

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

inline int world_size() {
  int p = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  return p;
}

/// Every rank's copy of a value, in rank order.
template <class T>
std::vector<T> allgather(T value, MPI_Datatype type) {
  std::vector<T> all(static_cast<std::size_t>(world_size()));
  MPI_Allgather(&value, 1, type, all.data(), 1, type, MPI_COMM_WORLD);
  return all;
}

/// Every rank's vector (all of the same length), concatenated in rank order.
inline std::vector<float> allgather(const std::vector<float>& values) {
  std::vector<float> all(values.size() * static_cast<std::size_t>(world_size()));
  MPI_Allgather(values.data(), static_cast<int>(values.size()), MPI_FLOAT, all.data(), static_cast<int>(values.size()),
                MPI_FLOAT, MPI_COMM_WORLD);
  return all;
}

}  // namespace a2sgd::testing
