#include <a2sgd/comm/NetworkModel.hpp>
#include <a2sgd/core/Error.hpp>

#include <algorithm>
#include <cmath>

namespace a2sgd {

Link Link::parse(const std::string& text, double default_alpha_s) {
  Link link;
  link.alpha_s = default_alpha_s;
  std::string spec = text;
  const std::string half = ":half";
  if (spec.size() > half.size() && spec.compare(spec.size() - half.size(), half.size(), half) == 0) {
    link.full_duplex = false;
    spec.resize(spec.size() - half.size());
  }
  const auto colon = spec.find(':');
  try {
    std::size_t used = 0;
    const std::string rate = spec.substr(0, colon);
    const double gbps = std::stod(rate, &used);
    if (used != rate.size() || !(gbps > 0)) throw InvalidArgument("");
    link.bytes_per_s = gbps * 1e9 / 8;
    if (colon != std::string::npos) {
      const std::string alpha = spec.substr(colon + 1);
      const double us = std::stod(alpha, &used);
      if (used != alpha.size() || !(us >= 0)) throw InvalidArgument("");
      link.alpha_s = us * 1e-6;
    }
  } catch (const std::exception&) {
    throw InvalidArgument("link \"" + text +
                          "\": expected GBIT_PER_S or GBIT_PER_S:ALPHA_US with positive numbers, "
                          "optionally followed by :half");
  }
  return link;
}

double collective_seconds(CollectiveKind kind, std::uint64_t bytes, int p, const Link& link, AllreduceModel model) {
  if (p <= 1) return 0.0;
  const double m = static_cast<double>(bytes), a = link.alpha_s;
  const double beta = (link.full_duplex ? 1.0 : 2.0) / link.bytes_per_s;
  const double rounds = std::ceil(std::log2(static_cast<double>(p)));
  if (kind == CollectiveKind::allgather) return rounds * a + (p - 1) * m * beta;
  const double ring = 2.0 * (p - 1) * a + 2.0 * (p - 1) / p * m * beta;
  const double doubling = rounds * (a + m * beta);
  // Rabenseifner's algorithm on the largest power of two q <= p; the p - q others fold in and out.
  const double q_rounds = std::floor(std::log2(static_cast<double>(p)));
  const double q = std::exp2(q_rounds);
  const double halving = 2.0 * q_rounds * a + 2.0 * (q - 1.0) / q * m * beta + (q < p ? 2.0 * (a + m * beta) : 0.0);
  switch (model) {
    case AllreduceModel::ring:
      return ring;
    case AllreduceModel::doubling:
      return doubling;
    case AllreduceModel::halving:
      return halving;
    case AllreduceModel::best:
      break;
  }
  return std::min({ring, doubling, halving});
}

double step_comm_seconds(const std::vector<PlannedCollective>& step, int p, const Link& link, AllreduceModel model) {
  double t = 0.0;
  for (const auto& c : step)
    t += collective_seconds(c.kind, c.bytes, p, link, c.algorithm == AllreduceModel::best ? model : c.algorithm) /
         static_cast<double>(c.every > 0 ? c.every : 1);
  return t;
}

AllreduceModel parse_allreduce_model(const std::string& name) {
  if (name == "ring") return AllreduceModel::ring;
  if (name == "doubling") return AllreduceModel::doubling;
  if (name == "halving") return AllreduceModel::halving;
  if (name == "best") return AllreduceModel::best;
  throw InvalidArgument("unknown all-reduce model \"" + name + "\" (valid: ring, doubling, halving, best)");
}

}  // namespace a2sgd
