#include <a2sgd/compress/TopkCodec.hpp>
#include <a2sgd/core/Error.hpp>

#include <algorithm>
#include <cmath>
#include <string>

namespace a2sgd {

Index topk_k(double ratio, Index n) {
  if (!(ratio > 0.0 && ratio <= 1.0))
    throw InvalidArgument("topk: ratio " + std::to_string(ratio) + " is not in (0, 1]");
  if (n >= (Index(1) << 32)) throw InvalidArgument("topk: n = " + std::to_string(n) + " needs 64-bit indices");
  return std::max<Index>(1, std::min<Index>(n, static_cast<Index>(std::llround(ratio * static_cast<double>(n)))));
}

TopkCodec::TopkCodec(Index n, Index k) : m_n(n) {
  if (n < 1) throw InvalidArgument("topk: an empty buffer");
  if (n >= (Index(1) << 32)) throw InvalidArgument("topk: n = " + std::to_string(n) + " needs 64-bit indices");
  if (k < 1 || k > n)
    throw InvalidArgument("topk: k = " + std::to_string(k) + " is not in [1, " + std::to_string(n) + "]");
  m_selector = compress::impl::TopkSelector(k, n);
}

void TopkCodec::encode(const ExecutionSpace& exec, const ConstFloatView& g, const FloatView& e,
                       const EncodeContext& context, const Words& payload) {
  const auto& non_finite = context.non_finite;
  m_selector.fold_and_select(exec, g, e, non_finite, payload);
  // A non-finite entry anywhere: the first pair carries NaN to every rank, which then stops.
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::compress::topk_poison"), Policy(exec, 0, 1), KOKKOS_LAMBDA(Index) {
        if (non_finite() > 0) payload(0) = (payload(0) & ~std::uint64_t(0xffffffffu)) | 0x7fc00000u;
      });
}

void TopkCodec::decode(const ExecutionSpace& exec, const Words& gathered, const FloatView& u, int p) const {
  const float scale = 1.0f / static_cast<float>(p);
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::compress::topk_decode"), Policy(exec, 0, static_cast<Index>(gathered.extent(0))),
      KOKKOS_LAMBDA(Index j) {
        const std::uint64_t w = gathered(j);
        union {
          float f;
          std::uint32_t u;
        } v;
        v.u = static_cast<std::uint32_t>(w & 0xffffffffu);
        Kokkos::atomic_add(&u(w >> 32), v.f * scale);
      });
}

void TopkCodec::clear(const ExecutionSpace& exec, const Words& gathered, const FloatView& u) const {
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::compress::topk_clear"), Policy(exec, 0, static_cast<Index>(gathered.extent(0))),
      KOKKOS_LAMBDA(Index j) { u(gathered(j) >> 32) = 0.0f; });
}

}  // namespace a2sgd
