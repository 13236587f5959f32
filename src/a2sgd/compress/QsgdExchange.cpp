#include <a2sgd/compress/ExchangeRegistry.hpp>
#include <a2sgd/compress/QsgdExchange.hpp>

namespace a2sgd {

int QsgdExchange::bits_for_levels(std::int64_t levels) {
  return qsgd_bits(levels);
}

QsgdExchange::QsgdExchange(const Communicator& comm, Index n, const QsgdOptions& options,
                           const CommonExchangeOptions& common, const ExecutionSpace& exec)
    : GatherExchange(comm, n, exec, common,
                     "qsgd;levels=" + std::to_string(options.levels) + ";seed=" + std::to_string(options.seed),
                     QsgdCodec(n, options.levels), options.seed,
                     [levels = options.levels](Index m) { return QsgdCodec(m, levels); }),
      m_options(options) {}

std::vector<std::pair<std::string, std::string>> QsgdExchange::own_options() const {
  return {{"levels", std::to_string(m_options.levels)},
          {"bits", std::to_string(bits())},
          {"seed", std::to_string(m_options.seed)}};
}

}  // namespace a2sgd

namespace {
a2sgd::QsgdOptions qsgd_options(const a2sgd::OptionValues& o, std::uint64_t seed) {
  a2sgd::QsgdOptions q;
  q.levels = o.integer("levels");
  o.require(q.levels >= 1 && q.levels < (1 << 24), "levels", "must be in [1, 16777215]");
  q.seed = seed;
  return q;
}
}  // namespace

A2SGD_REGISTER_EXCHANGE(qsgd) {
  using namespace a2sgd;
  ExchangeMethod m;
  m.summary = "stochastic rounding to s levels of |g| / ||g||, packed, by allgather: 4 + 4 ceil(n b / 32) bytes";
  m.options = {{"levels", "256", "quantisation levels s, in [1, 16777215] (ceil(log2(s+1)) + 1 bits per entry)"}};
  m.check_options = [](const OptionValues& o) { qsgd_options(o, 0); };
  m.make = [](const ExchangeContext& c, const OptionValues& o) -> std::unique_ptr<Exchange> {
    return std::make_unique<QsgdExchange>(c.comm, c.n, qsgd_options(o, c.seed), c.common, c.exec);
  };
  // Norm pass (read g), packing pass (read g, write the payload); decode reads p payloads and
  // writes u, then the optimizer.
  m.kernel_traffic = [](double n, double payload, int p) {
    const double f = traffic::buffer(n);
    // The pack pass computes every entry's stochastic rounding: on CPUs its hash, not memory,
    // bounds it (docs/methods.md).
    Pass pack = traffic::written(f, payload);
    pack.compute = Compute::field_packing;
    pack.computed = n;
    // The decode unpacks every rank's field of every entry: at larger p its arithmetic, not the
    // memory it moves, bounds it.
    Pass decode = traffic::written(p * payload, f);
    decode.compute = Compute::field_unpacking;
    decode.computed = static_cast<double>(p) * n;
    return KernelTraffic{{{traffic::read(f), pack}}, {{decode, traffic::sgd(n)}}};
  };
  return m;
}
