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
/// stops every rank (NonFiniteError). With planned buckets (plan_buckets()), each bucket is split
/// into its own p chunks: its encode and all-to-all start as soon as the backward pass finishes it,
/// its sum and all-gather in step() (every rank must start them in the same order, which a
/// completion seen during the backward pass would not give).
class CastExchange final : public Exchange {
 public:
  CastExchange(const Communicator& comm, Index n, HalfFormat format, const CommonExchangeOptions& common = {},
               const ExecutionSpace& exec = ExecutionSpace());

  std::string name() const override { return m_format == HalfFormat::fp16 ? "fp16" : "bf16"; }
  std::vector<PlannedCollective> own_traffic() const override {
    if (m_parts.empty())
      return {{CollectiveKind::allreduce, 2u * static_cast<std::uint64_t>(size()), 2, AllreduceModel::ring}};
    std::vector<PlannedCollective> t;  // per bucket, the same pair of collectives
    for (const GradientRange& b : buckets())
      t.push_back({CollectiveKind::allreduce, 2u * static_cast<std::uint64_t>(b.size()), 2, AllreduceModel::ring});
    return t;
  }
  std::vector<std::pair<std::string, std::string>> own_options() const override { return {}; }

  /// The step's body, run by step() alone (it takes a StepKey); public because CUDA requires the
  /// function enclosing a device lambda to be accessible.
  void do_step(StepKey, const FloatView& params, const FloatView& grad, Optimizer& opt, double lr,
               StepStats& stats) override;
  /// Encodes bucket `index` and starts its all-to-all.
  Request start_bucket(const FloatView& grad, std::size_t index, GradientRange bucket, StepStats& stats) override;
  /// Sums this rank's chunk of values [begin, begin + own) of the wire from `recv` (public for CUDA,
  /// run only inside a step).
  void sum_chunk(const Kokkos::View<std::uint16_t*, MemorySpace>& recv, Index begin, int own);

  /// How n values split into p chunks, and the all-to-all's counts for rank `me` (every count in values).
  struct Chunks {
    std::vector<int> counts, displs, counts_out, recv_counts, recv_displs;
    int own = 0;
    Chunks() = default;
    Chunks(Index n, int p, int me);
  };

 protected:
  bool bucketed() const override { return true; }
  void buckets_planned() override;

 private:
  using Wire = Kokkos::View<std::uint16_t*, MemorySpace>;
  struct Part {
    Chunks chunks;
    Wire recv;  // the other ranks' copies of this rank's chunk of the bucket
    Request gather;
  };
  // The step's exchange up to the summed wire: the whole gradient at once, or bucket by bucket.
  void whole_step(const FloatView& grad, StepStats& stats);
  void bucketed_step(const FloatView& grad, StepStats& stats);
  HalfFormat m_format;
  // Chunk q is [displs[q], displs[q] + counts[q]); chunk_out[q] = counts[q] but 0 for this rank.
  std::vector<int> m_counts, m_displs, m_counts_out, m_recv_counts, m_recv_displs;
  Wire m_wire;  // the whole vector in 16 bits; this rank's chunk becomes the sum
  Wire m_recv;  // the other ranks' copies of this rank's chunk
  // Host copies for MPI when it cannot read MemorySpace (allocated once; empty otherwise).
  Kokkos::View<std::uint16_t*, Kokkos::HostSpace> m_host_wire, m_host_recv;
  FloatView m_update;
  std::vector<Part> m_parts;  // per planned bucket, when there are several
};

}  // namespace a2sgd
