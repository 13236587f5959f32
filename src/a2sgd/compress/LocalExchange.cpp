#include <a2sgd/compress/ExchangeRegistry.hpp>
#include <a2sgd/compress/LocalExchange.hpp>

namespace a2sgd {

LocalExchange::LocalExchange(const Communicator& comm, Index n, const LocalOptions& options,
                             const CommonExchangeOptions& common, const ExecutionSpace& exec)
    : Exchange(comm, n, exec, common, "local;warmup_steps=" + std::to_string(options.warmup_steps)),
      m_options(options) {}

std::vector<PlannedCollective> LocalExchange::own_traffic() const {
  if (averaging().every == 0) return {};
  PlannedCollective check{CollectiveKind::allreduce, 8u};
  check.every = averaging().every;
  return {check};
}

std::vector<std::pair<std::string, std::string>> LocalExchange::own_options() const {
  return {{"warmup_steps", std::to_string(m_options.warmup_steps)}};
}

void LocalExchange::do_step(StepKey, const FloatView& params, const FloatView& grad, Optimizer& opt, double lr,
                            StepStats& stats) {
  if (steps() < m_options.warmup_steps) {
    allreduce_sum(grad, stats);
    apply_dense(params, grad, opt, lr, 1.0f / static_cast<float>(comm().size()), stats);
    return;
  }
  Stopwatch clock;
  m_non_finite_pending += static_cast<double>(opt.apply(exec(), params, grad, lr, 1.0f));
  stats.optimizer_s += clock.seconds();
  const std::uint64_t every = averaging().every;
  if (every > 0 && (steps() + 1) % every == 0) {
    // Before the model's average (Exchange::step), so that a non-finite replica stops every rank.
    double count = m_non_finite_pending;
    comm().allreduce(&count, 1, MPI_SUM, &stats);
    m_non_finite_pending = 0.0;
    if (count > 0.0)
      throw NonFiniteError("local step " + std::to_string(steps()) + ": " +
                               std::to_string(static_cast<long long>(count)) +
                               " non-finite (NaN/Inf) gradient values on the ranks since the last average; the "
                               "replicas that took them are no longer finite",
                           -1);
  }
}

}  // namespace a2sgd

namespace {

a2sgd::LocalOptions parse_local_options(const a2sgd::OptionValues& o) {
  const std::int64_t warmup = o.integer("warmup-steps");
  o.require(warmup >= 0, "warmup-steps", "must not be negative");
  a2sgd::LocalOptions l;
  l.warmup_steps = static_cast<std::uint64_t>(warmup);
  return l;
}

}  // namespace

A2SGD_REGISTER_EXCHANGE(local) {
  using namespace a2sgd;
  ExchangeMethod m;
  m.summary =
      "local SGD: no exchange between the periodic averages (--average-every K: 4 n bytes per K steps); "
      "with --outer-optimizer nesterov, DiLoCo";
  m.options = {{"warmup-steps", "0", "first steps exchanged dense (post-local SGD)"}};
  m.check_options = [](const OptionValues& o) { parse_local_options(o); };
  m.make = [](const ExchangeContext& c, const OptionValues& o) -> std::unique_ptr<Exchange> {
    return std::make_unique<LocalExchange>(c.comm, c.n, parse_local_options(o), c.common, c.exec);
  };
  // The optimizer's pass over each rank's own gradient; no compression.
  m.kernel_traffic = [](double n, double, int) { return KernelTraffic{{}, {{traffic::sgd(n)}}}; };
  // Without a period the replicas never meet during training: an average every 100 steps (1% of
  // dense's bytes), as A2SGD's defaults with momentum and Adam, unless the model or user says.
  m.recommend = [](Recommendation& r) { r.averaging.suggest("average-every", "100"); };
  return m;
}
