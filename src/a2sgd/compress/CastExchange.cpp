#include <a2sgd/compress/CastExchange.hpp>
#include <a2sgd/core/HalfFloat.hpp>

#include <algorithm>
#include <climits>

namespace a2sgd {
namespace {

using Policy = Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>;

}  // namespace

CastExchange::CastExchange(const Communicator& comm, Index n, HalfFormat format, const CommonExchangeOptions& common,
                           const ExecutionSpace& exec)
    : Exchange(comm, n, exec, common, format == HalfFormat::fp16 ? "fp16" : "bf16"),
      m_format(format),
      m_wire(Kokkos::view_alloc(Kokkos::WithoutInitializing, "a2sgd::compress::half_wire"),
             static_cast<std::size_t>(n)),
      m_update("a2sgd::compress::half_update", static_cast<std::size_t>(n)) {
  const int p = comm.size(), me = comm.rank();
  if (n / p + 1 > static_cast<Index>(INT_MAX))
    throw InvalidArgument(name() + ": n / p = " + std::to_string(n / p) + " values per chunk exceed INT_MAX");
  for (int q = 0; q < p; ++q) {
    const Index begin = n / p * q + std::min<Index>(q, n % p);
    m_counts.push_back(static_cast<int>(n / p + (q < n % p ? 1 : 0)));
    m_displs.push_back(static_cast<int>(begin));
  }
  const int own = m_counts[me];
  for (int q = 0; q < p; ++q) {
    m_counts_out.push_back(q == me ? 0 : m_counts[q]);
    m_recv_counts.push_back(q == me ? 0 : own);
    m_recv_displs.push_back(q * own);
  }
  m_recv = Wire(Kokkos::view_alloc(Kokkos::WithoutInitializing, "a2sgd::compress::half_recv"),
                static_cast<std::size_t>(own) * static_cast<std::size_t>(p));
  if (!host_accessible_memory && !common.gpu_aware_mpi) {
    m_host_wire = Kokkos::create_mirror_view(m_wire);
    m_host_recv = Kokkos::create_mirror_view(m_recv);
  }
}

void CastExchange::do_step(const FloatView& params, const FloatView& grad, Optimizer& opt, double lr,
                           StepStats& stats) {
  Stopwatch clock;
  const auto wire = m_wire;
  const auto recv = m_recv;
  const ConstFloatView g = grad;
  const bool fp16 = m_format == HalfFormat::fp16;
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::compress::half_encode"), Policy(exec(), 0, size()),
      KOKKOS_LAMBDA(Index i) { wire(i) = fp16 ? to_fp16(g(i)) : to_bf16(g(i)); });
  exec().fence();
  stats.compress_s += clock.seconds();

  // Reduce-scatter: the other ranks' copies of this rank's chunk, summed on the execution space.
  const double comm_before = stats.comm_s;
  clock.restart();
  const bool staged = m_host_wire.extent(0) > 0;
  if (staged) {
    Kokkos::deep_copy(exec(), m_host_wire, wire);
    exec().fence();
  }
  comm().alltoallv(staged ? m_host_wire.data() : wire.data(), m_counts_out.data(), m_displs.data(),
                   staged ? m_host_recv.data() : recv.data(), m_recv_counts.data(), m_recv_displs.data(), &stats);
  if (staged) Kokkos::deep_copy(exec(), recv, m_host_recv);
  const int p = comm().size(), me = comm().rank(), own = m_counts[me];
  const Index begin = m_displs[me];
  // With one rank the chunk is the whole sum already (and a 16-bit value survives the round trip
  // through float exactly): no kernel.
  if (p > 1)
    Kokkos::parallel_for(
        A2SGD_LABEL("a2sgd::compress::half_sum"), Policy(exec(), 0, own), KOKKOS_LAMBDA(Index j) {
          float sum = fp16 ? from_fp16(wire(begin + j)) : from_bf16(wire(begin + j));
          for (int q = 0; q < p; ++q) {
            if (q == me) continue;
            const std::uint16_t h = recv(q * own + j);
            sum += fp16 ? from_fp16(h) : from_bf16(h);
          }
          wire(begin + j) = fp16 ? to_fp16(sum) : to_bf16(sum);
        });
  // All-gather of the summed chunks, in place.
  if (staged) {
    const auto chunk = std::make_pair(static_cast<std::size_t>(begin), static_cast<std::size_t>(begin + own));
    Kokkos::deep_copy(exec(), Kokkos::subview(m_host_wire, chunk), Kokkos::subview(wire, chunk));
  }
  exec().fence();
  comm().allgatherv(staged ? m_host_wire.data() : wire.data(), m_counts.data(), m_displs.data(), &stats);
  if (staged) Kokkos::deep_copy(exec(), wire, m_host_wire);
  stats.comm_s = comm_before + clock.seconds();

  clock.restart();
  const FloatView u = m_update;
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::compress::half_decode"), Policy(exec(), 0, size()),
      KOKKOS_LAMBDA(Index i) { u(i) = fp16 ? from_fp16(wire(i)) : from_bf16(wire(i)); });
  exec().fence();
  stats.optimizer_s += clock.seconds();
  apply_dense(params, m_update, opt, lr, 1.0f / static_cast<float>(comm().size()), stats);
}

}  // namespace a2sgd
