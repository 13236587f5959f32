#pragma once
/// @file A2sgdCodec.hpp
/// A2SGD's two passes without a communicator or an optimizer (docs/algorithm.md steps 2-6), for a
/// caller that all-reduces the scalars with its own collective: a framework's communication hook
/// (the PyTorch DDP hook in python/), or A2sgdExchange itself over MPI. The payload a rank
/// contributes is summed over the ranks (SUM all-reduce) and handed back; the global averages
/// follow from the sums and the rank count.

#include <a2sgd/compress/A2sgdExchange.hpp>
#include <a2sgd/compress/TwoMeans.hpp>

#include <utility>
#include <vector>

namespace a2sgd {

/// The options of A2SGD's encode and decode (A2sgdOptions' per-step part).
struct A2sgdCodecOptions {
  GlobalAveraging averaging = GlobalAveraging::mean;
  ResidualReference residual = ResidualReference::local;
  bool error_feedback = true;
  ZeroGradient zero_gradient = ZeroGradient::move;
};

/// Doubles per segment in the payload: 2 (mean: mu_pos, mu_neg) or 4 (weighted: S_pos, S_neg,
/// N_pos, N_neg).
inline int a2sgd_payload_width(GlobalAveraging averaging) noexcept {
  return averaging == GlobalAveraging::mean ? 2 : 4;
}

/// Segment bounds of a buffer of n values: {0, n} for the whole buffer, or the running sums of
/// `sizes` (which must be positive and add up to n). Throws InvalidArgument otherwise.
std::vector<Index> a2sgd_segment_bounds(Index n, const std::vector<Index>& sizes);

/// Steps 2-3: for every segment s = [bounds[s], bounds[s + 1]) one fused pass over a = g + e (a = g
/// without error feedback; with ZeroGradient::hold the entries with g == 0 join neither set),
/// giving local[s] and the segment's payload[width s, width (s + 1)). A non-finite entry makes
/// payload[0] and payload[1] NaN, so that every rank sees it after the all-reduce. Returns the
/// number of non-finite entries. g, e: n values (e unused without error feedback); local: one per
/// segment; payload: width x segments doubles.
std::int64_t a2sgd_encode(const ExecutionSpace& exec, const A2sgdCodecOptions& options, const ConstFloatView& g,
                          const ConstFloatView& e, const std::vector<Index>& bounds, TwoMeansResult* local,
                          double* payload);

/// Step 4: a segment's global averages (M_pos, M_neg) from its payload summed over p ranks.
/// Non-finite when any rank's payload was poisoned.
std::pair<double, double> a2sgd_global_means(GlobalAveraging averaging, const double* reduced, int p) noexcept;

/// Steps 5-6 with the update written back, one pass per segment: u (M_pos where a > 0, M_neg where
/// a < 0, else 0) replaces g, and e becomes a - c with c the local (or global) average of a's sign.
/// local_means and global_means: one (pos, neg) pair per segment.
void a2sgd_decode_in_place(const ExecutionSpace& exec, const A2sgdCodecOptions& options, const FloatView& g,
                           const FloatView& e, const std::vector<Index>& bounds,
                           const std::pair<double, double>* local_means, const std::pair<double, double>* global_means);

}  // namespace a2sgd
