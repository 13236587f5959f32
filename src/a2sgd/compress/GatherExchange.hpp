#pragma once
/// @file GatherExchange.hpp
/// A gather codec (GatherCodec.hpp) around an MPI all-gather: the one step of Top-K, QSGD and
/// EF-sign. Per step: the codec's encode (compress_s), one allgather of payload_words() words per
/// rank (comm_s), the codec's decode of every rank's payload into u (optimizer_s), the optimizer on
/// u, and the codec's clear. Buffers of fixed size are allocated at construction: a step allocates
/// nothing.

#include <a2sgd/compress/Exchange.hpp>
#include <a2sgd/compress/GatherCodec.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace a2sgd {

template <class Codec>
class GatherExchange : public Exchange {
  static_assert(is_gather_codec_v<Codec>, "GatherExchange needs a codec with the interface of GatherCodec.hpp");

 public:
  using Words = PayloadView<Codec>;
  using Options = std::vector<std::pair<std::string, std::string>>;

  /// The method `name` with its options as text (for logs and checkpoints; `options` also signs
  /// checkpoints, so a restart refuses other values); `seed`: the run's seed, for codecs with a
  /// random stream. Collective, as every exchange's construction.
  GatherExchange(const Communicator& comm, Index n, const ExecutionSpace& exec, const CommonExchangeOptions& common,
                 std::string name, Options options, Codec codec, std::uint64_t seed = 0)
      : GatherExchange(comm, n, exec, common, signature_of(name, options), std::move(codec), seed) {
    m_name = std::move(name);
    m_options = std::move(options);
  }

  std::string name() const override { return m_name; }
  Options own_options() const override { return m_options; }

  std::vector<PlannedCollective> own_traffic() const override {
    return {{CollectiveKind::allgather,
             sizeof(typename Codec::Word) * static_cast<std::uint64_t>(m_codec.payload_words())}};
  }
  std::vector<NamedView> own_state() const override {
    if constexpr (Codec::has_residual) return {{"residual", m_residual}};
    return {};
  }

  const Codec& codec() const noexcept { return m_codec; }
  /// Words per rank in the payload.
  Index payload_words() const noexcept { return m_codec.payload_words(); }
  /// The error-feedback residual (n values; empty for a codec without one).
  const FloatView& residual() const noexcept { return m_residual; }

  /// The step's body, run by step() alone (it takes a StepKey); public because CUDA requires the
  /// function enclosing a device lambda to be accessible.
  void do_step(StepKey, const FloatView& params, const FloatView& grad, Optimizer& opt, double lr,
               StepStats& stats) override {
    Stopwatch clock;
    const EncodeContext context{m_seed, steps(), comm().rank(), non_finite_count()};
    m_codec.encode(exec(), grad, m_residual, context, m_payload);
    exec().fence();
    stats.compress_s += clock.seconds();

    allgather(m_payload, m_gathered, stats);

    clock.restart();
    m_codec.decode(exec(), m_gathered, m_update, comm().size());
    exec().fence();
    stats.optimizer_s += clock.seconds();
    apply_dense(params, m_update, opt, lr, 1.0f, stats);
    m_codec.clear(exec(), m_gathered, m_update);
    exec().fence();
  }

 protected:
  /// For a subclass that names itself (name(), own_options()): `signature` is the method and its
  /// options, for checkpoints (Exchange's constructor).
  GatherExchange(const Communicator& comm, Index n, const ExecutionSpace& exec, const CommonExchangeOptions& common,
                 const std::string& signature, Codec codec, std::uint64_t seed = 0)
      : Exchange(comm, n, exec, common, signature),
        m_codec(std::move(codec)),
        m_seed(seed),
        m_residual("a2sgd::compress::residual", Codec::has_residual ? static_cast<std::size_t>(n) : 0),
        m_update("a2sgd::compress::update", static_cast<std::size_t>(n)),
        m_payload("a2sgd::compress::payload", static_cast<std::size_t>(m_codec.payload_words())),
        m_gathered("a2sgd::compress::gathered",
                   static_cast<std::size_t>(m_codec.payload_words()) * static_cast<std::size_t>(comm.size())) {}

  /// This rank's payload of the last step.
  const Words& payload() const noexcept { return m_payload; }

 private:
  static std::string signature_of(const std::string& name, const Options& options) {
    std::string s = name;
    for (const auto& [key, value] : options) s += ";" + key + "=" + value;
    return s;
  }

  std::string m_name;
  Options m_options;
  Codec m_codec;  // the kernels, shared with the PyTorch hooks
  std::uint64_t m_seed;
  FloatView m_residual;
  FloatView m_update;  // u; zero on entry to decode where the codec adds into it
  Words m_payload;     // this rank's payload
  Words m_gathered;    // every rank's, rank after rank
};

}  // namespace a2sgd
