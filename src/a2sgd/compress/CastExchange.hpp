#pragma once
/// @file CastExchange.hpp
/// Casting all-reduce: the gradient travels as fp16 or bfloat16 (2 bytes per entry).

#include <a2sgd/compress/Exchange.hpp>

namespace a2sgd {

enum class HalfFormat { fp16, bf16 };

/// u = (1/p) * allreduce(cast(g)) with the data in the 16-bit format on the wire, summed on the
/// execution space: the n entries are split into p balanced chunks; an all-to-all hands every rank
/// the other ranks' copies of its own chunk (reduce-scatter), a kernel adds the p values of each
/// entry in float and rounds the sum once back to 16 bits, and an all-gather of the summed chunks
/// gives every rank the whole sum. The two collectives send 2 (n - chunk) + 2 chunk = 2n bytes per
/// rank, the traffic of a ring all-reduce of 16-bit data, which is how the scale projection models
/// them. No host function ever sees the data, so GPU-aware MPI gets device buffers. No error
/// feedback (what rounding loses is lost). An fp16 overflow (|g| > 65504) becomes Inf, which
/// stops every rank (NonFiniteError).
class CastExchange final : public Exchange {
 public:
  CastExchange(const Communicator& comm, Index n, HalfFormat format, const CommonExchangeOptions& common = {},
               const ExecutionSpace& exec = ExecutionSpace());

  std::string name() const override { return m_format == HalfFormat::fp16 ? "fp16" : "bf16"; }
  std::vector<PlannedCollective> own_traffic() const override {
    return {{CollectiveKind::allreduce, 2u * static_cast<std::uint64_t>(size()), 2, AllreduceModel::ring}};
  }
  std::vector<std::pair<std::string, std::string>> own_options() const override { return {}; }

  /// The step's body, run by step() alone (it takes a StepKey); public because CUDA requires the
  /// function enclosing a device lambda to be accessible.
  void do_step(StepKey, const FloatView& params, const FloatView& grad, Optimizer& opt, double lr,
               StepStats& stats) override;

 private:
  using Wire = Kokkos::View<std::uint16_t*, MemorySpace>;
  HalfFormat m_format;
  // Chunk q is [displs[q], displs[q] + counts[q]); chunk_out[q] = counts[q] but 0 for this rank.
  std::vector<int> m_counts, m_displs, m_counts_out, m_recv_counts, m_recv_displs;
  Wire m_wire;  // the whole vector in 16 bits; this rank's chunk becomes the sum
  Wire m_recv;  // the other ranks' copies of this rank's chunk
  // Host copies for MPI when it cannot read MemorySpace (allocated once; empty otherwise).
  Kokkos::View<std::uint16_t*, Kokkos::HostSpace> m_host_wire, m_host_recv;
  FloatView m_update;
};

}  // namespace a2sgd
