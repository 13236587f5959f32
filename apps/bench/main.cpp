// a2sgd-bench: one exchange step of every method on synthetic gradients of several sizes, at the
// current number of ranks: compress, communicate and decompress-and-apply times, bytes per rank,
// and each kernel phase as a fraction of the memory ceilings that match its access pattern
// (read-only, copy/triad with write-allocate, read-modify-write: KernelTraffic.hpp), all measured
// in the same run; Top-K next to std::nth_element and a full sort of the same magnitudes. With
// --project, the measured local times plus alpha-beta modelled communication for p up to 4096.
//
// Exit codes: 0 success, 2 invalid options, 1 other errors (including a method whose measured
// bytes differ from its documented formula).
#include "../common/AppMain.hpp"
#include "BenchConfig.hpp"
#include "CoreClock.hpp"
#include "KernelTraffic.hpp"

#include <a2sgd/a2sgd.hpp>
#include <a2sgd/compress/impl/TwoMeansKernels.hpp>
#include <a2sgd/core/impl/CacheEviction.hpp>
#include <a2sgd/core/impl/HostClones.hpp>

#include <a2sgd/core/impl/Gemm.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

using namespace a2sgd;
using namespace a2sgd::bench;

namespace {

using Policy = Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// The slowest rank's value: a step takes as long as its slowest rank.
double slowest(const Communicator& comm, double v) {
  comm.allreduce(&v, 1, MPI_MAX);
  return v;
}

struct Measured {
  std::string method;
  double compress_s = 0, comm_s = 0, apply_s = 0, step_s = 0;
  std::uint64_t bytes = 0, messages = 0, planned_bytes = 0;
  std::vector<PlannedCollective> traffic;
  KernelTraffic touched;
};

// A square-ish weight matrix (rows a power of two near sqrt(n)) plus a 1-D remainder: the layout
// PowerSGD compresses; the other methods see only the flat buffer.
std::vector<TensorInfo> bench_layout(Index n) {
  Index rows = 1;
  while ((rows * 2) * (rows * 2) <= n) rows *= 2;
  std::vector<TensorInfo> layout;
  const Index cols = n / rows;
  if (rows >= 2 && cols >= 2) {
    layout.push_back({"weight", {rows, cols}, 0, rows * cols});
    if (n > rows * cols) layout.push_back({"bias", {n - rows * cols}, rows * cols, n - rows * cols});
  } else {
    layout.push_back({"bias", {n}, 0, n});
  }
  return layout;
}

// Median seconds of `kernel` over `repeats` runs after `warmup`, the slowest rank's.
template <class Kernel>
double time_kernel(const Communicator& comm, int warmup, int repeats, Kernel&& kernel) {
  std::vector<double> t;
  comm.barrier();
  for (int r = 0; r < warmup + repeats; ++r) {
    Stopwatch clock;
    kernel();
    if (r >= warmup) t.push_back(clock.seconds());
  }
  return slowest(comm, median(t));
}

// The read-only ceiling: sum a[i] + b[i] over a block, with 32 independent float accumulators
// (two to eight vector registers, so no single add chain bounds the loop) in a function compiled
// per ISA like the library's kernels (impl/HostClones.hpp): bound by loads alone.
// Two is false for the one-stream variant (the plain two-means pass reads g alone). Prefetch adds
// software prefetches Distance bytes ahead in each stream, as the two-means kernels do (1: into
// all cache levels; 2: non-temporal).
template <bool Two, int Prefetch, int Distance>
A2SGD_HOST_CLONES float read_block(const float* a, const float* b, Index count) {
  constexpr int lanes = 32;
  constexpr int locality = Prefetch == 2 ? 0 : 3;
  float acc[lanes] = {};
  Index i = 0;
  for (; i + lanes <= count; i += lanes) {
    if constexpr (Prefetch > 0) {
      // Integer arithmetic: the address may lie past the end of the buffer (a prefetch never faults).
      const auto ahead = reinterpret_cast<std::uintptr_t>(a + i) + Distance;
      __builtin_prefetch(reinterpret_cast<const void*>(ahead), 0, locality);
      __builtin_prefetch(reinterpret_cast<const void*>(ahead + 64), 0, locality);
      if constexpr (Two) {
        const auto ahead_b = reinterpret_cast<std::uintptr_t>(b + i) + Distance;
        __builtin_prefetch(reinterpret_cast<const void*>(ahead_b), 0, locality);
        __builtin_prefetch(reinterpret_cast<const void*>(ahead_b + 64), 0, locality);
      }
    }
    for (int k = 0; k < lanes; ++k) acc[k] += Two ? a[i + k] + b[i + k] : a[i + k];
  }
  float s = 0.0f;
  for (; i < count; ++i) s += Two ? a[i] + b[i] : a[i];
  for (int k = 0; k < lanes; ++k) s += acc[k];
  return s;
}

// Work item: a block on a host backend, an entry on a device.
template <bool Two, int Prefetch = 0, int Distance = 8192>
struct ReadStreams {
  static constexpr Index block = 4096;
  ConstFloatView a, b;
  Index n;
  KOKKOS_INLINE_FUNCTION void operator()(Index item, double& sum) const {
    if constexpr (host_backend) {
      const Index begin = item * block;
      sum += read_block<Two, Prefetch, Distance>(a.data() + begin, b.data() + begin,
                                                 begin + block < n ? block : n - begin);
    } else {
      sum += Two ? a(item) + b(item) : a(item);
    }
  }
};

// The forms of a read ceiling over (a, b, n), each passed to f: no software prefetch; prefetch into
// all cache levels and non-temporal, 8 KB ahead (the plain two-means kernel's distance) and, with
// two streams, 4 KB ahead (the error-feedback kernel's). A ceiling is the fastest of its forms, so
// that a kernel's prefetching cannot beat a ceiling that lacks it.
template <bool Two, class F>
void for_each_read_form(const ConstFloatView& a, const ConstFloatView& b, Index n, F&& f) {
  f(ReadStreams<Two, 0>{a, b, n});
  f(ReadStreams<Two, 1>{a, b, n});
  f(ReadStreams<Two, 2>{a, b, n});
  if constexpr (Two) {
    f(ReadStreams<Two, 1, 4096>{a, b, n});
    f(ReadStreams<Two, 2, 4096>{a, b, n});
  }
}

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
  if (!std::isfinite(sink)) std::fprintf(stderr, "a2sgd-bench: warning: the read ceiling's sum is not finite\n");
  return ceil;
}

