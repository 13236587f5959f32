#pragma once
/// @file TopkExchange.hpp
/// Top-K sparsification with error feedback (docs/algorithm.md, "Baselines"); the kernels are
/// TopkCodec's.

#include <a2sgd/compress/GatherExchange.hpp>
#include <a2sgd/compress/TopkCodec.hpp>

namespace a2sgd {

struct TopkOptions {
  /// k = max(1, round(ratio * n)) entries per rank and step.
  double ratio = 0.001;
};

/// a = g + e; each rank keeps the k entries of largest |a| (ties: lower index first), sends k
/// (index, value) pairs by one allgather (8 bytes per pair: uint32 index, float32 value), and
/// applies u = (sum of all ranks' sparse vectors) / p; e = a minus what was sent.
///
/// Selection never sorts the gradient (impl/TopkSelect.hpp): on device backends a radix select on
/// the magnitudes' bit patterns finds the exact k-th largest magnitude in three histogram passes,
/// the first fused with the error-feedback fold, and one scan writes the k (index, value) pairs in
/// ascending index order, all on the device; on host backends a sampled threshold, a counting pass
/// and a compaction scan leave about 2k candidates, among which the host selects the exact k. No
/// allocation in steady state. n must be below 2^32.
class TopkExchange final : public GatherExchange<TopkCodec> {
 public:
  TopkExchange(const Communicator& comm, Index n, const TopkOptions& options = {},
               const CommonExchangeOptions& common = {}, const ExecutionSpace& exec = ExecutionSpace());

  std::string name() const override { return "topk"; }
  std::vector<std::pair<std::string, std::string>> own_options() const override;

  Index k() const noexcept { return codec().k(); }
  /// This rank's indices selected in the last step (ascending), copied to the host.
  std::vector<std::uint32_t> last_selection() const;

  /// The selection on its own: indices of the k largest |a| (ties: lower index first), ascending,
  /// by the given algorithm (the backend's default, or either for tests and benchmarks).
  static std::vector<std::uint32_t> select(
      const ExecutionSpace& exec, const ConstFloatView& a, Index k,
      compress::impl::TopkSelector::Algorithm algorithm = compress::impl::TopkSelector::Algorithm::automatic);


 private:
  TopkOptions m_options;
};

}  // namespace a2sgd
