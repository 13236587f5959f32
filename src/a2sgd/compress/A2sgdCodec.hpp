#pragma once
/// @file A2sgdCodec.hpp
/// A2SGD's two passes without a communicator or an optimizer (docs/algorithm.md steps 2-6), for a
/// caller that all-reduces the scalars with its own collective: a framework's communication hook
/// (the PyTorch DDP hook in python/), or A2sgdExchange itself over MPI. The payload a rank
/// contributes is summed over the ranks (SUM all-reduce) and handed back; the global averages
/// follow from the sums and the rank count. The codec interface the other methods share is in
/// GatherCodec.hpp; A2SGD's payload is all-reduced, not all-gathered, so its collective differs.

#include <a2sgd/compress/A2sgdOptions.hpp>
#include <a2sgd/compress/TwoMeans.hpp>

#include <cstdint>
#include <utility>
#include <vector>

namespace a2sgd {

/// One rank's A2SGD encode and decode of a buffer of n values split into segments (the whole
/// buffer, or one per tensor: layer granularity). The payload is payload_words() doubles: per
/// segment 2 (mean: mu_pos, mu_neg) or 4 (weighted: S_pos, S_neg, N_pos, N_neg), SUM-all-reduced.
class A2sgdCodec {
 public:
  A2sgdCodec() = default;
  /// Throws InvalidArgument as segment_bounds() does.
  A2sgdCodec(Index n, const A2sgdCodecOptions& options, const std::vector<Index>& sizes = {});

  /// Segment bounds of a buffer of n values: {0, n} for the whole buffer, or the running sums of
  /// `sizes` (which must be positive and add up to n). Throws InvalidArgument otherwise.
  static std::vector<Index> segment_bounds(Index n, const std::vector<Index>& sizes);
  /// Doubles per segment in the payload: 2 (mean) or 4 (weighted).
  static int payload_width(GlobalAveraging averaging) noexcept { return averaging == GlobalAveraging::mean ? 2 : 4; }

  Index size() const noexcept { return m_bounds.empty() ? 0 : m_bounds.back(); }
  std::size_t segments() const noexcept { return m_bounds.empty() ? 0 : m_bounds.size() - 1; }
  /// Segment s is [bounds()[s], bounds()[s + 1]).
  const std::vector<Index>& bounds() const noexcept { return m_bounds; }
  const A2sgdCodecOptions& options() const noexcept { return m_options; }
  /// Whether encode and decode read and write a residual (error feedback).
  bool has_residual() const noexcept { return m_options.error_feedback; }
  /// Doubles this rank contributes per step: width x segments.
  Index payload_words() const noexcept { return payload_width(m_options.averaging) * static_cast<Index>(segments()); }

  /// Steps 2-3: for every segment one fused pass over a = g + e (a = g without error feedback;
  /// with ZeroGradient::hold the entries with g == 0 join neither set), giving local[s] and the
  /// segment's payload. A non-finite entry makes payload[0] and payload[1] NaN, so that every rank
  /// sees it after the all-reduce. Returns the number of non-finite entries. g, e: n values (e
  /// unused without error feedback); local: segments() results; payload: payload_words() doubles.
  std::int64_t encode(const ExecutionSpace& exec, const ConstFloatView& g, const ConstFloatView& e,
                      TwoMeansResult* local, double* payload) const;
  /// The same for the segments [first, last) alone (a bucket of them, during the backward pass):
  /// local[s] and the payload's doubles of those segments; a non-finite entry poisons the first
  /// segment's first two doubles. Every segment encoded once per step by some call, the results
  /// and the poisoning rule's effect (an all-reduce that is NaN on every rank) are encode()'s.
  std::int64_t encode_segments(const ExecutionSpace& exec, const ConstFloatView& g, const ConstFloatView& e,
                               TwoMeansResult* local, double* payload, std::size_t first, std::size_t last) const;

  /// Step 4: every segment's global averages (M_pos, M_neg) from the payload summed over p ranks,
  /// into out (segments() pairs). Non-finite when any rank's payload was poisoned.
  void global_means(const double* reduced, int p, std::pair<double, double>* out) const noexcept;

  /// Steps 5-6 with the update written back, one pass per segment: u (M_pos where a > 0, M_neg
  /// where a < 0, else 0) replaces g, and e becomes a - c with c the local (or global) average of
  /// a's sign. local_means and global_means: one (pos, neg) pair per segment.
  void decode_in_place(const ExecutionSpace& exec, const FloatView& g, const FloatView& e,
                       const std::pair<double, double>* local_means,
                       const std::pair<double, double>* global_means) const;

 private:
  A2sgdCodecOptions m_options;
  std::vector<Index> m_bounds;
};

}  // namespace a2sgd
