#pragma once
/// @file CastExchange.hpp
/// Casting all-reduce: the gradient travels as fp16 or bfloat16 (2 bytes per entry).

#include <a2sgd/compress/Exchange.hpp>

namespace a2sgd {

enum class HalfFormat { fp16, bf16 };

/// u = (1/p) * allreduce(cast(g)) where the all-reduce adds in float and rounds every partial
/// sum back to the 16-bit format (as a 16-bit wire format does at each hop). 2n bytes per rank.
/// No error feedback (what rounding loses is lost). An fp16 overflow (|g| > 65504) becomes
/// Inf, which stops every rank (NonFiniteError).
class CastExchange final : public Exchange {
 public:
  CastExchange(const Communicator& comm, Index n, HalfFormat format, const CommonExchangeOptions& common = {},
               const ExecutionSpace& exec = ExecutionSpace());
  ~CastExchange() override;

  std::string name() const override { return m_format == HalfFormat::fp16 ? "fp16" : "bf16"; }
  std::vector<PlannedCollective> step_traffic() const override {
    return {{CollectiveKind::allreduce, 2u * static_cast<std::uint64_t>(size())}};
  }
  std::vector<std::pair<std::string, std::string>> options() const override { return {}; }

  /// The step's body (call step()); public only because CUDA requires the function enclosing
  /// a device lambda to be accessible.
  void do_step(const FloatView& params, const FloatView& grad, Optimizer& opt, double lr, StepStats& stats) override;

 private:
  HalfFormat m_format;
  MPI_Op m_sum = MPI_OP_NULL;
  Kokkos::View<std::uint16_t*, MemorySpace> m_wire;
  Kokkos::View<std::uint16_t*, Kokkos::HostSpace> m_host_wire;
  FloatView m_update;
};

}  // namespace a2sgd
