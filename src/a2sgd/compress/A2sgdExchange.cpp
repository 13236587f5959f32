#include <a2sgd/compress/A2sgdCodec.hpp>
#include <a2sgd/compress/A2sgdExchange.hpp>
#include <a2sgd/compress/ExchangeRegistry.hpp>
#include <a2sgd/compress/TwoMeans.hpp>
#include <a2sgd/compress/impl/A2sgdApply.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

namespace a2sgd {
namespace {

std::string signature(const A2sgdOptions& o) {
  std::string s = "a2sgd;averaging=" + to_string(o.averaging) + ";residual=" + to_string(o.residual) +
                  ";error_feedback=" + std::to_string(o.error_feedback) +
                  ";warmup_steps=" + std::to_string(o.warmup_steps) + ";granularity=" + to_string(o.granularity) +
                  ";moments=" + to_string(o.moments);
  // Stated only when not the default, so that checkpoints written before the option existed still
  // match (the same holds for options()).
  if (o.zero_gradient != ZeroGradient::move) s += ";zero_gradient=" + to_string(o.zero_gradient);
  if (o.granularity == Granularity::layer)
    for (Index size : o.segments) s += "," + std::to_string(size);
  return s;
}

A2sgdCodec codec_of(const A2sgdOptions& o, Index n) {
  if (o.granularity == Granularity::layer && o.segments.empty())
    throw InvalidArgument("a2sgd: layer granularity needs the model's tensor sizes");
  return A2sgdCodec(n, codec_options(o), o.granularity == Granularity::layer ? o.segments : std::vector<Index>{});
}

// The averaging policy: the common options', with A2sgdOptions' own two fields (kept for code
// written before averaging was every method's) merged in; averaging_conflict() says when the two
// disagree (the base constructor then fails on every rank).
CommonExchangeOptions with_averaging(const CommonExchangeOptions& common, const A2sgdOptions& o) {
  CommonExchangeOptions c = common;
  if (o.average_every != 0 && c.averaging.every == 0) c.averaging.every = o.average_every;
  if (o.state_at_average != StateAtAverage::keep && c.averaging.state_at_average == StateAtAverage::keep)
    c.averaging.state_at_average = o.state_at_average;
  return c;
}

std::string averaging_conflict(const CommonExchangeOptions& common, const A2sgdOptions& o) {
  const AveragingOptions& a = common.averaging;
  if (o.average_every != 0 && a.every != 0 && a.every != o.average_every)
    return "a2sgd: average_every " + std::to_string(o.average_every) + " differs from the averaging policy's every " +
           std::to_string(a.every) + " (set one of them)";
  if (o.state_at_average != StateAtAverage::keep && a.state_at_average != StateAtAverage::keep &&
      a.state_at_average != o.state_at_average)
    return "a2sgd: state_at_average " + to_string(o.state_at_average) + " differs from the averaging policy's " +
           to_string(a.state_at_average) + " (set one of them)";
  return {};
}

}  // namespace

A2sgdExchange::A2sgdExchange(const Communicator& comm, Index n, const A2sgdOptions& options,
                             const CommonExchangeOptions& common, const ExecutionSpace& exec)
    : Exchange(comm, n, exec, with_averaging(common, options), signature(options), averaging_conflict(common, options)),
      m_options(options),
      m_residual("a2sgd::compress::residual", static_cast<std::size_t>(n)),
      m_codec(codec_of(options, n)),
      m_payload(static_cast<std::size_t>(m_codec.payload_words()), 0.0),
      m_local(m_codec.segments()),
      m_global(m_codec.segments(), {0.0, 0.0}),
      m_last_global(m_codec.segments(), {0.0, 0.0}),
      m_last_local(m_codec.segments(), {0.0, 0.0}) {
  // The averaging policy lives in the base (averaging()); this copy keeps the two fields in step
  // with it for a caller that reads a2sgd_options().
  m_options.average_every = averaging().every;
  m_options.state_at_average = averaging().state_at_average;
}

std::vector<PlannedCollective> A2sgdExchange::own_traffic() const {
  if (m_parts.empty()) return {{CollectiveKind::allreduce, 8u * static_cast<std::uint64_t>(payload_scalars())}};
  std::vector<PlannedCollective> t;  // one all-reduce of its segments' scalars per bucket
  const auto width = static_cast<std::uint64_t>(A2sgdCodec::payload_width(m_options.averaging));
  for (const Part& part : m_parts)
    t.push_back({CollectiveKind::allreduce, 8u * width * static_cast<std::uint64_t>(part.last - part.first)});
  return t;
}

void A2sgdExchange::buckets_planned() {
  m_parts.clear();
  if (buckets().size() < 2) return;
  const std::vector<Index>& bounds = m_codec.bounds();
  for (const GradientRange& b : buckets()) {
    const auto first = std::find(bounds.begin(), bounds.end(), b.begin);
    const auto last = std::find(bounds.begin(), bounds.end(), b.end);
    if (first == bounds.end() || last == bounds.end() || first >= last)
      throw InvalidArgument("a2sgd: gradient bucket [" + std::to_string(b.begin) + ", " + std::to_string(b.end) +
                            ") does not begin and end where the layout's tensors do");
    m_parts.push_back(
        {static_cast<std::size_t>(first - bounds.begin()), static_cast<std::size_t>(last - bounds.begin()), 0});
  }
}

Request A2sgdExchange::start_bucket(const FloatView& grad, std::size_t index, GradientRange bucket, StepStats& stats) {
  if (steps() < m_options.warmup_steps)
    return comm().iallreduce(grad.data() + bucket.begin, static_cast<std::size_t>(bucket.size()), MPI_SUM, &stats);
  Part& part = m_parts[index];
  Stopwatch clock;
  // The step's first bucket advances the optimizer's step count (buckets start in order).
  if (m_options.moments != MomentScheme::decoded)
    step_optimizer().local_direction(exec(), grad, m_options.moments, m_options.warmup_steps, bucket.begin, bucket.end,
                                     index == 0);
  part.non_finite =
      m_codec.encode_segments(exec(), grad, m_residual, m_local.data(), m_payload.data(), part.first, part.last);
  stats.compress_s += clock.seconds();
  const auto width = static_cast<std::size_t>(A2sgdCodec::payload_width(m_options.averaging));
  return comm().iallreduce(m_payload.data() + width * part.first, width * (part.last - part.first), MPI_SUM, &stats);
}

std::vector<std::pair<std::string, std::string>> A2sgdExchange::own_options() const {
  std::vector<std::pair<std::string, std::string>> o = {{"averaging", to_string(m_options.averaging)},
                                                        {"residual", to_string(m_options.residual)},
                                                        {"error_feedback", m_options.error_feedback ? "on" : "off"},
                                                        {"warmup_steps", std::to_string(m_options.warmup_steps)},
                                                        {"granularity", to_string(m_options.granularity)},
                                                        {"moments", to_string(m_options.moments)}};
  if (m_options.zero_gradient != ZeroGradient::move)
    o.emplace_back("zero_gradient", to_string(m_options.zero_gradient));
  if (m_options.buckets) o.emplace_back("buckets", "on");
  return o;
}

void A2sgdExchange::do_step(StepKey, const FloatView& params, const FloatView& grad, Optimizer& opt, double lr,
                            StepStats& stats) {
  const double p = static_cast<double>(comm().size());
  if (!m_parts.empty()) {
    finish_buckets(grad, stats);
    if (steps() < m_options.warmup_steps) {
      apply_dense(params, grad, opt, lr, static_cast<float>(1.0 / p), stats);
    } else {
      std::int64_t non_finite = 0;
      for (const Part& part : m_parts) non_finite += part.non_finite;
      take_global_means(non_finite);
      apply(params, grad, opt, lr, stats);
    }
  } else if (steps() < m_options.warmup_steps) {
    allreduce_sum(grad, stats);
    apply_dense(params, grad, opt, lr, static_cast<float>(1.0 / p), stats);
  } else {
    const std::int64_t non_finite = compress(grad, opt, stats);
    communicate(non_finite, stats);
    apply(params, grad, opt, lr, stats);
  }
}

// Step 3: the two local averages of each segment, one fused reduction each. With a local moment
// scheme the optimizer first turns g into this rank's update direction, which is what gets
// compressed (and then applied with the learning rate alone). Returns the non-finite entries.
std::int64_t A2sgdExchange::compress(const FloatView& grad, Optimizer& opt, StepStats& stats) {
  Stopwatch clock;
  if (m_options.moments != MomentScheme::decoded)
    opt.local_direction(exec(), grad, m_options.moments, m_options.warmup_steps);
  const std::int64_t non_finite = m_codec.encode(exec(), grad, m_residual, m_local.data(), m_payload.data());
  stats.compress_s += clock.seconds();
  return non_finite;
}

// Step 4: exactly one all-reduce of 2 (or 4) scalars per segment, then the global averages.
void A2sgdExchange::communicate(std::int64_t non_finite, StepStats& stats) {
  comm().allreduce(m_payload.data(), m_payload.size(), MPI_SUM, &stats);
  take_global_means(non_finite);
}

// The global averages of every segment from the summed payload, checked before anything changes.
void A2sgdExchange::take_global_means(std::int64_t non_finite) {
  m_codec.global_means(m_payload.data(), comm().size(), m_global.data());
  for (std::size_t s = 0; s < m_codec.segments(); ++s) {
    const auto [m_pos, m_neg] = m_global[s];
    if (!std::isfinite(m_pos) || !std::isfinite(m_neg)) {
      const std::string where = "A2SGD step " + std::to_string(steps()) + ": ";
      throw NonFiniteError(
          non_finite > 0 ? where + "this rank's error-compensated gradient g + e has " + std::to_string(non_finite) +
                               " non-finite (NaN/Inf) entries of " + std::to_string(size()) + "; nothing was updated"
                         : where + "another rank's gradient has non-finite (NaN/Inf) entries; nothing was updated",
          -1);
    }
    m_last_local[s] = {m_local[s].mean_pos(), m_local[s].mean_neg()};
    m_last_global[s] = {m_pos, m_neg};
  }
}

// Steps 5 and 6: residual, update direction and optimizer in one pass per segment.
void A2sgdExchange::apply(const FloatView& params, const FloatView& grad, Optimizer& opt, double lr, StepStats& stats) {
  Stopwatch clock;
  auto pass = [&](const auto& rule) {
    impl::a2sgd_apply_segments(exec(), m_codec.options(), grad, m_residual, m_codec.bounds(), m_last_local.data(),
                               m_last_global.data(), rule);
  };
  if (m_options.moments != MomentScheme::decoded)
    opt.visit_direction_step(params, lr, pass);
  else
    opt.visit_step(params, lr, pass);
  exec().fence();
  stats.optimizer_s += clock.seconds();
}

}  // namespace a2sgd

