#include <a2sgd/compress/EfSignExchange.hpp>
#include <a2sgd/compress/ExchangeRegistry.hpp>

namespace a2sgd {

EfSignExchange::EfSignExchange(const Communicator& comm, Index n, const CommonExchangeOptions& common,
                               const ExecutionSpace& exec)
    : Exchange(comm, n, exec, common, "efsign"),
      m_codec(n),
      m_residual("a2sgd::compress::residual", static_cast<std::size_t>(n)),
      m_update("a2sgd::compress::efsign_update", static_cast<std::size_t>(n)),
      m_words("a2sgd::compress::efsign_words", static_cast<std::size_t>(payload_words())),
      m_all("a2sgd::compress::efsign_all", static_cast<std::size_t>(payload_words() * comm.size())) {}

void EfSignExchange::do_step(StepKey, const FloatView& params, const FloatView& grad, Optimizer& opt, double lr,
                             StepStats& stats) {
  Stopwatch clock;
  m_codec.encode(exec(), grad, m_residual, non_finite_count(), m_words);
  exec().fence();
  stats.compress_s += clock.seconds();

  allgather(m_words, m_all, stats);

  clock.restart();
  m_codec.decode(exec(), m_all, m_update, comm().size());
  exec().fence();
  stats.optimizer_s += clock.seconds();
  apply_dense(params, m_update, opt, lr, 1.0f, stats);
}

}  // namespace a2sgd

A2SGD_REGISTER_EXCHANGE(efsign) {
  using namespace a2sgd;
  ExchangeMethod m;
  m.summary = "error feedback, the signs scaled by ||g + e||_1 / n, by allgather: 4 + 4 ceil(n / 32) bytes";
  m.make = [](const ExchangeContext& c, const OptionValues&) -> std::unique_ptr<Exchange> {
    return std::make_unique<EfSignExchange>(c.comm, c.n, c.common, c.exec);
  };
  // Fold, L1 norm, pack (reads and writes e, writes the bits); decode as QSGD.
  m.kernel_traffic = [](double n, double payload, int p) {
    const double f = traffic::buffer(n);
    return KernelTraffic{
        {{traffic::fold(n), traffic::read(f), {Access::axpy, 2.0 * f}, traffic::written(0.0, payload)}},
        {{traffic::written(p * payload, f), traffic::sgd(n)}}};
  };
  return m;
}