// The references Top-K must beat, on the host copy of the same magnitudes |g|: std::nth_element
// (what a user would write to find the k largest) and a full std::sort (descending). Medians of
// up to 3 runs; the magnitudes are recomputed before each, untimed.
struct SelectionTimes {
  double nth_element_s = 0.0;
  double full_sort_s = 0.0;
};

SelectionTimes selection_seconds(const FloatView& g, Index k, int repeats, bool full_sort) {
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), g);
  std::vector<float> keys(host.extent(0));
  auto magnitudes = [&] {
    for (std::size_t i = 0; i < keys.size(); ++i) keys[i] = std::fabs(host(i));
  };
  auto greater = [](float x, float y) { return x > y; };
  std::vector<double> nth, sort;
  for (int r = 0; r < std::min(repeats, 3); ++r) {
    magnitudes();
    Stopwatch clock;
    std::nth_element(keys.begin(), keys.begin() + (k - 1), keys.end(), greater);
    nth.push_back(clock.seconds());
    if (!full_sort) continue;
    magnitudes();
    clock.restart();
    std::sort(keys.begin(), keys.end(), greater);
    sort.push_back(clock.seconds());
  }
  return {median(nth), full_sort ? median(sort) : 0.0};
}

Measured measure(const BenchConfig& c, const std::string& method, Index n, const FloatView& g0,
                 const Communicator& comm) {
  ExchangeConfig cfg = c.exchange;
  cfg.method = method;
  cfg.layout = bench_layout(n);
  auto ex = make_exchange(cfg, comm, n);
  Optimizer sgd(OptimizerConfig{}, n);
  FloatView x("a2sgd::bench::params", static_cast<std::size_t>(n));
  FloatView g(Kokkos::view_alloc(Kokkos::WithoutInitializing, "a2sgd::bench::grad"), static_cast<std::size_t>(n));
  std::vector<double> compress, communicate, apply, step;
  Measured m;
  m.method = method;
  for (int r = 0; r < c.warmup + c.repeats; ++r) {
    Kokkos::deep_copy(g, g0);
    Kokkos::fence();
    comm.barrier();
    Stopwatch clock;
    ex->step(x, g, sgd, 1e-4);
    const double total = clock.seconds();
    if (r < c.warmup) continue;
    const StepStats& s = ex->stats().last_step;
    compress.push_back(s.compress_s);
    communicate.push_back(s.comm_s);
    apply.push_back(s.optimizer_s);
    step.push_back(total);
    m.bytes = s.bytes_sent;
    m.messages = s.messages;
  }
  m.compress_s = slowest(comm, median(compress));
  m.comm_s = slowest(comm, median(communicate));
  m.apply_s = slowest(comm, median(apply));
  m.step_s = slowest(comm, median(step));
  m.traffic = ex->step_traffic();
  for (const auto& t : m.traffic) m.planned_bytes += t.bytes;
  m.touched = kernel_traffic(method, static_cast<double>(n), static_cast<double>(m.bytes), comm.size());
  return m;
}

