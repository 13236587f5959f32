#pragma once
/// @file GatherExchange.hpp
/// A gather codec (GatherCodec.hpp) around an MPI all-gather: the one step of Top-K, QSGD and
/// EF-sign. Per step: the codec's encode (compress_s), one allgather of payload_words() words per
/// rank (comm_s), the codec's decode of every rank's payload into u (optimizer_s), the optimizer on
/// u, and the codec's clear. Buffers of fixed size are allocated at construction: a step allocates
/// nothing.
///
/// Given a codec maker (a codec of the same kind and options for m values), the method exchanges
/// planned buckets (Exchange::plan_buckets()) as DDP's compression hooks do: each bucket is encoded
/// by a codec of its own size, with its own payload, as soon as the backward pass has finished it
/// (or in step() with overlap off), and all-gathered non-blocking; step() decodes every bucket into
/// its part of u. Per bucket, a rank's choices are the bucket's own (Top-K's k largest of the
/// bucket, QSGD's norm of the bucket), and a random codec's stream is keyed by the bucket too.

#include <a2sgd/compress/Exchange.hpp>
#include <a2sgd/compress/GatherCodec.hpp>

#include <cstdint>
#include <functional>
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
  /// Makes the codec of a bucket of m values (the method's codec for m values); none: the method
  /// exchanges the whole gradient as one payload.
  using BucketCodec = std::function<Codec(Index)>;

  /// The method `name` with its options as text (for logs and checkpoints; `options` also signs
  /// checkpoints, so a restart refuses other values); `seed`: the run's seed, for codecs with a
  /// random stream. Collective, as every exchange's construction.
  GatherExchange(const Communicator& comm, Index n, const ExecutionSpace& exec, const CommonExchangeOptions& common,
                 std::string name, Options options, Codec codec, std::uint64_t seed = 0,
                 BucketCodec bucket_codec = {})
      : GatherExchange(comm, n, exec, common, signature_of(name, options), std::move(codec), seed,
                       std::move(bucket_codec)) {
    m_name = std::move(name);
    m_options = std::move(options);
  }

  std::string name() const override { return m_name; }
  Options own_options() const override { return m_options; }

  std::vector<PlannedCollective> own_traffic() const override {
    if (m_parts.empty())
      return {{CollectiveKind::allgather,
               sizeof(typename Codec::Word) * static_cast<std::uint64_t>(m_codec.payload_words())}};
    std::vector<PlannedCollective> t;
    for (const Part& part : m_parts)
      t.push_back({CollectiveKind::allgather,
                   sizeof(typename Codec::Word) * static_cast<std::uint64_t>(part.codec.payload_words())});
    return t;
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
    if (!m_parts.empty()) {
      bucketed_step(params, grad, opt, lr, stats);
      return;
    }
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
                 const std::string& signature, Codec codec, std::uint64_t seed = 0, BucketCodec bucket_codec = {})
      : Exchange(comm, n, exec, common, signature),
        m_codec(std::move(codec)),
        m_bucket_codec(std::move(bucket_codec)),
        m_seed(seed),
        m_residual("a2sgd::compress::residual", Codec::has_residual ? static_cast<std::size_t>(n) : 0),
        m_update("a2sgd::compress::update", static_cast<std::size_t>(n)),
        m_payload("a2sgd::compress::payload", static_cast<std::size_t>(m_codec.payload_words())),
        m_gathered("a2sgd::compress::gathered",
                   static_cast<std::size_t>(m_codec.payload_words()) * static_cast<std::size_t>(comm.size())) {}

  /// This rank's payload of the last step (the whole gradient's: one bucket).
  const Words& payload() const noexcept { return m_payload; }

  bool bucketed() const override { return static_cast<bool>(m_bucket_codec); }

  void buckets_planned() override {
    m_parts.clear();
    if (buckets().size() < 2) return;
    const auto p = static_cast<std::size_t>(comm().size());
    for (const GradientRange& b : buckets()) {
      Codec codec = m_bucket_codec(b.size());
      const auto words = static_cast<std::size_t>(codec.payload_words());
      m_parts.push_back({std::move(codec), Words("a2sgd::compress::bucket_payload", words),
                         Words("a2sgd::compress::bucket_gathered", words * p)});
    }
  }

  Request start_bucket(const FloatView& grad, std::size_t index, GradientRange bucket, StepStats& stats) override {
    Part& part = m_parts[index];
    Stopwatch clock;
    // A random codec's stream keyed by the bucket as well: the buckets' entries i draw apart.
    const EncodeContext context{bucket_seed(index), steps(), comm().rank(), non_finite_count()};
    part.codec.encode(exec(), slice(grad, bucket), Codec::has_residual ? slice(m_residual, bucket) : FloatView(),
                      context, part.payload);
    exec().fence();
    stats.compress_s += clock.seconds();
    return comm().iallgather(part.payload.data(), static_cast<std::size_t>(part.payload.extent(0)),
                             part.gathered.data(), &stats);
  }

 private:
  struct Part {
    Codec codec;     // for the bucket's size
    Words payload;   // this rank's
    Words gathered;  // every rank's, rank after rank
  };

  static FloatView slice(const FloatView& v, GradientRange r) {
    return Kokkos::subview(v, std::make_pair(r.begin, r.end));
  }
  std::uint64_t bucket_seed(std::size_t index) const noexcept {
    return m_seed ^ (0x9e3779b97f4a7c15ull * (static_cast<std::uint64_t>(index) + 1));
  }

  // Every bucket's collective completed (finish_buckets), each decoded into its part of u, then
  // the optimizer on u and the codecs' clear: as the whole-gradient step, per bucket.
  void bucketed_step(const FloatView& params, const FloatView& grad, Optimizer& opt, double lr, StepStats& stats) {
    finish_buckets(grad, stats);
    Stopwatch clock;
    for (std::size_t b = 0; b < m_parts.size(); ++b)
      m_parts[b].codec.decode(exec(), m_parts[b].gathered, slice(m_update, buckets()[b]), comm().size());
    exec().fence();
    stats.optimizer_s += clock.seconds();
    apply_dense(params, m_update, opt, lr, 1.0f, stats);
    for (std::size_t b = 0; b < m_parts.size(); ++b)
      m_parts[b].codec.clear(exec(), m_parts[b].gathered, slice(m_update, buckets()[b]));
    exec().fence();
  }

  static std::string signature_of(const std::string& name, const Options& options) {
    std::string s = name;
    for (const auto& [key, value] : options) s += ";" + key + "=" + value;
    return s;
  }

  std::string m_name;
  Options m_options;
  Codec m_codec;  // the kernels, shared with the PyTorch hooks
  BucketCodec m_bucket_codec;
  std::vector<Part> m_parts;  // per planned bucket, when there are several
  std::uint64_t m_seed;
  FloatView m_residual;
  FloatView m_update;  // u; zero on entry to decode where the codec adds into it
  Words m_payload;     // this rank's payload
  Words m_gathered;    // every rank's, rank after rank
};

}  // namespace a2sgd
