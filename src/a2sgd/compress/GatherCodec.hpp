#pragma once
/// @file GatherCodec.hpp
/// The interface every codec whose payloads are all-gathered implements (TopkCodec, QsgdCodec,
/// EfSignCodec): one rank's compress and decompress passes without a communicator or an optimizer.
/// GatherExchange<Codec> (GatherExchange.hpp) puts a codec around an MPI all-gather; the PyTorch
/// hooks (python/) put the same codec around torch.distributed.all_gather, through one binding.
///
/// A gather codec C has
///   - `using Word`: the payload's word type (std::uint32_t or std::uint64_t);
///   - `static constexpr bool has_residual`: whether encode folds a residual e (error feedback);
///   - `static constexpr bool decode_overwrites`: whether decode writes every entry of u (else it
///     adds into a u that is zero on entry, and clear() restores that);
///   - `Index size() const`: n, the values it encodes; `Index payload_words() const`: words per rank;
///   - `void encode(exec, const ConstFloatView& g, const FloatView& e, const EncodeContext&, payload)`;
///   - `void decode(exec, gathered, const FloatView& u, int p)`: u <- (1/p) sum over the p payloads
///     of `gathered` (rank after rank) of what each encodes;
///   - `void clear(exec, gathered, const FloatView& u)`: u back to what decode expects.
/// A non-finite entry of what a rank encodes poisons its payload (a NaN scale or value), so that
/// every rank sees it after the all-gather and the step stops on every rank together.

#include <a2sgd/core/Types.hpp>

#include <cstdint>
#include <type_traits>

namespace a2sgd {

/// What encode may need besides the data: the stream of a random rounding (seed, step, rank fix
/// every choice) and the device counter that the error-feedback fold adds its non-finite entries to.
struct EncodeContext {
  std::uint64_t seed = 0;
  std::uint64_t step = 0;
  int rank = 0;
  Kokkos::View<std::int64_t, MemorySpace> non_finite;
};

/// The payload view of a gather codec.
template <class Codec>
using PayloadView = Kokkos::View<typename Codec::Word*, MemorySpace>;

namespace impl {
template <class C, class = void>
struct IsGatherCodec : std::false_type {};
template <class C>
struct IsGatherCodec<
    C, std::void_t<typename C::Word, decltype(C::has_residual), decltype(C::decode_overwrites),
                   decltype(std::declval<const C&>().size()), decltype(std::declval<const C&>().payload_words()),
                   decltype(std::declval<C&>().encode(
                       std::declval<const ExecutionSpace&>(), std::declval<const ConstFloatView&>(),
                       std::declval<const FloatView&>(), std::declval<const EncodeContext&>(),
                       std::declval<const PayloadView<C>&>())),
                   decltype(std::declval<const C&>().decode(std::declval<const ExecutionSpace&>(),
                                                            std::declval<const PayloadView<C>&>(),
                                                            std::declval<const FloatView&>(), 1)),
                   decltype(std::declval<const C&>().clear(std::declval<const ExecutionSpace&>(),
                                                           std::declval<const PayloadView<C>&>(),
                                                           std::declval<const FloatView&>()))>>
    : std::bool_constant<(sizeof(typename C::Word) == 4 || sizeof(typename C::Word) == 8)> {};
}  // namespace impl

/// Whether C implements the gather codec interface above.
template <class C>
inline constexpr bool is_gather_codec_v = impl::IsGatherCodec<C>::value;

}  // namespace a2sgd