std::string human(double bytes) {
  char buf[32];
  if (bytes >= 1e9)
    std::snprintf(buf, sizeof buf, "%.2f GB", bytes / 1e9);
  else if (bytes >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2f MB", bytes / 1e6);
  else if (bytes >= 1e3)
    std::snprintf(buf, sizeof buf, "%.1f kB", bytes / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  return buf;
}

// The Fashion-MNIST MLP's forward and backward pass (784-256-256-10, as a2sgd-train builds it) on
// `batch` random rows, against its eight GEMMs alone on buffers of the same shapes and with the
// same transpositions (per layer: forward y = x W^T, weight gradient dW = dy^T x, input gradient
// dx = dy W except for the first layer): what bias, activation, softmax and batch handling add.
struct MlpCompute {
  double step_s = 0.0;
  double gemm_s = 0.0;
  double flops = 0.0;
};

MlpCompute mlp_compute(const Communicator& comm, Index batch, int warmup, int repeats) {
  const ExecutionSpace exec;
  nn::MlpConfig config;
  ParameterStore store;
  nn::Mlp mlp(config, store);
  store.allocate();
  mlp.initialize(store.params(), 1);
  mlp.reserve(batch);
  Matrix x("a2sgd::bench::mlp_x", static_cast<std::size_t>(batch), static_cast<std::size_t>(config.inputs));
  LabelView labels("a2sgd::bench::mlp_labels", static_cast<std::size_t>(batch));
  {
    auto hx = Kokkos::create_mirror_view(x);
    auto hl = Kokkos::create_mirror_view(labels);
    Rng rng(7);
    for (Index r = 0; r < batch; ++r) {
      hl(r) = static_cast<int>(rng.below(static_cast<std::uint64_t>(config.classes)));
      for (Index c = 0; c < config.inputs; ++c) hx(r, c) = static_cast<float>(rng.uniform());
    }
    Kokkos::deep_copy(x, hx);
    Kokkos::deep_copy(labels, hl);
  }
  MlpCompute m;
  m.step_s = time_kernel(comm, warmup, repeats, [&] {
    mlp.forward_backward(exec, store.params(), store.grads(), x, labels);
    exec.fence();
  });
  std::vector<Index> widths{config.inputs};
  for (Index h : config.hidden) widths.push_back(h);
  widths.push_back(config.classes);
  struct Layer {
    Matrix in, w, out, dw, din;
  };
  std::vector<Layer> layers;
  const auto rows = static_cast<std::size_t>(batch);
  for (std::size_t l = 0; l + 1 < widths.size(); ++l) {
    const auto i = static_cast<std::size_t>(widths[l]), o = static_cast<std::size_t>(widths[l + 1]);
    layers.push_back({Matrix("in", rows, i), Matrix("w", o, i), Matrix("out", rows, o), Matrix("dw", o, i),
                      l == 0 ? Matrix() : Matrix("din", rows, i)});
    Kokkos::deep_copy(layers.back().in, 0.5f);
    Kokkos::deep_copy(layers.back().w, 0.01f);
    Kokkos::deep_copy(layers.back().out, 0.25f);
    m.flops += 2.0 * double(rows) * double(i) * double(o) * (l == 0 ? 2.0 : 3.0);
  }
  m.gemm_s = time_kernel(comm, warmup, repeats, [&] {
    for (auto& L : layers) detail::gemm(exec, "N", "T", 1.0f, L.in, L.w, 1.0f, L.out);
    for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
      detail::gemm(exec, "T", "N", 1.0f, it->out, it->in, 0.0f, it->dw);
      if (it->din.extent(0) > 0) detail::gemm(exec, "N", "N", 1.0f, it->out, it->w, 0.0f, it->din);
    }
    exec.fence();
  });
  return m;
}

// "GB/s (% of the matching ceilings)" of one phase.
std::string phase_figure(const PhaseTraffic& phase, double seconds, const Ceilings& ceil) {
  if (phase.passes.empty() || seconds <= 0) return "           -";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%5.1f (%3.0f%%)", phase.bytes() / seconds / 1e9,
                100.0 * ceil.fraction(phase, seconds));
  return buf;
}

