#include <a2sgd/compress/A2sgdCodec.hpp>
#include <a2sgd/compress/impl/A2sgdApply.hpp>
#include <a2sgd/core/Error.hpp>

#include <limits>
#include <string>

namespace a2sgd {

namespace {

// The decode's rule: the update replaces the gradient entry it was decoded from.
struct WriteUpdate {
  FloatView g;
  KOKKOS_INLINE_FUNCTION void operator()(Index i, float u) const { g(i) = u; }
};

}  // namespace

A2sgdCodec::A2sgdCodec(Index n, const A2sgdCodecOptions& options, const std::vector<Index>& sizes)
    : m_options(options), m_bounds(segment_bounds(n, sizes)) {}

std::vector<Index> A2sgdCodec::segment_bounds(Index n, const std::vector<Index>& sizes) {
  if (n < 0) throw InvalidArgument("a2sgd: a buffer of " + std::to_string(n) + " values");
  if (sizes.empty()) return {0, n};
  std::vector<Index> bounds{0};
  for (Index size : sizes) {
    if (size < 1) throw InvalidArgument("a2sgd: a tensor of " + std::to_string(size) + " values");
    bounds.push_back(bounds.back() + size);
  }
  if (bounds.back() != n)
    throw InvalidArgument("a2sgd: the tensors cover " + std::to_string(bounds.back()) +
                          " values, not n = " + std::to_string(n));
  return bounds;
}

std::int64_t A2sgdCodec::encode(const ExecutionSpace& exec, const ConstFloatView& g, const ConstFloatView& e,
                                TwoMeansResult* local, double* payload) const {
  return encode_segments(exec, g, e, local, payload, 0, segments());
}

std::int64_t A2sgdCodec::encode_segments(const ExecutionSpace& exec, const ConstFloatView& g, const ConstFloatView& e,
                                         TwoMeansResult* local, double* payload, std::size_t first,
                                         std::size_t last) const {
  if (first > last || last > segments())
    throw InvalidArgument("a2sgd: segments [" + std::to_string(first) + ", " + std::to_string(last) + ") of " +
                          std::to_string(segments()));
  const A2sgdCodecOptions& o = m_options;
  const std::vector<Index>& bounds = m_bounds;
  const bool ef = o.error_feedback;
  // Without error feedback a = g, whose zeros join no class anyway: hold changes nothing there.
  const bool hold = ef && o.zero_gradient == ZeroGradient::hold;
  const bool weighted = o.averaging == GlobalAveraging::weighted;
  const std::size_t width = static_cast<std::size_t>(payload_width(o.averaging));
  std::int64_t non_finite = 0;
  for (std::size_t s = first; s < last; ++s) {
    const auto range = std::make_pair(bounds[s], bounds[s + 1]);
    const ConstFloatView g_s = Kokkos::subview(g, range);
    TwoMeansResult& l = local[s];
    l = hold ? two_means_held(exec, g_s, Kokkos::subview(e, range))
             : two_means(exec, g_s, ef ? ConstFloatView(Kokkos::subview(e, range)) : ConstFloatView());
    non_finite += l.non_finite;
    double* out = payload + width * s;
    if (weighted) {
      out[0] = l.sum_pos, out[1] = l.sum_neg;
      out[2] = static_cast<double>(l.count_pos), out[3] = static_cast<double>(l.count_neg);
    } else {
      out[0] = l.mean_pos(), out[1] = l.mean_neg();
    }
  }
  // A non-finite entry already makes this rank's sums non-finite; poisoning the values states the
  // contract explicitly: every rank sees NaN from the same all-reduce and stops together.
  if (non_finite > 0 && first < last)
    payload[width * first] = payload[width * first + 1] = std::numeric_limits<double>::quiet_NaN();
  return non_finite;
}

void A2sgdCodec::global_means(const double* reduced, int p, std::pair<double, double>* out) const noexcept {
  const std::size_t width = static_cast<std::size_t>(payload_width(m_options.averaging));
  const double ranks = static_cast<double>(p);
  for (std::size_t s = 0; s < segments(); ++s) {
    const double* q = reduced + width * s;
    out[s] = m_options.averaging == GlobalAveraging::weighted
                 ? std::pair<double, double>{q[2] > 0 ? q[0] / q[2] : 0.0, q[3] > 0 ? q[1] / q[3] : 0.0}
                 : std::pair<double, double>{q[0] / ranks, q[1] / ranks};
  }
}

void A2sgdCodec::decode_in_place(const ExecutionSpace& exec, const FloatView& g, const FloatView& e,
                                 const std::pair<double, double>* local_means,
                                 const std::pair<double, double>* global_means) const {
  impl::a2sgd_apply_segments(exec, m_options, g, e, m_bounds, local_means, global_means, WriteUpdate{g});
}

}  // namespace a2sgd
