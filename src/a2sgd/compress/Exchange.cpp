#include <a2sgd/compress/Exchange.hpp>

namespace a2sgd {
namespace {

std::uint64_t fnv1a(const std::string& text) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

void check_extent(const FloatView& v, Index n, const char* what) {
  if (static_cast<Index>(v.extent(0)) != n)
    throw InvalidArgument(std::string("exchange: ") + what + " buffer has " + std::to_string(v.extent(0)) +
                          " values, the exchange was built for n = " + std::to_string(n));
}

// A free function: nvcc rejects extended lambdas inside protected member functions.
void scale_in_place(const ExecutionSpace& exec, const FloatView& d, float factor) {
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::compress::scale"),
      Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>(exec, 0, static_cast<Index>(d.extent(0))),
      KOKKOS_LAMBDA(Index i) { d(i) *= factor; });
}

}  // namespace

Exchange::Exchange(const Communicator& comm, Index n, const ExecutionSpace& exec, const CommonExchangeOptions& common,
                   const std::string& signature)
    : m_comm(&comm), m_size(n), m_exec(exec), m_common(common), m_non_finite("a2sgd::compress::non_finite") {
  comm.raise_if_any(n < 0, "exchange: negative parameter count " + std::to_string(n));
  comm.require_same(static_cast<std::uint64_t>(n), "the number of parameters n");
  comm.require_same(fnv1a(signature), "the exchange method and its options (this rank: " + signature + ")");
}

void Exchange::step(const FloatView& params, const FloatView& grad, Optimizer& opt, double lr) {
  check_extent(params, m_size, "parameter");
  check_extent(grad, m_size, "gradient");
  if (opt.size() != m_size)
    throw InvalidArgument("exchange: optimizer was built for " + std::to_string(opt.size()) +
                          " parameters, the exchange for n = " + std::to_string(m_size));
  // The caller's kernels on this instance may still run: finish them outside our clocks.
  m_exec.fence();
  StepStats stats;
  do_step(StepKey(), params, grad, opt, lr, stats);
  m_stats.last_step = stats;
  m_stats.total += stats;
  ++m_stats.steps;
}

void Exchange::average_replicas(const FloatView& params, const FloatView& out) {
  check_extent(params, m_size, "parameter");
  check_extent(out, m_size, "output");
  m_exec.fence();
  StepStats stats;
  if (out.data() != params.data()) Kokkos::deep_copy(m_exec, out, params);
  allreduce_sum(out, stats);
  scale(out, 1.0f / static_cast<float>(m_comm->size()));
  m_exec.fence();
  m_stats.averaging += stats;
}

void Exchange::allreduce_sum(const FloatView& data, StepStats& stats) {
  const auto count = static_cast<std::size_t>(data.extent(0));
  if (host_accessible_memory || m_common.gpu_aware_mpi) {
    m_exec.fence();
    m_comm->allreduce(data.data(), count, MPI_SUM, &stats);
    return;
  }
  const double comm_before = stats.comm_s;
  Stopwatch clock;
  const auto host = staging<float>(m_host_send, count);
  Kokkos::deep_copy(m_exec, host, data);
  m_exec.fence();
  m_comm->allreduce(host.data(), count, MPI_SUM, &stats);
  Kokkos::deep_copy(m_exec, data, host);
  stats.comm_s = comm_before + clock.seconds();  // the copies are part of communicating
}

void Exchange::apply_dense(const FloatView& params, const ConstFloatView& grad, Optimizer& opt, double lr, float factor,
                           StepStats& stats) {
  Stopwatch clock;
  const std::int64_t non_finite = opt.apply(m_exec, params, grad, lr, factor);
  stats.optimizer_s += clock.seconds();
  // Every rank applied the same all-reduced gradient, so every rank reaches the same verdict.
  if (non_finite > 0)
    throw NonFiniteError(name() + " step " + std::to_string(steps()) + ": the averaged gradient has " +
                             std::to_string(non_finite) +
                             " non-finite (NaN/Inf) values; the parameters are no longer finite",
                         -1);
}

void Exchange::scale(const FloatView& data, float factor) const {
  scale_in_place(m_exec, data, factor);
}

}  // namespace a2sgd
