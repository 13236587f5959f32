// a2sgd-bench: one exchange step of every method on synthetic gradients of several sizes, at the
// current number of ranks: compress, communicate and decompress-and-apply times, bytes per rank,
// and each kernel phase as a fraction of the memory ceilings that match its access pattern
// (read-only, copy/triad with write-allocate, read-modify-write: KernelTraffic.hpp), all measured
// in the same run; Top-K next to std::nth_element and a full sort of the same magnitudes. With
// --project, the measured local times plus alpha-beta modelled communication for p up to 4096.
//
// Exit codes: 0 success, 2 invalid options, 1 other errors (including a method whose measured
// bytes differ from its documented formula).
#include "BenchConfig.hpp"
#include "Ceilings.hpp"
#include "CoreClock.hpp"
#include "CsvRows.hpp"
#include "HostTransfers.hpp"
#include "TwoMeansStudy.hpp"
#include "common/AppMain.hpp"
#include "common/Statistics.hpp"

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

struct Measured {
  std::string method;
  double compress_s = 0, comm_s = 0, apply_s = 0, step_s = 0;
  std::uint64_t bytes = 0, messages = 0, planned_bytes = 0;
  std::uint64_t to_host = 0, fences = 0;  // per step, the most of any timed step on any rank
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
  auto ex = make_exchange(c.exchange(method, bench_layout(n)), comm, n);
  Optimizer sgd(OptimizerConfig{}, n);
  FloatView x("a2sgd::bench::params", static_cast<std::size_t>(n));
  FloatView g(Kokkos::view_alloc(Kokkos::WithoutInitializing, "a2sgd::bench::grad"), static_cast<std::size_t>(n));
  std::vector<double> compress, communicate, apply, step;
  Measured m;
  m.method = method;
  apps::HostTransferCounter transfers;
  for (int r = 0; r < c.warmup + c.repeats; ++r) {
    Kokkos::deep_copy(g, g0);
    Kokkos::fence();
    comm.barrier();
    transfers.start();
    Stopwatch clock;
    ex->step(x, g, sgd, 1e-4);
    const double total = clock.seconds();
    const apps::HostTransfers t = transfers.stop();
    if (r < c.warmup) continue;
    m.to_host = std::max(m.to_host, t.to_host);
    m.fences = std::max(m.fences, t.fences);
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
  comm.allreduce(&m.to_host, 1, MPI_MAX);
  comm.allreduce(&m.fences, 1, MPI_MAX);
  m.traffic = ex->step_traffic();
  for (const auto& t : m.traffic) m.planned_bytes += t.bytes;
  m.touched = exchange_method(method).kernel_traffic(static_cast<double>(n), static_cast<double>(m.bytes), comm.size());
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

// Synthetic gradient: N(0, 1) values, different on every rank.
FloatView synthetic_gradient(const Communicator& comm, const BenchConfig& c, Index n) {
  FloatView g0(Kokkos::view_alloc(Kokkos::WithoutInitializing, "a2sgd::bench::g0"), static_cast<std::size_t>(n));
  auto host = Kokkos::create_mirror_view(g0);
  Rng rng(derive_seed(c.seed, static_cast<std::uint64_t>(comm.rank())));
  for (Index i = 0; i < n; ++i) host(i) = static_cast<float>(rng.normal());
  Kokkos::deep_copy(g0, host);
  return g0;
}

void report_ceilings(const Communicator& comm, Index n, CsvRows& rows) {
  const Ceilings& ceil = rows.ceilings();
  const double values = static_cast<double>(n);
  const int p = comm.size();
  rows.reference("read", n, p, 8.0 * values / ceil.read / 1e9);
  rows.reference("copy", n, p, 12.0 * values / ceil.copy / 1e9);
  rows.reference("triad", n, p, 16.0 * values / ceil.triad / 1e9);
  rows.reference("axpy", n, p, 12.0 * values / ceil.axpy / 1e9);
  rows.reference("rmw", n, p, 20.0 * values / ceil.rmw / 1e9);
  if (ceil.rounding > 0.0) rows.reference("qsgd_rounding", n, p, values / ceil.rounding);
  if (ceil.packing > 0.0) rows.reference("qsgd_packing", n, p, values / ceil.packing);
  if (ceil.unpacking > 0.0) rows.reference("qsgd_unpacking", n, p, p * values / ceil.unpacking);
  if (comm.rank() == 0)
    std::printf(
        "\nn = %lld values (%s per buffer); ceilings in GB/s, write-allocate counted: read two streams %.1f, "
        "copy %.1f, triad %.1f, axpy %.1f, read-modify-write (3 streams) %.1f; QSGD's rounding arithmetic in "
        "cache %.2f G values/s (its whole pack %.2f), its decode's unpacking %.2f G fields/s\n"
        "%-9s %11s %9s %11s %9s %10s %4s %17s %17s %10s %6s\n",
        static_cast<long long>(n), human(4.0 * values).c_str(), ceil.read, ceil.copy, ceil.triad, ceil.axpy, ceil.rmw,
        ceil.rounding / 1e9, ceil.packing / 1e9, ceil.unpacking / 1e9, "method", "compress ms", "comm ms",
        "decode+apply", "step ms", "bytes/rank", "msgs", "compress GB/s (%)", "apply GB/s (%)", "to host", "fences");
}

// Every method's step at n values; false in `bytes_ok` when a method sent other than it plans.
std::vector<Measured> measure_methods(const Communicator& comm, const BenchConfig& c, const FloatView& g0, Index n,
                                      CsvRows& rows, bool& bytes_ok) {
  std::vector<Measured> results;
  for (const auto& method : c.methods) {
    Measured m = measure(c, method, n, g0, comm);
    bytes_ok = bytes_ok && m.bytes == m.planned_bytes;
    if (comm.rank() == 0)
      std::printf("%-9s %11.3f %9.3f %11.3f %10.3f %10s %4llu %17s %17s %10llu %6llu%s\n", method.c_str(),
                  1e3 * m.compress_s, 1e3 * m.comm_s, 1e3 * m.apply_s, 1e3 * m.step_s, human(double(m.bytes)).c_str(),
                  static_cast<unsigned long long>(m.messages),
                  phase_figure(m.touched.compress, m.compress_s, rows.ceilings()).c_str(),
                  phase_figure(m.touched.apply, m.apply_s, rows.ceilings()).c_str(),
                  static_cast<unsigned long long>(m.to_host), static_cast<unsigned long long>(m.fences),
                  m.bytes == m.planned_bytes ? "" : "  BYTES DIFFER FROM docs/methods.md");
    rows.row("measured", method, n, comm.size(), 0, 0, m.compress_s, m.comm_s, m.apply_s, m.step_s, double(m.bytes),
             double(m.messages), m.touched);
    results.push_back(std::move(m));
  }
  if (comm.rank() == 0)
    std::printf(
        "(%%: the time the phase's passes would take at the ceilings of their access patterns (QSGD's pack and decode: "
        "or of their arithmetic in cache, where longer); to host: device-to-host "
        "copies per step, the host round trips; fences: per step; both the most of any timed step on any rank)\n");
  return results;
}

// Top-K's selection against what a user would write: std::nth_element, and a full sort.
void topk_references(const Communicator& comm, const BenchConfig& c, const std::vector<Measured>& results,
                     const FloatView& g0, Index n, CsvRows& rows) {
  for (const auto& m : results) {
    if (m.method != "topk") continue;
    const double ratio = c.method_options.at("topk").number("ratio");
    const Index k = std::max<Index>(1, std::min<Index>(n, std::llround(ratio * static_cast<double>(n))));
    const SelectionTimes sel = selection_seconds(g0, k, c.repeats, c.full_sort);
    const double nth_s = slowest(comm, sel.nth_element_s);
    rows.row("reference", "nth_element", n, comm.size(), 0, 0, nth_s, 0, 0, nth_s, 0, 0);
    if (comm.rank() == 0)
      std::printf("topk compression %.3f ms vs std::nth_element of the k = %lld largest |g| %.3f ms: %.1fx faster\n",
                  1e3 * m.compress_s, static_cast<long long>(k), 1e3 * nth_s, nth_s / m.compress_s);
    if (!c.full_sort) continue;
    const double sort_s = slowest(comm, sel.full_sort_s);
    rows.row("reference", "fullsort", n, comm.size(), 0, 0, sort_s, 0, 0, sort_s, 0, 0);
    if (comm.rank() == 0)
      std::printf("topk compression %.3f ms vs full sort of |g| (std::sort) %.3f ms: %.1fx faster\n",
                  1e3 * m.compress_s, 1e3 * sort_s, sort_s / m.compress_s);
  }
}

// Measured kernels plus the alpha-beta model's communication at p = 2 .. max_ranks.
void project(const Communicator& comm, const BenchConfig& c, const std::vector<Measured>& results, Index n,
             CsvRows& rows) {
  const bool root = comm.rank() == 0;
  const int p = comm.size();
  std::vector<int> ps;
  for (int q = 2; q <= c.max_ranks; q *= 2) ps.push_back(q);
  auto shown = [&](int q) { return q == 2 || q == 16 || q == 128 || q == 1024 || q == c.max_ranks; };
  for (const Link& link : c.links) {
    if (root) {
      std::printf(
          "\nprojected step ms at n = %lld, %.0f Gb/s, alpha %.2f us (compute %.3f ms + measured kernels + "
          "modelled communication)\n%-9s",
          static_cast<long long>(n), link.gbit_per_s(), link.alpha_s * 1e6, 1e3 * c.compute_s, "method");
      for (int q : ps)
        if (shown(q)) std::printf(" %10s", ("p=" + std::to_string(q)).c_str());
      std::printf("\n");
    }
    for (const auto& m : results) {
      if (root) std::printf("%-9s", m.method.c_str());
      for (int q : ps) {
        // Decoding every rank's payload grows with p (allgather methods); the rest does not.
        const double apply = decode_grows_with_p(m.traffic) ? m.apply_s * q / p : m.apply_s;
        const double comm_s = step_comm_seconds(m.traffic, q, link, c.allreduce_model);
        const double step = c.compute_s + m.compress_s + apply + comm_s;
        if (root && shown(q)) std::printf(" %10.3f", 1e3 * step);
        rows.row("projected", m.method, n, q, link.gbit_per_s(), link.alpha_s * 1e6, m.compress_s, comm_s, apply, step,
                 double(m.bytes), double(m.messages));
      }
      if (root) std::printf("\n");
    }
  }
}

void mlp_reference(const Communicator& comm, const BenchConfig& c, CsvRows& rows) {
  const MlpCompute mc = mlp_compute(comm, c.mlp_batch, c.warmup, c.repeats);
  rows.reference("mlp_step", c.mlp_batch, comm.size(), mc.step_s);
  rows.reference("mlp_gemms", c.mlp_batch, comm.size(), mc.gemm_s);
  if (comm.rank() == 0)
    std::printf(
        "\nmlp 784-256-256-10, batch %lld: forward+backward %.3f ms; its 8 GEMMs alone %.3f ms (%.1f GFLOP/s): "
        "the GEMMs are %.0f%% of the step\n",
        static_cast<long long>(c.mlp_batch), 1e3 * mc.step_s, 1e3 * mc.gemm_s, mc.flops / mc.gemm_s / 1e9,
        100.0 * mc.gemm_s / mc.step_s);
}

// Options and the CSV file: 0 to go on, else the exit code (help: -1).
int start(int argc, char** argv, const Communicator& comm, BenchConfig& c, CsvRows& rows) {
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
    return -1;
  }
  try {
    comm.all_or_throw([&] {
      if (comm.rank() == 0 && !c.csv.empty() && !rows.open(c.csv))
        throw InvalidArgument("--csv " + c.csv + ": cannot open for writing");
    });
  } catch (const CollectiveError& e) {
    if (comm.rank() == 0) std::fprintf(stderr, "a2sgd-bench: error: %s\n", e.what());
    return 2;
  }
  return 0;
}

int run(int argc, char** argv, const Communicator& comm) {
  BenchConfig c;
  CsvRows rows;
  if (const int code = start(argc, argv, comm, c, rows); code != 0) return code < 0 ? 0 : code;
  const bool root = comm.rank() == 0;
  const int p = comm.size();
  if (root)
    std::printf("a2sgd-bench: %d rank%s, %s, medians of %d steps after %d warm-up, heap policy %s\n", p,
                p > 1 ? "s" : "", Kokkos::DefaultExecutionSpace::name(), c.repeats, c.warmup,
                to_string(heap_policy_in_effect()));
  bool bytes_ok = true;
  for (const Index n : c.sizes) {
    const FloatView g0 = synthetic_gradient(comm, c, n);
    rows.set_ceilings(measure_ceilings(comm, n, c.warmup, c.repeats));
    report_ceilings(comm, n, rows);
    const std::vector<Measured> results = measure_methods(comm, c, g0, n, rows, bytes_ok);
    two_means_study(comm, c, g0, n, rows);
    topk_references(comm, c, results, g0, n, rows);
    if (c.project) project(comm, c, results, n, rows);
  }
  if (c.mlp_batch > 0) mlp_reference(comm, c, rows);
  if (!rows.close()) {
    std::fprintf(stderr, "a2sgd-bench: error: writing %s failed (disk full?)\n", c.csv.c_str());
    return 1;  // only rank 0 writes; the others have nothing left to wait for
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