namespace {

a2sgd::A2sgdOptions parse_a2sgd_options(const a2sgd::OptionValues& o, const std::vector<a2sgd::TensorInfo>& layout) {
  using namespace a2sgd;
  A2sgdOptions a;
  a.averaging = parse_global_averaging(o.text("averaging"));
  a.residual = parse_residual_reference(o.text("residual"));
  a.granularity = parse_granularity(o.text("granularity"));
  a.error_feedback = o.on("error-feedback");
  a.zero_gradient = parse_zero_gradient(o.text("zero-gradient"));
  const std::int64_t warmup = o.integer("warmup-steps"), every = o.integer("average-every");
  o.require(warmup >= 0, "warmup-steps", "must not be negative");
  o.require(every >= 0, "average-every", "must not be negative");
  a.warmup_steps = static_cast<std::uint64_t>(warmup);
  a.average_every = static_cast<std::uint64_t>(every);
  a.moments = parse_moment_scheme(o.text("moments"));
  a.state_at_average = parse_state_at_average(o.text("state-at-average"));
  a.buckets = o.on("buckets");
  o.require(!a.buckets || a.granularity == Granularity::layer, "buckets",
            "needs --a2sgd-granularity layer (one segment for the model needs the whole gradient)");
  if (a.granularity == Granularity::layer)
    for (const auto& t : layout) a.segments.push_back(t.size);
  return a;
}

}  // namespace

