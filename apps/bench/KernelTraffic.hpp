#pragma once
// Bytes the kernels of one step read and write, per method: the numerator of the effective
// bandwidth a2sgd-bench reports (docs/methods.md, "Kernel memory traffic"). Counts whole passes
// over float32 buffers of n values with SGD as the optimizer; the MPI library's own copies and
// reductions are part of the communication time, not of these figures.

#include <a2sgd/compress/Exchange.hpp>

#include <cstdint>
#include <string>

namespace a2sgd::bench {

struct KernelTraffic {
  double compress = 0.0;  ///< bytes touched before the (first) collective, plus between collectives
  double apply = 0.0;     ///< bytes touched after the last collective: decode, residual, optimizer
};

/// `payload` is the bytes this rank sends per step; p the number of ranks.
inline KernelTraffic kernel_traffic(const std::string& method, double n, double payload, int p) {
  const double f = 4.0 * n;    // one pass over a float32 buffer
  const double sgd = 3.0 * f;  // optimizer: read u, read and write x
  if (method == "dense") return {0.0, sgd};
  // Pass 1 reads g, e; pass 2 reads g, e, x and writes e, x.
  if (method == "a2sgd") return {2.0 * f, 5.0 * f};
  // Fold e += g (3 passes), count and compact passes over a (2 reads); decode scatters p
  // payloads into u, then the optimizer and the clearing of u's touched entries.
  if (method == "topk") return {5.0 * f, sgd + 2.0 * p * payload};
  // Fold (3 passes), gather k values; scatter k values, optimizer.
  if (method == "randomk") return {3.0 * f + payload, sgd + 2.0 * payload};
  // Norm pass (read g), packing pass (read g, write the packed payload); decode reads p payloads
  // and writes u.
  if (method == "qsgd") return {2.0 * f + payload, p * payload + f + sgd};
  // Fold (3), L1 norm (1), pack reads and writes e (2) and writes the bits; decode as QSGD.
  if (method == "efsign") return {6.0 * f + payload, p * payload + f + sgd};
  // Fold (3), M Q reads M, M^T P reads M; u = P Q^T written, e -= u (3), optimizer.
  if (method == "powersgd") return {5.0 * f, f + 3.0 * f + sgd};
  // Encode reads g, writes n halves; decode reads them and writes u, optimizer.
  if (method == "fp16" || method == "bf16") return {f + f / 2.0, f / 2.0 + f + sgd};
  return {};
}

/// Whether the decode work grows with p (every rank's payload is decoded): the allgather methods.
inline bool decode_grows_with_p(const std::vector<PlannedCollective>& traffic) {
  for (const auto& c : traffic)
    if (c.kind == CollectiveKind::allgather) return true;
  return false;
}

}  // namespace a2sgd::bench
