#pragma once
/// @file EfSignCodec.hpp
/// EF-sign's compress and decompress passes without a communicator or an optimizer, for a caller
/// that all-gathers the payload with its own collective (the PyTorch hooks in python/), and for
/// EfSignExchange itself: one implementation of the method's kernels.

#include <a2sgd/compress/GatherCodec.hpp>
#include <a2sgd/core/Types.hpp>

#include <cstdint>

namespace a2sgd {

/// One rank's scaled sign of a buffer of n values with error feedback, a gather codec
/// (GatherCodec.hpp). A payload is
/// payload_words() 32-bit words: the scale s = ||a||_1 / n as float32 bits, then the signs of a,
/// 32 to a word (bit set: negative; 0 counts as positive).
class EfSignCodec {
 public:
  using Word = std::uint32_t;
  using Words = Kokkos::View<Word*, MemorySpace>;
  static constexpr bool has_residual = true;
  static constexpr bool decode_overwrites = true;

  EfSignCodec() = default;
  /// Throws InvalidArgument for n < 1.
  explicit EfSignCodec(Index n);

  Index size() const noexcept { return m_n; }
  Index payload_words() const noexcept { return 1 + (m_n + 31) / 32; }

  /// e <- a = g + e; payload <- (s, signs of a); e <- a - s sign(a). The non-finite entries of a
  /// are added to context.non_finite; if it is then positive, s is NaN, so that every rank sees it
  /// after the all-gather.
  void encode(const ExecutionSpace& exec, const ConstFloatView& g, const FloatView& e, const EncodeContext& context,
              const Words& payload) const;
  /// u <- (1/p) sum_r s_r sign_r over the p payloads of `gathered` (rank after rank).
  void decode(const ExecutionSpace& exec, const Words& gathered, const FloatView& u, int p) const;
  /// Nothing: decode writes every entry of u.
  void clear(const ExecutionSpace&, const Words&, const FloatView&) const noexcept {}

 private:
  Index m_n = 0;
  Kokkos::View<double, MemorySpace> m_l1;  // ||a||_1, on the device
};

}  // namespace a2sgd
