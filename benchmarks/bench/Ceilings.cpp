#include "Ceilings.hpp"

#include <a2sgd/compress/QsgdCodec.hpp>
#include <a2sgd/compress/impl/QsgdKernels.hpp>
#include <a2sgd/core/HalfFloat.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <type_traits>
#include <vector>

namespace a2sgd::bench {

Ceilings measure_ceilings(const Communicator& comm, Index n, int warmup, int repeats) {
  const auto size = static_cast<std::size_t>(n);
  FloatView a("a2sgd::bench::ceiling_a", size), b("a2sgd::bench::ceiling_b", size), c("a2sgd::bench::ceiling_c", size);
  Kokkos::deep_copy(a, 1.0f);
  Kokkos::deep_copy(b, 2.0f);
  Kokkos::deep_copy(c, 3.0f);
  const ExecutionSpace exec;
  const double values = static_cast<double>(n);
  Ceilings ceil;
  double sink = 0.0;
  const Index items = host_backend ? (n + ReadStreams<true>::block - 1) / ReadStreams<true>::block : n;
  auto read_gbs = [&](auto functor, double bytes_per_value) {
    return bytes_per_value * values / 1e9 / time_kernel(comm, warmup, repeats, [&] {
             double sum = 0.0;
             Kokkos::parallel_reduce(A2SGD_LABEL("a2sgd::bench::ceiling_read"), Policy(exec, 0, items), functor, sum);
             sink += sum;
           });
  };
  // Each read ceiling: the fastest of its forms.
  auto fastest_read_gbs = [&](auto two, double bytes_per_value) {
    double fastest = 0.0;
    for_each_read_form<decltype(two)::value>(
        a, b, n, [&](auto functor) { fastest = std::max(fastest, read_gbs(functor, bytes_per_value)); });
    return fastest;
  };
  ceil.read = fastest_read_gbs(std::true_type{}, 8.0);
  ceil.read_one = fastest_read_gbs(std::false_type{}, 4.0);
  // The element-wise ceilings run through the library's SIMD loop (per-ISA clones on a host backend),
  // as A2SGD's apply does.
  auto elementwise_gbs = [&](double bytes_per_value, const std::string& label, const auto& kernel) {
    return bytes_per_value * values / 1e9 / time_kernel(comm, warmup, repeats, [&] {
             impl::simd_parallel_for(label, exec, 0, n, kernel);
             exec.fence();
           });
  };
  ceil.copy = elementwise_gbs(
      12.0, A2SGD_LABEL("a2sgd::bench::ceiling_copy"), KOKKOS_LAMBDA(Index i) { b(i) = a(i); });
  ceil.triad = elementwise_gbs(
      16.0, A2SGD_LABEL("a2sgd::bench::ceiling_triad"), KOKKOS_LAMBDA(Index i) { a(i) = b(i) + 0.5f * c(i); });
  ceil.axpy = elementwise_gbs(
      12.0, A2SGD_LABEL("a2sgd::bench::ceiling_axpy"), KOKKOS_LAMBDA(Index i) { c(i) += 1e-4f * a(i); });
  // g = a, e = b, x = c: A2SGD's apply without its arithmetic.
  ceil.rmw = elementwise_gbs(
      20.0, A2SGD_LABEL("a2sgd::bench::ceiling_rmw"), KOKKOS_LAMBDA(Index i) {
        const float v = a(i) + b(i);
        b(i) = 0.5f * v;
        c(i) -= 1e-4f * v;
      });
  // QSGD's rounding arithmetic: the codec's field kernel over a 4096-value block in L1, n values
  // in all (indices advancing as in a pass), at the default 256 levels. Host backends: device
  // passes are held against memory alone.
  if constexpr (host_backend) {
    constexpr Index block = 4096;
    std::vector<float> g(block);
    for (Index i = 0; i < block; ++i) g[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)));
    const float v =
        std::sqrt(static_cast<float>(block) / 2.0f) * std::sqrt(static_cast<float>((n + block - 1) / block));
    std::uint32_t fold = 0;
    const double seconds = time_kernel(comm, warmup, repeats, [&] {
      for (Index begin = 0; begin < n; begin += block)
        fold ^=
            compress::impl::qsgd_round_only(g.data(), std::min(block, n - begin), begin, 0x9e3779b97f4a7c15ull, v, 256);
    });
    ceil.rounding = values / seconds;
    sink += fold == 0x5eed ? 1.0 : 0.0;  // keeps the fold observable

    // QSGD's pack arithmetic: the codec's pack kernel (the rounding above and the packing of the
    // fields into words) over the same block's whole groups into a payload block in L1.
    const Index whole = block / 32;
    std::vector<std::uint32_t> packed(static_cast<std::size_t>(qsgd_bits(256) * whole));
    const double pack_seconds = time_kernel(comm, warmup, repeats, [&] {
      for (Index begin = 0; begin < n; begin += block)
        compress::impl::qsgd_pack_only(g.data(), whole, begin, 0x9e3779b97f4a7c15ull, v, 256, packed.data());
    });
    ceil.packing = static_cast<double>((n + block - 1) / block) * static_cast<double>(block) / pack_seconds;
    sink += packed[0] == 0x5eed ? 1.0 : 0.0;

    // QSGD's decode unpacking: the codec's decode kernel over the p ranks' payloads of one block
    // (random fields: every bit pattern is a field), n values in all, into a block of u, all in
    // L1 for p up to 4 (4.6 KB of payload per rank at 9 bits, 16 KB of u).
    const int p = comm.size();
    constexpr std::int64_t levels = 256;
    const Index groups = block / 32;
    const Index stride = 1 + qsgd_bits(levels) * groups + 2;
    std::vector<std::uint32_t> all(static_cast<std::size_t>(p * stride));
    std::uint64_t state = 0x243f6a8885a308d3ull;
    for (auto& w : all) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      w = static_cast<std::uint32_t>(state >> 32);
    }
    for (int r = 0; r < p; ++r) all[static_cast<std::size_t>(r * stride)] = detail::float_bits(1.0f);
    std::vector<float> u(block);
    const Index calls = (n + block - 1) / block;
    const double unpack_seconds = time_kernel(comm, warmup, repeats, [&] {
      for (Index c = 0; c < calls; ++c)
        compress::impl::qsgd_decode_only(all.data(), stride, p, groups, levels, u.data());
    });
    ceil.unpacking = static_cast<double>(calls) * static_cast<double>(block) * p / unpack_seconds;
    sink += u[0];  // keeps the decode observable
  }
  if (!std::isfinite(sink)) std::fprintf(stderr, "a2sgd-bench: warning: the read ceiling's sum is not finite\n");
  return ceil;
}

std::string phase_figure(const PhaseTraffic& phase, double seconds, const Ceilings& ceil) {
  if (phase.passes.empty() || seconds <= 0) return "           -";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%5.1f (%3.0f%%)", phase.bytes() / seconds / 1e9,
                100.0 * ceil.fraction(phase, seconds));
  return buf;
}

}  // namespace a2sgd::bench
