#include <a2sgd/compress/CastExchange.hpp>
#include <a2sgd/core/HalfFloat.hpp>

#include <algorithm>
#include <climits>

namespace a2sgd {
namespace {

using Policy = Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>;

// MPI reduction operators: add in float, round the sum back to 16 bits.
void sum_fp16(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = to_fp16(from_fp16(a[i]) + from_fp16(b[i]));
}

void sum_bf16(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = to_bf16(from_bf16(a[i]) + from_bf16(b[i]));
}

}  // namespace

CastExchange::CastExchange(const Communicator& comm, Index n, HalfFormat format, const CommonExchangeOptions& common,
                           const ExecutionSpace& exec)
    : Exchange(comm, n, exec, common, format == HalfFormat::fp16 ? "fp16" : "bf16"),
      m_format(format),
      m_wire(Kokkos::view_alloc(Kokkos::WithoutInitializing, "a2sgd::compress::half_wire"),
             static_cast<std::size_t>(n)),
      m_host_wire(Kokkos::view_alloc(Kokkos::WithoutInitializing, "a2sgd::compress::half_host"),
                  host_accessible_memory ? 0 : static_cast<std::size_t>(n)),
      m_update("a2sgd::compress::half_update", static_cast<std::size_t>(n)) {
  A2SGD_MPI_CHECK(MPI_Op_create(format == HalfFormat::fp16 ? sum_fp16 : sum_bf16, 1, &m_sum));
}

CastExchange::~CastExchange() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && m_sum != MPI_OP_NULL) MPI_Op_free(&m_sum);
}

void CastExchange::do_step(const FloatView& params, const FloatView& grad, Optimizer& opt, double lr,
                           StepStats& stats) {
  Stopwatch clock;
  const auto wire = m_wire;
  const ConstFloatView g = grad;
  const bool fp16 = m_format == HalfFormat::fp16;
  Kokkos::parallel_for(
      "a2sgd::compress::half_encode", Policy(exec(), 0, size()),
      KOKKOS_LAMBDA(Index i) { wire(i) = fp16 ? to_fp16(g(i)) : to_bf16(g(i)); });
  exec().fence();
  stats.compress_s += clock.seconds();

  // One all-reduce of n 16-bit values (chunked like every other collective), staged if needed.
  const double comm_before = stats.comm_s;
  clock.restart();
  std::uint16_t* data = wire.data();
  if constexpr (!host_accessible_memory) {
    if (!common_options().gpu_aware_mpi) {
      Kokkos::deep_copy(m_host_wire, wire);
      data = m_host_wire.data();
    }
  }
  const auto count = static_cast<std::size_t>(size());
  for (std::size_t done = 0; done < count;) {
    const std::size_t len = std::min<std::size_t>(count - done, static_cast<std::size_t>(INT_MAX));
    A2SGD_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data + done, static_cast<int>(len), MPI_UINT16_T, m_sum, comm().get()));
    done += len;
    stats.messages += 1;
  }
  stats.bytes_sent += count * sizeof(std::uint16_t);
  if constexpr (!host_accessible_memory) {
    if (!common_options().gpu_aware_mpi) Kokkos::deep_copy(wire, m_host_wire);
  }
  stats.comm_s = comm_before + clock.seconds();

  clock.restart();
  const FloatView u = m_update;
  Kokkos::parallel_for(
      "a2sgd::compress::half_decode", Policy(exec(), 0, size()),
      KOKKOS_LAMBDA(Index i) { u(i) = fp16 ? from_fp16(wire(i)) : from_bf16(wire(i)); });
  exec().fence();
  stats.optimizer_s += clock.seconds();
  apply_dense(params, m_update, opt, lr, 1.0f / static_cast<float>(comm().size()), stats);
}

}  // namespace a2sgd