A2SGD_REGISTER_EXCHANGE(a2sgd) {
  using namespace a2sgd;
  ExchangeMethod m;
  m.summary = "two-level gradient averaging: error feedback, two local means all-reduced: 16 bytes";
  m.options = {
      {"averaging", "mean", "mean (2 scalars per step) | weighted (4 scalars)", {"mean", "weighted"}},
      {"residual", "local", "residual reference: local | global", {"local", "global"}},
      {"granularity",
       "model",
       "model (2 scalars per step) | layer (2 per tensor, one all-reduce; --a2sgd-buckets: one per gradient "
       "bucket)",
       {"model", "layer"}},
      {"error-feedback", "on", "on | off", {"on", "off"}},
      {"buckets",
       "off",
       "with layer granularity: on (one all-reduce per gradient bucket, each started during the backward pass; "
       "measured no faster over 2 emulated nodes) | off (one after it)",
       {"on", "off"}},
      {"zero-gradient",
       "move",
       "entries whose gradient (direction) is exactly 0: move (classed by the residual's sign) | hold (left out "
       "of the step: no move, residual kept)",
       {"move", "hold"}},
      {"warmup-steps", "0", "first steps exchanged dense"},
      {"moments",
       "local",
       "momentum/Adam with A2SGD: local (each rank's optimizer direction compressed) | decoded (moments of the "
       "decoded update) | frozen (Adam: variance frozen after the dense warm-up)",
       {"local", "decoded", "frozen"}},
      {"average-every", "0",
       "average the replicas every K steps (0: never); the older name of a2sgd-train's --average-every, the "
       "averaging policy of every method"},
      {"state-at-average",
       "keep",
       "the optimizer's first moment at each average: keep | average | reset; the older name of a2sgd-train's "
       "--state-at-average",
       {"keep", "average", "reset"}},
  };
  m.averaging_aliases = {{"average-every", "average-every"}, {"state-at-average", "state-at-average"}};
  m.check_options = [](const OptionValues& o) { parse_a2sgd_options(o, {}); };
  m.make = [](const ExchangeContext& c, const OptionValues& o) -> std::unique_ptr<Exchange> {
    return std::make_unique<A2sgdExchange>(c.comm, c.n, parse_a2sgd_options(o, c.layout), c.common, c.exec);
  };
  // Pass 1 reads g, e; pass 2 reads g, e, x and writes e, x.
  m.kernel_traffic = [](double n, double, int) {
    const double f = traffic::buffer(n);
    return KernelTraffic{{{traffic::read(2.0 * f)}}, {{{Access::rmw, 5.0 * f}}}};
  };
  // The moment scheme's requirements (Adam for frozen, a warm-up to freeze after, no Nesterov).
  m.check_optimizer = [](const OptionValues& o, const OptimizerConfig& opt, const AveragingOptions& a) {
    // Adam's step m / sqrt(v) stays below about 1 because each rank's m^2 is at most its own v;
    // the ranks' mean m against one rank's v is not, and where that rank saw small gradients the
    // step grows without bound. The frozen scheme's v is the same on every rank, which keeps it.
    if (opt.kind == OptimizerKind::adam && a.state_at_average == StateAtAverage::average &&
        o.text("moments") != "frozen")
      throw OptionError("averaging", "state-at-average", "average",
                        "with Adam the averaged m is not bounded by each rank's own v (m / sqrt(v) can grow "
                        "without bound); use keep or reset, or the frozen moment scheme (one v on every rank)");
    try {
      check_moment_scheme(opt, parse_moment_scheme(o.text("moments")),
                          static_cast<std::uint64_t>(std::max<std::int64_t>(0, o.integer("warmup-steps"))));
    } catch (const OptionError&) {
      throw;
    } catch (const InvalidArgument& e) {
      throw OptionError("a2sgd", "moments", o.text("moments"), e.what());
    }
  };
  // With momentum or Adam each replica follows its own optimizer direction: averaging the replicas
  // every 100 steps (1% of dense's traffic) keeps them together (docs/convergence.md). The frozen
  // variance bounds the direction only through epsilon where the warm-up saw almost no gradient:
  // 1e-8 let the MLP diverge, 1e-4 trained (docs/algorithm.md).
  m.recommend = [](Recommendation& r) {
    if (r.optimizer.kind != OptimizerKind::sgd) r.averaging.suggest("average-every", "100");
    const bool eps_given =
        std::find(r.optimizer_given.begin(), r.optimizer_given.end(), "epsilon") != r.optimizer_given.end();
    if (r.options.text("moments") == "frozen" && !eps_given) r.optimizer.epsilon = 1e-4;
  };
  return m;
}
