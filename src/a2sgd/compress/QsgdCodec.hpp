#pragma once
/// @file QsgdCodec.hpp
/// QSGD's compress and decompress passes without a communicator or an optimizer, for a caller
/// that all-gathers the payload with its own collective (the PyTorch hooks in python/), and for
/// QsgdExchange itself: one implementation of the method's kernels.

#include <a2sgd/compress/GatherCodec.hpp>
#include <a2sgd/core/Types.hpp>

#include <cstdint>

namespace a2sgd {

/// ceil(log2(s + 1)) + 1 bits per entry for s levels; throws InvalidArgument outside 1 <= s < 2^24.
int qsgd_bits(std::int64_t levels);

/// One rank's QSGD of a buffer of n values, a gather codec (GatherCodec.hpp). A payload is
/// payload_words() 32-bit words: v = ||g||_2
/// as float32 bits, then per entry a sign bit and a level l in [0, s] drawn by stochastic rounding
/// of s |g_i| / v (E[v l / s] = |g_i|), packed bits() to an entry. No error feedback (as in the
/// original method).
class QsgdCodec {
 public:
  using Word = std::uint32_t;
  using Words = Kokkos::View<Word*, MemorySpace>;
  static constexpr bool has_residual = false;
  static constexpr bool decode_overwrites = true;

  QsgdCodec() = default;
  /// Throws InvalidArgument for n < 1 or levels outside [1, 2^24).
  QsgdCodec(Index n, std::int64_t levels);

  Index size() const noexcept { return m_n; }
  std::int64_t levels() const noexcept { return m_levels; }
  int bits() const noexcept { return m_bits; }
  Index payload_words() const noexcept;

  /// The key of a step's random rounding: with (seed, step, rank) every choice is fixed, and no
  /// two ranks or steps share a stream.
  static std::uint64_t rounding_key(std::uint64_t seed, std::uint64_t step, int rank) noexcept;

  /// payload <- QSGD(g) with the rounding stream `key`. A non-finite g makes v NaN (and every
  /// level 0), so that every rank sees it after the all-gather.
  void encode(const ExecutionSpace& exec, const ConstFloatView& g, std::uint64_t key, const Words& payload) const;
  /// The interface's encode: the stream rounding_key(context.seed, context.step, context.rank);
  /// no residual (e is not read).
  void encode(const ExecutionSpace& exec, const ConstFloatView& g, const FloatView&, const EncodeContext& context,
              const Words& payload) const {
    encode(exec, g, rounding_key(context.seed, context.step, context.rank), payload);
  }
  /// u <- (1/p) sum_r sign v_r l_r / s over the p payloads of `gathered` (rank after rank).
  void decode(const ExecutionSpace& exec, const Words& gathered, const FloatView& u, int p) const;
  /// Nothing: decode writes every entry of u.
  void clear(const ExecutionSpace&, const Words&, const FloatView&) const noexcept {}

 private:
  Index m_n = 0;
  std::int64_t m_levels = 0;
  int m_bits = 0;
  Kokkos::View<double, MemorySpace> m_sum_sq;  // ||g||^2, on the device
};

}  // namespace a2sgd
