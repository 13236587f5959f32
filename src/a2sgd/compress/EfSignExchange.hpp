#pragma once
/// @file EfSignExchange.hpp
/// Scaled sign compression with error feedback (EF-signSGD); the kernels are EfSignCodec's.

#include <a2sgd/compress/EfSignCodec.hpp>
#include <a2sgd/compress/GatherExchange.hpp>

namespace a2sgd {

/// a = g + e; each rank sends one bit per entry (the sign; 0 counts as positive), packed in
/// 32-bit words, plus its scale s = ||a||_1 / n, in one allgather (4 + 4 ceil(n/32) bytes);
/// u = (1/p) sum_r s_r sign_r; e = a - s sign(a).
class EfSignExchange final : public GatherExchange<EfSignCodec> {
 public:
  EfSignExchange(const Communicator& comm, Index n, const CommonExchangeOptions& common = {},
                 const ExecutionSpace& exec = ExecutionSpace());

  std::string name() const override { return "efsign"; }
  std::vector<std::pair<std::string, std::string>> own_options() const override { return {}; }
};

}  // namespace a2sgd
