// a2sgd-bench: one exchange step of every method on synthetic gradients of several sizes, at the
// current number of ranks: compress, communicate and decompress-and-apply times, bytes per rank,
// and the kernels' effective bandwidth next to a copy kernel measured in the same run. With
// --project, the measured local times plus alpha-beta modelled communication for p up to 4096.
//
// Exit codes: 0 success, 2 invalid options, 1 other errors (including a method whose measured
// bytes differ from its documented formula).
#include "../common/AppMain.hpp"
#include "BenchConfig.hpp"
#include "KernelTraffic.hpp"

#include <a2sgd/a2sgd.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
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

double copy_seconds(const FloatView& src, const FloatView& dst, int warmup, int repeats) {
  std::vector<double> t;
  const ExecutionSpace exec;
  for (int r = 0; r < warmup + repeats; ++r) {
    Stopwatch clock;
    Kokkos::parallel_for(
        A2SGD_LABEL("a2sgd::bench::copy"), Policy(exec, 0, static_cast<Index>(src.extent(0))),
        KOKKOS_LAMBDA(Index i) { dst(i) = src(i); });
    exec.fence();
    if (r >= warmup) t.push_back(clock.seconds());
  }
  return median(t);
}

// The reference Top-K must beat: sort all |a| descending (std::sort on the host copy).
double full_sort_seconds(const FloatView& g, int repeats) {
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), g);
  std::vector<double> t;
  std::vector<float> keys(host.extent(0));
  for (int r = 0; r < std::min(repeats, 3); ++r) {
    for (std::size_t i = 0; i < keys.size(); ++i) keys[i] = std::fabs(host(i));
    Stopwatch clock;
    std::sort(keys.begin(), keys.end(), [](float a, float b) { return a > b; });
    t.push_back(clock.seconds());
  }
  return median(t);
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

std::string bandwidth(double bytes, double seconds, double copy_gbs) {
  if (bytes <= 0 || seconds <= 0) return "         -";
  const double gbs = bytes / seconds / 1e9;
  char buf[40];
  std::snprintf(buf, sizeof buf, "%5.1f (%3.0f%%)", gbs, 100.0 * gbs / copy_gbs);
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
               "messages,compress_bytes_touched,apply_bytes_touched,copy_gbs\n";
      }
    });
  } catch (const CollectiveError& e) {
    if (root) std::fprintf(stderr, "a2sgd-bench: error: %s\n", e.what());
    return 2;
  }
  auto row = [&](const char* kind, const std::string& method, Index n, int ranks, double gbps, double alpha_us,
                 double compress, double comm_s, double apply, double step, double bytes, double messages,
                 double touched_c, double touched_a, double copy_gbs) {
    if (!csv.is_open()) return;
    char buf[512];
    std::snprintf(buf, sizeof buf, "%s,%s,%lld,%d,%g,%g,%.9g,%.9g,%.9g,%.9g,%.0f,%.0f,%.0f,%.0f,%.4g\n", kind,
                  method.c_str(), static_cast<long long>(n), ranks, gbps, alpha_us, compress, comm_s, apply, step,
                  bytes, messages, touched_c, touched_a, copy_gbs);
    csv << buf;
  };

  if (root)
    std::printf("a2sgd-bench: %d rank%s, %s, medians of %d steps after %d warm-up\n", p, p > 1 ? "s" : "",
                Kokkos::DefaultExecutionSpace::name(), c.repeats, c.warmup);
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
    double copy_gbs = 0;
    {
      FloatView dst("a2sgd::bench::copy", static_cast<std::size_t>(n));
      comm.barrier();
      copy_gbs = 8.0 * static_cast<double>(n) / slowest(comm, copy_seconds(g0, dst, c.warmup, c.repeats)) / 1e9;
    }
    row("reference", "copy", n, p, 0, 0, 0, 0, 0, 8.0 * n / copy_gbs / 1e9, 0, 0, 0, 8.0 * n, copy_gbs);
    if (root)
      std::printf(
          "\nn = %lld values (%s per buffer); copy kernel %.1f GB/s (reads and writes 8 bytes per value)\n"
          "%-9s %11s %9s %11s %9s %10s %4s %15s %15s\n",
          static_cast<long long>(n), human(4.0 * n).c_str(), copy_gbs, "method", "compress ms", "comm ms",
          "decode+apply", "step ms", "bytes/rank", "msgs", "compress GB/s", "apply GB/s");
    std::vector<Measured> results;
    for (const auto& method : c.methods) {
      Measured m = measure(c, method, n, g0, comm);
      bytes_ok = bytes_ok && m.bytes == m.planned_bytes;
      if (root)
        std::printf("%-9s %11.3f %9.3f %11.3f %10.3f %10s %4llu %15s %15s%s\n", method.c_str(), 1e3 * m.compress_s,
                    1e3 * m.comm_s, 1e3 * m.apply_s, 1e3 * m.step_s, human(double(m.bytes)).c_str(),
                    static_cast<unsigned long long>(m.messages),
                    bandwidth(m.touched.compress, m.compress_s, copy_gbs).c_str(),
                    bandwidth(m.touched.apply, m.apply_s, copy_gbs).c_str(),
                    m.bytes == m.planned_bytes ? "" : "  BYTES DIFFER FROM docs/methods.md");
      row("measured", method, n, p, 0, 0, m.compress_s, m.comm_s, m.apply_s, m.step_s, double(m.bytes),
          double(m.messages), m.touched.compress, m.touched.apply, copy_gbs);
      results.push_back(std::move(m));
    }
    if (c.full_sort) {
      for (const auto& m : results) {
        if (m.method != "topk") continue;
        const double sort_s = slowest(comm, full_sort_seconds(g0, c.repeats));
        row("reference", "fullsort", n, p, 0, 0, sort_s, 0, 0, sort_s, 0, 0, 0, 0, copy_gbs);
        if (root)
          std::printf("topk compression %.3f ms vs full sort of |g| (std::sort) %.3f ms: %.1fx faster\n",
                      1e3 * m.compress_s, 1e3 * sort_s, sort_s / m.compress_s);
      }
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
              double(m.bytes), double(m.messages), 0, 0, copy_gbs);
        }
        if (root) std::printf("\n");
      }
    }
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
