#pragma once
// The memory traffic of one step's kernels, per method and phase, as passes with an access
// pattern, and the ceilings a2sgd-bench measures for each pattern in the same run
// (docs/methods.md, "Kernel memory traffic"). A phase's figure is the time its passes would take
// at their ceilings over the time it took: 100% means every pass ran at the rate of the simplest
// kernel with the same access pattern. Bytes are what the memory system moves: a store to a line
// the kernel has not read first also reads it (write-allocate). Whole passes over float32 buffers
// of n values, SGD as the optimizer; the MPI library's own copies are communication time.

#include <a2sgd/compress/Exchange.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace a2sgd::bench {

enum class Access {
  read,    ///< loads only (reductions): the two-stream read ceiling
  stream,  ///< loads of some buffers, stores to another not read first: the copy/triad ceiling
  axpy,    ///< x += s u: one buffer read, one read and written back (12 bytes per value)
  rmw,     ///< A2SGD's apply: one buffer read, two read and written back (20 bytes per value)
};

struct Pass {
  Access access;
  double bytes;  ///< write-allocate included for Access::stream
};

struct PhaseTraffic {
  std::vector<Pass> passes;
  double bytes() const {
    double b = 0.0;
    for (const auto& p : passes) b += p.bytes;
    return b;
  }
};

struct KernelTraffic {
  PhaseTraffic compress;  ///< before the (first) collective, plus between collectives
  PhaseTraffic apply;     ///< after the last collective: decode, residual, optimizer
};

/// Bandwidths of the reference kernels, bytes counted as in Pass (GB/s, 1e9 bytes per second).
struct Ceilings {
  double read = 0.0;      ///< sum of a[i] + b[i]: 8 bytes per value
  double read_one = 0.0;  ///< sum of a[i]: 4 bytes per value (one stream; printed, not a pattern)
  double copy = 0.0;      ///< b[i] = a[i]: 12 bytes per value (4 read, 4 written, 4 write-allocate)
  double triad = 0.0;     ///< a[i] = b[i] + s c[i]: 16 bytes per value
  double axpy = 0.0;      ///< x[i] += s u[i]: 12 bytes per value
  double rmw = 0.0;       ///< A2SGD's apply pattern (read g, e, x; write e, x): 20 bytes per value

  double for_access(Access a) const {
    switch (a) {
      case Access::read:
        return read;
      case Access::stream:
        return std::max(copy, triad);
      case Access::axpy:
        return axpy;
      case Access::rmw:
        return rmw;
    }
    return 0.0;
  }

  /// Time the phase's passes would take at their ceilings over `seconds`; 0 when there is none.
  double fraction(const PhaseTraffic& phase, double seconds) const {
    if (seconds <= 0.0 || phase.passes.empty()) return 0.0;
    double ideal = 0.0;
    for (const auto& p : phase.passes) ideal += p.bytes / (for_access(p.access) * 1e9);
    return ideal / seconds;
  }
};

/// `payload` is the bytes this rank sends per step; p the number of ranks.
inline KernelTraffic kernel_traffic(const std::string& method, double n, double payload, int p) {
  const double f = 4.0 * n;                       // one pass over a float32 buffer
  const Pass sgd{Access::rmw, 3.0 * f};           // optimizer: read u, read and write x
  const Pass fold{Access::rmw, 3.0 * f};          // error feedback: e += g (read g, read and write e)
  const Pass read_a{Access::read, f};             // a pass that only reads one buffer
  auto written = [](double read, double write) {  // a pass storing to a buffer it did not read
    return Pass{Access::stream, read + 2.0 * write};
  };
  if (method == "dense") return {{}, {{sgd}}};
  // Pass 1 reads g, e; pass 2 reads g, e, x and writes e, x.
  if (method == "a2sgd") return {{{{Access::read, 2.0 * f}}}, {{{Access::rmw, 5.0 * f}}}};
  // Fold, count and compact passes over a (two reads); decode scatters p payloads into u (the
  // touched entries: read and written), then the optimizer and the clearing of those entries.
  if (method == "topk") return {{{fold, read_a, read_a}}, {{sgd, {Access::axpy, 2.0 * p * payload}}}};
  // Fold, gather k values; scatter k values, optimizer.
  if (method == "randomk") return {{{fold, {Access::read, payload}}}, {{sgd, {Access::axpy, 2.0 * payload}}}};
  // Norm pass (read g), packing pass (read g, write the payload); decode reads p payloads and
  // writes u, then the optimizer.
  if (method == "qsgd") return {{{read_a, written(f, payload)}}, {{written(p * payload, f), sgd}}};
  // Fold, L1 norm, pack (reads and writes e, writes the bits); decode as QSGD.
  if (method == "efsign")
    return {{{fold, read_a, {Access::axpy, 2.0 * f}, written(0.0, payload)}}, {{written(p * payload, f), sgd}}};
  // Fold, M Q and M^T P read M; u = P Q^T written, e -= u (read e, u; write e), optimizer.
  if (method == "powersgd") return {{{fold, read_a, read_a}}, {{written(0.0, f), {Access::axpy, 3.0 * f}, sgd}}};
  // Encode reads g and writes n halves; decode reads them and writes u; optimizer.
  if (method == "fp16" || method == "bf16") return {{{written(f, f / 2.0)}}, {{written(f / 2.0, f), sgd}}};
  return {};
}

/// Whether the decode work grows with p (every rank's payload is decoded): the allgather methods.
inline bool decode_grows_with_p(const std::vector<PlannedCollective>& traffic) {
  for (const auto& c : traffic)
    if (c.kind == CollectiveKind::allgather) return true;
  return false;
}

}  // namespace a2sgd::bench