int run(int argc, char** argv, const Communicator& comm) {
  BenchConfig c;
  std::string help;
  ParseOutcome outcome = ParseOutcome::run;
  try {
    comm.all_or_throw([&] { outcome = parse_options(argc, argv, c, help); });
  } catch (const CollectiveError& e) {
    if (comm.rank() == 0) std::fprintf(stderr, "a2sgd-bench: error: %s (see --help)\n", e.what());
    return 2;
  }
  if (outcome == ParseOutcome::help) {
    if (comm.rank() == 0) std::cout << help << '\n';
    return 0;
  }
  const bool root = comm.rank() == 0;
  const int p = comm.size();
  std::ofstream csv;
  try {
    comm.all_or_throw([&] {
      if (root && !c.csv.empty()) {
        csv.open(c.csv);
        if (!csv) throw InvalidArgument("--csv " + c.csv + ": cannot open for writing");
        csv << "kind,method,values,ranks,link_gbps,alpha_us,compress_s,comm_s,apply_s,step_s,bytes_per_rank,"
               "messages,compress_bytes_touched,apply_bytes_touched,compress_of_ceiling,apply_of_ceiling,read_gbs,"
               "copy_gbs,triad_gbs,axpy_gbs,rmw_gbs\n";
      }
    });
  } catch (const CollectiveError& e) {
    if (root) std::fprintf(stderr, "a2sgd-bench: error: %s\n", e.what());
    return 2;
  }
  Ceilings ceil;  // of the current size
  auto row = [&](const char* kind, const std::string& method, Index n, int ranks, double gbps, double alpha_us,
                 double compress, double comm_s, double apply, double step, double bytes, double messages,
                 const KernelTraffic& touched = {}) {
    if (!csv.is_open()) return;
    char buf[640];
    std::snprintf(buf, sizeof buf,
                  "%s,%s,%lld,%d,%g,%g,%.9g,%.9g,%.9g,%.9g,%.0f,%.0f,%.0f,%.0f,%.4g,%.4g,%.4g,%.4g,%.4g,%.4g,%.4g\n",
                  kind, method.c_str(), static_cast<long long>(n), ranks, gbps, alpha_us, compress, comm_s, apply, step,
                  bytes, messages, touched.compress.bytes(), touched.apply.bytes(),
                  ceil.fraction(touched.compress, compress), ceil.fraction(touched.apply, apply), ceil.read, ceil.copy,
                  ceil.triad, ceil.axpy, ceil.rmw);
    csv << buf;
  };

  if (root)
    std::printf("a2sgd-bench: %d rank%s, %s, medians of %d steps after %d warm-up, heap policy %s\n", p,
                p > 1 ? "s" : "", Kokkos::DefaultExecutionSpace::name(), c.repeats, c.warmup,
                to_string(heap_policy_in_effect()));
  bool bytes_ok = true;
  for (const Index n : c.sizes) {
    // Synthetic gradient: N(0, 1) values, different on every rank.
    FloatView g0(Kokkos::view_alloc(Kokkos::WithoutInitializing, "a2sgd::bench::g0"), static_cast<std::size_t>(n));
    {
      auto host = Kokkos::create_mirror_view(g0);
      Rng rng(derive_seed(c.seed, static_cast<std::uint64_t>(comm.rank())));
      for (Index i = 0; i < n; ++i) host(i) = static_cast<float>(rng.normal());
      Kokkos::deep_copy(g0, host);
    }
    ceil = measure_ceilings(comm, n, c.warmup, c.repeats);
    const double values = static_cast<double>(n);
    row("reference", "read", n, p, 0, 0, 0, 0, 0, 8.0 * values / ceil.read / 1e9, 0, 0);
    row("reference", "copy", n, p, 0, 0, 0, 0, 0, 12.0 * values / ceil.copy / 1e9, 0, 0);
    row("reference", "triad", n, p, 0, 0, 0, 0, 0, 16.0 * values / ceil.triad / 1e9, 0, 0);
    row("reference", "axpy", n, p, 0, 0, 0, 0, 0, 12.0 * values / ceil.axpy / 1e9, 0, 0);
    row("reference", "rmw", n, p, 0, 0, 0, 0, 0, 20.0 * values / ceil.rmw / 1e9, 0, 0);
    if (root)
      std::printf(
          "\nn = %lld values (%s per buffer); ceilings in GB/s, write-allocate counted: read two streams %.1f, "
          "copy %.1f, triad %.1f, axpy %.1f, read-modify-write (3 streams) %.1f\n"
          "%-9s %11s %9s %11s %9s %10s %4s %17s %17s\n",
          static_cast<long long>(n), human(4.0 * values).c_str(), ceil.read, ceil.copy, ceil.triad, ceil.axpy, ceil.rmw,
          "method", "compress ms", "comm ms", "decode+apply", "step ms", "bytes/rank", "msgs", "compress GB/s (%)",
          "apply GB/s (%)");
    std::vector<Measured> results;
    for (const auto& method : c.methods) {
      Measured m = measure(c, method, n, g0, comm);
      bytes_ok = bytes_ok && m.bytes == m.planned_bytes;
      if (root)
        std::printf("%-9s %11.3f %9.3f %11.3f %10.3f %10s %4llu %17s %17s%s\n", method.c_str(), 1e3 * m.compress_s,
                    1e3 * m.comm_s, 1e3 * m.apply_s, 1e3 * m.step_s, human(double(m.bytes)).c_str(),
                    static_cast<unsigned long long>(m.messages),
                    phase_figure(m.touched.compress, m.compress_s, ceil).c_str(),
                    phase_figure(m.touched.apply, m.apply_s, ceil).c_str(),
                    m.bytes == m.planned_bytes ? "" : "  BYTES DIFFER FROM docs/methods.md");
      row("measured", method, n, p, 0, 0, m.compress_s, m.comm_s, m.apply_s, m.step_s, double(m.bytes),
          double(m.messages), m.touched);
      results.push_back(std::move(m));
    }
    if (root) std::printf("(%%: the time the phase's passes would take at the ceilings of their access patterns)\n");
    {
      // The two-means pass alone (A2SGD's compress phase), with error feedback (reads g and e)
      // and plain (reads g), against the read ceilings of the same number of streams.
      FloatView e("a2sgd::bench::residual", static_cast<std::size_t>(n));
      Kokkos::deep_copy(e, 1e-3f);
      const ExecutionSpace exec;
      double sink = 0.0;
      // Interleaved with the read ceilings on the same buffers, repeat by repeat: on a shared
      // machine memory bandwidth drifts between the ceilings measured at the start and this point.
      // Every timed pass starts with both buffers evicted from the caches (core/impl/CacheEviction.hpp).
      const bool evict = host_backend && impl::can_evict_caches;
      const std::size_t buffer_bytes = sizeof(float) * static_cast<std::size_t>(n);
      const Index items = host_backend ? (n + ReadStreams<true>::block - 1) / ReadStreams<true>::block : n;
      auto read = [&](auto functor) {
        double sum = 0.0;
        Kokkos::parallel_reduce(A2SGD_LABEL("a2sgd::bench::ceiling_read"), Policy(exec, 0, items), functor, sum);
        sink += sum;
      };
      // Per form of each read ceiling (a deque: appending keeps the earlier forms' samples in place).
      std::deque<std::vector<double>> t_read, t_read_one;
      std::vector<double> t_ef, t_plain;
      // The AVX-512 kernel with each prefetch form forced, next to the library's choice, so that a
      // run shows which form the machine favours at the time and what the choice is worth.
      using compress::impl::TwoMeansKernel;
      using compress::impl::TwoMeansPrefetch;
      const bool forms = compress::impl::two_means_avx512_available();
      constexpr auto& prefetch = compress::impl::two_means_prefetch_forms;
      static_assert(std::size(prefetch) == 3);
      std::vector<double> t_ef_form[3], t_plain_form[3];
      // Untimed: where the methods above did not run A2SGD, the first large call of each variant
      // times the kernel's prefetch forms (impl/TwoMeansKernels.hpp), which no sample may include.
      // Later calls are timed too, and one in 16 runs another form: one or two of the samples.
      sink += two_means(exec, g0, e).sum_pos + two_means(exec, g0, ConstFloatView()).sum_pos;
      comm.barrier();
      // One variant's passes in a round: its read ceilings, the library's pass and, where the
      // AVX-512 kernel runs, that kernel with each form forced.
      struct Pass {
        std::vector<double>* samples;
        std::function<void()> run;
      };
      auto variant_passes = [&](auto two, std::deque<std::vector<double>>& t_ceiling, std::vector<double>& t_library,
                                std::vector<double>(&t_forced)[3]) {
        constexpr bool Two = decltype(two)::value;
        const ConstFloatView residual = Two ? ConstFloatView(e) : ConstFloatView();
        std::vector<Pass> passes;
        for_each_read_form<Two>(g0, e, n, [&](auto functor) {
          passes.push_back({&t_ceiling.emplace_back(), [&, functor] { read(functor); }});
        });
        passes.push_back({&t_library, [&, residual] { sink += two_means(exec, g0, residual).sum_pos; }});
        if (forms)
          for (int f = 0; f < 3; ++f)
            passes.push_back(
                {&t_forced[f], [&, residual, f] {
                   sink += compress::impl::two_means(exec, g0, residual, TwoMeansKernel::avx512, prefetch[f]).sum_pos;
                 }});
        return passes;
      };
      const std::vector<Pass> variants[2] = {variant_passes(std::true_type{}, t_read, t_ef, t_ef_form),
                                             variant_passes(std::false_type{}, t_read_one, t_plain, t_plain_form)};
      // The library's kernel on data already in cache, in the same rounds: its own rate where
      // memory does not bound it. A pass can run at the memory's rate only if this is well above
      // the read ceiling. Without software prefetch: near the end of a small slice the prefetches
      // would fetch lines past it from memory.
      const TwoMeansKernel cached_kernel = forms ? TwoMeansKernel::avx512 : TwoMeansKernel::portable;
      const Index cached = std::min<Index>(n, Index(1) << 15);  // 128 KB per buffer: in L2
      constexpr int cached_calls = 32;
      const ConstFloatView g_cached = Kokkos::subview(g0, std::make_pair(Index(0), cached));
      const ConstFloatView e_cached = Kokkos::subview(e, std::make_pair(Index(0), cached));
      std::vector<double> t_cached[2];  // [0]: error feedback, seconds per call
      // The core's clock in the same rounds (CoreClock.hpp), so that the kernel's in-cache rate
      // can be read as cycles per value: a slow run is then either a lower clock or more cycles.
      std::vector<double> t_clock;
      for (int r = 0; r < c.warmup + c.repeats; ++r) {
        for (int v = 0; v < 2; ++v) {
          const std::vector<Pass>& passes = variants[v];
          // Round r starts at pass r: over the rounds every pass takes every place in the order, so
          // that whatever a pass leaves behind in the memory system falls on every pass alike
          // instead of always on the same one.
          // Every rank starts each pass together: at several ranks a kernel then shares the memory
          // with the same kernel on the other ranks, not with whichever pass they have drifted to.
          for (std::size_t k = 0; k < passes.size(); ++k) {
            const Pass& pass = passes[(k + static_cast<std::size_t>(r)) % passes.size()];
            if (evict) {
              impl::evict_from_caches(g0.data(), buffer_bytes);
              impl::evict_from_caches(e.data(), buffer_bytes);
            }
            comm.barrier();
            Stopwatch clock;
            pass.run();
            if (r >= c.warmup) pass.samples->push_back(clock.seconds());
          }
          // One untimed call brings the slice into the cache.
          const ConstFloatView residual = v == 0 ? e_cached : ConstFloatView();
          auto cached_pass = [&] {
            return compress::impl::two_means(exec, g_cached, residual, cached_kernel, TwoMeansPrefetch::none).sum_pos;
          };
          sink += cached_pass();
          comm.barrier();
          Stopwatch clock;
          for (int k = 0; k < cached_calls; ++k) sink += cached_pass();
          if (r >= c.warmup) t_cached[v].push_back(clock.seconds() / cached_calls);
        }
        if (can_measure_clock && r >= c.warmup) t_clock.push_back(time_add_chain());
      }
      // Each ceiling: the fastest of its forms.
      auto fastest = [&](const std::deque<std::vector<double>>& t) {
        double seconds = std::numeric_limits<double>::infinity();
        for (const auto& samples : t) seconds = std::min(seconds, median(samples));
        return slowest(comm, seconds);
      };
      const double read_s = fastest(t_read), read_one_s = fastest(t_read_one);
      const double ef_s = slowest(comm, median(t_ef)), plain_s = slowest(comm, median(t_plain));
      const double ef_gbs = 8.0 * values / ef_s / 1e9, plain_gbs = 4.0 * values / plain_s / 1e9;
      const double read_gbs = 8.0 * values / read_s / 1e9, read_one_gbs = 4.0 * values / read_one_s / 1e9;
      row("reference", "two_means_ef", n, p, 0, 0, ef_s, 0, 0, ef_s, 0, 0);
      row("reference", "two_means_plain", n, p, 0, 0, plain_s, 0, 0, plain_s, 0, 0);
      row("reference", "read_interleaved", n, p, 0, 0, 0, 0, 0, read_s, 0, 0);
      row("reference", "read_one_interleaved", n, p, 0, 0, 0, 0, 0, read_one_s, 0, 0);
      const double ef_cached_s = slowest(comm, median(t_cached[0])),
                   plain_cached_s = slowest(comm, median(t_cached[1]));
      const double ef_cached_gbs = 8.0 * static_cast<double>(cached) / ef_cached_s / 1e9;
      const double plain_cached_gbs = 4.0 * static_cast<double>(cached) / plain_cached_s / 1e9;
      row("reference", "two_means_ef_cached", cached, p, 0, 0, ef_cached_s, 0, 0, ef_cached_s, 0, 0);
      row("reference", "two_means_plain_cached", cached, p, 0, 0, plain_cached_s, 0, 0, plain_cached_s, 0, 0);
      std::string clock_note;
      if (can_measure_clock) {
        // The slowest rank's chain, as the kernel times above are the slowest rank's.
        const double chain_s = slowest(comm, median(t_clock));
        row("reference", "core_clock", clock_chain_adds, p, 0, 0, 0, 0, 0, chain_s, 0, 0);
        const double hz = static_cast<double>(clock_chain_adds) / chain_s;
        const double groups = static_cast<double>(cached) / 16.0;
        char buf[256];
        std::snprintf(buf, sizeof buf,
                      "; core clock %.2f GHz (a chain of dependent integer adds, same rounds): %.2f cycles per 16 "
                      "values with error feedback, %.2f plain",
                      hz / 1e9, ef_cached_s * hz / groups, plain_cached_s * hz / groups);
        clock_note = buf;
      }
      if (root)
        std::printf(
            "two-means pass, interleaved with read ceilings on the same buffers%s: with error feedback %.1f GB/s "
            "(%.0f%% of the two-stream read ceiling, %.1f GB/s), plain %.1f GB/s (%.0f%% of the one-stream read "
            "ceiling, %.1f GB/s)%s\n"
            "two-means kernel in cache (the first %lld values, no software prefetch, %d calls back to back, same "
            "rounds): with error feedback "
            "%.1f GB/s (%.2fx the two-stream read ceiling), plain %.1f GB/s (%.2fx the one-stream read ceiling)%s\n",
            evict ? ", every pass starting with them evicted from the caches" : " (caches not evicted in this build)",
            ef_gbs, 100.0 * ef_gbs / read_gbs, read_gbs, plain_gbs, 100.0 * plain_gbs / read_one_gbs, read_one_gbs,
            std::isfinite(sink) ? "" : " (non-finite sums)", static_cast<long long>(cached), cached_calls,
            ef_cached_gbs, ef_cached_gbs / read_gbs, plain_cached_gbs, plain_cached_gbs / read_one_gbs,
            clock_note.c_str());
      if (forms) {
        std::string line;
        for (const bool feedback : {true, false}) {
          line += feedback ? "with error feedback" : "; plain";
          for (int f = 0; f < 3; ++f) {
            const double s = slowest(comm, median(feedback ? t_ef_form[f] : t_plain_form[f]));
            row("reference",
                std::string(feedback ? "two_means_ef_" : "two_means_plain_") + compress::impl::to_string(prefetch[f]),
                n, p, 0, 0, s, 0, 0, s, 0, 0);
            line += std::string(f ? ", " : " ") + compress::impl::to_string(prefetch[f]) + " " +
                    std::to_string(std::lround(100.0 * (feedback ? read_s : read_one_s) / s)) + "%";
          }
          line += std::string(" (chosen: ") +
                  compress::impl::to_string(compress::impl::two_means_prefetch_chosen(feedback)) + ")";
        }
        if (root)
          std::printf("two-means AVX-512 kernel by software prefetch form, %% of the same read ceilings: %s\n",
                      line.c_str());
      }
    }
    for (const auto& m : results) {
      if (m.method != "topk") continue;
      const Index k = std::max<Index>(1, std::min<Index>(n, std::llround(c.exchange.topk.ratio * values)));
      const SelectionTimes sel = selection_seconds(g0, k, c.repeats, c.full_sort);
      const double nth_s = slowest(comm, sel.nth_element_s);
      row("reference", "nth_element", n, p, 0, 0, nth_s, 0, 0, nth_s, 0, 0);
      if (root)
        std::printf("topk compression %.3f ms vs std::nth_element of the k = %lld largest |g| %.3f ms: %.1fx faster\n",
                    1e3 * m.compress_s, static_cast<long long>(k), 1e3 * nth_s, nth_s / m.compress_s);
      if (!c.full_sort) continue;
      const double sort_s = slowest(comm, sel.full_sort_s);
      row("reference", "fullsort", n, p, 0, 0, sort_s, 0, 0, sort_s, 0, 0);
      if (root)
        std::printf("topk compression %.3f ms vs full sort of |g| (std::sort) %.3f ms: %.1fx faster\n",
                    1e3 * m.compress_s, 1e3 * sort_s, sort_s / m.compress_s);
    }
    if (!c.project) continue;
    std::vector<int> ps;
    for (int q = 2; q <= c.max_ranks; q *= 2) ps.push_back(q);
    for (const Link& link : c.links) {
      if (root) {
        std::printf(
            "\nprojected step ms at n = %lld, %.0f Gb/s, alpha %.2f us (compute %.3f ms + measured kernels + "
            "modelled communication)\n%-9s",
            static_cast<long long>(n), link.gbit_per_s(), link.alpha_s * 1e6, 1e3 * c.compute_s, "method");
        for (int q : ps)
          if (q == 2 || q == 16 || q == 128 || q == 1024 || q == c.max_ranks)
            std::printf(" %10s", ("p=" + std::to_string(q)).c_str());
        std::printf("\n");
      }
      for (const auto& m : results) {
        if (root) std::printf("%-9s", m.method.c_str());
        for (int q : ps) {
          // Decoding every rank's payload grows with p (allgather methods); the rest does not.
          const double apply = decode_grows_with_p(m.traffic) ? m.apply_s * q / p : m.apply_s;
          const double comm_s = step_comm_seconds(m.traffic, q, link, c.allreduce_model);
          const double step = c.compute_s + m.compress_s + apply + comm_s;
          if (root && (q == 2 || q == 16 || q == 128 || q == 1024 || q == c.max_ranks))
            std::printf(" %10.3f", 1e3 * step);
          row("projected", m.method, n, q, link.gbit_per_s(), link.alpha_s * 1e6, m.compress_s, comm_s, apply, step,
              double(m.bytes), double(m.messages));
        }
        if (root) std::printf("\n");
      }
    }
  }
  if (c.mlp_batch > 0) {
    const MlpCompute mc = mlp_compute(comm, c.mlp_batch, c.warmup, c.repeats);
    row("reference", "mlp_step", c.mlp_batch, p, 0, 0, 0, 0, 0, mc.step_s, 0, 0);
    row("reference", "mlp_gemms", c.mlp_batch, p, 0, 0, 0, 0, 0, mc.gemm_s, 0, 0);
    if (root)
      std::printf(
          "\nmlp 784-256-256-10, batch %lld: forward+backward %.3f ms; its 8 GEMMs alone %.3f ms (%.1f GFLOP/s): "
          "the GEMMs are %.0f%% of the step\n",
          static_cast<long long>(c.mlp_batch), 1e3 * mc.step_s, 1e3 * mc.gemm_s, mc.flops / mc.gemm_s / 1e9,
          100.0 * mc.gemm_s / mc.step_s);
  }
  if (csv.is_open()) {
    csv.close();
    if (!csv) {
      std::fprintf(stderr, "a2sgd-bench: error: writing %s failed (disk full?)\n", c.csv.c_str());
      return 1;  // only rank 0 writes; the others have nothing left to wait for
    }
  }
  if (!bytes_ok) {
    if (root) std::fprintf(stderr, "a2sgd-bench: error: measured bytes per step differ from the formulas\n");
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return a2sgd::apps::app_main(argc, argv, "a2sgd-bench", run);
}
