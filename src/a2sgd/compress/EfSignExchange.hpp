#pragma once
/// @file EfSignExchange.hpp
/// Scaled sign compression with error feedback (EF-signSGD); the kernels are EfSignCodec's.

#include <a2sgd/compress/EfSignCodec.hpp>
#include <a2sgd/compress/Exchange.hpp>

namespace a2sgd {

/// a = g + e; each rank sends one bit per entry (the sign; 0 counts as positive), packed in
/// 32-bit words, plus its scale s = ||a||_1 / n, in one allgather (4 + 4 ceil(n/32) bytes);
/// u = (1/p) sum_r s_r sign_r; e = a - s sign(a).
class EfSignExchange final : public Exchange {
 public:
  EfSignExchange(const Communicator& comm, Index n, const CommonExchangeOptions& common = {},
                 const ExecutionSpace& exec = ExecutionSpace());

  std::string name() const override { return "efsign"; }
  std::vector<PlannedCollective> own_traffic() const override {
    return {{CollectiveKind::allgather, 4u * static_cast<std::uint64_t>(payload_words())}};
  }
  std::vector<std::pair<std::string, std::string>> own_options() const override { return {}; }
  std::vector<NamedView> own_state() const override { return {{"residual", m_residual}}; }
  const FloatView& residual() const noexcept { return m_residual; }

  /// 32-bit words per rank in the payload: one for the scale, ceil(n / 32) for the signs.
  Index payload_words() const noexcept { return m_codec.payload_words(); }

  /// The step's body, run by step() alone (it takes a StepKey); public because CUDA requires the
  /// function enclosing a device lambda to be accessible.
  void do_step(StepKey, const FloatView& params, const FloatView& grad, Optimizer& opt, double lr,
               StepStats& stats) override;

 private:
  EfSignCodec m_codec;  // the kernels (EfSignCodec.hpp), shared with the PyTorch hook
  FloatView m_residual;
  FloatView m_update;
  Kokkos::View<std::uint32_t*, MemorySpace> m_words;  // this rank's payload
  Kokkos::View<std::uint32_t*, MemorySpace> m_all;    // every rank's payload
};

}  // namespace a2sgd
