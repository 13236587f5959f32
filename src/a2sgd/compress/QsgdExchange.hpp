#pragma once
/// @file QsgdExchange.hpp
/// QSGD: stochastic quantisation to s levels of the gradient's norm (docs/algorithm.md, "Baselines");
/// the kernels are QsgdCodec's.

#include <a2sgd/compress/GatherExchange.hpp>
#include <a2sgd/compress/QsgdCodec.hpp>

#include <cstdint>

namespace a2sgd {

struct QsgdOptions {
  /// Number of levels s (1 .. 2^24 - 1); each entry is sent as ceil(log2(s + 1)) + 1 bits.
  std::int64_t levels = 256;
  /// Seed of the rounding stream; with the step and the rank it fixes every random choice.
  std::uint64_t seed = 0;
};

/// Each rank sends v = ||g||_2 (float32) and, per entry, a sign bit and a level l_i in [0, s]
/// drawn by stochastic rounding of s |g_i| / v (so E[v l_i / s] = |g_i|), packed as
/// b = ceil(log2(s + 1)) + 1 bits per entry: one allgather of 4 + 4 ceil(n b / 32) bytes per
/// rank. u = (1/p) sum_r sign_r,i v_r l_r,i / s. No error feedback (as in the original).
class QsgdExchange final : public GatherExchange<QsgdCodec> {
 public:
  QsgdExchange(const Communicator& comm, Index n, const QsgdOptions& options = {},
               const CommonExchangeOptions& common = {}, const ExecutionSpace& exec = ExecutionSpace());

  std::string name() const override { return "qsgd"; }
  std::vector<std::pair<std::string, std::string>> own_options() const override;

  /// Bits per entry: ceil(log2(s + 1)) level bits plus the sign bit.
  int bits() const noexcept { return codec().bits(); }

  /// ceil(log2(s + 1)) + 1; throws InvalidArgument outside 1 <= s < 2^24.
  static int bits_for_levels(std::int64_t levels);


 private:
  QsgdOptions m_options;
};

}  // namespace a2sgd
