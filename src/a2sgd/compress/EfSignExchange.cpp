#include <a2sgd/compress/EfSignExchange.hpp>
#include <a2sgd/compress/ExchangeRegistry.hpp>

namespace a2sgd {

EfSignExchange::EfSignExchange(const Communicator& comm, Index n, const CommonExchangeOptions& common,
                               const ExecutionSpace& exec)
    : GatherExchange(comm, n, exec, common, "efsign", EfSignCodec(n), 0, [](Index m) { return EfSignCodec(m); }) {}

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
