#pragma once
// The ceilings a2sgd-bench measures for each access pattern of a step's kernels in the same run
// (docs/methods.md, "Kernel memory traffic"); every method declares its passes with its
// registration (a2sgd/compress/KernelTraffic.hpp). A phase's figure is the time its passes would
// take at their ceilings over the time it took: 100% means every pass ran at the rate of the
// simplest kernel with the same access pattern.

#include <a2sgd/comm/Communicator.hpp>
#include <a2sgd/compress/Exchange.hpp>
#include <a2sgd/compress/KernelTraffic.hpp>
#include <a2sgd/core/Accounting.hpp>
#include <a2sgd/core/impl/HostClones.hpp>

#include "common/Statistics.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace a2sgd::bench {

using apps::median;

/// The slowest rank's value: a step takes as long as its slowest rank.
inline double slowest(const Communicator& comm, double v) {
  comm.allreduce(&v, 1, MPI_MAX);
  return v;
}

/// Median seconds of `kernel` over `repeats` runs after `warmup`, the slowest rank's.
template <class Kernel>
double time_kernel(const Communicator& comm, int warmup, int repeats, Kernel&& kernel) {
  std::vector<double> t;
  comm.barrier();
  for (int r = 0; r < warmup + repeats; ++r) {
    Stopwatch clock;
    kernel();
    if (r >= warmup) t.push_back(clock.seconds());
  }
  return slowest(comm, median(t));
}

// The read-only ceiling: sum a[i] + b[i] over a block, with 32 independent float accumulators
// (two to eight vector registers, so no single add chain bounds the loop) in a function compiled
// per ISA like the library's kernels (impl/HostClones.hpp): bound by loads alone.
// Two is false for the one-stream variant (the plain two-means pass reads g alone). Prefetch adds
// software prefetches Distance bytes ahead in each stream, as the two-means kernels do (1: into
// all cache levels; 2: non-temporal).
template <bool Two, int Prefetch, int Distance>
A2SGD_HOST_CLONES float read_block(const float* a, const float* b, Index count) {
  constexpr int lanes = 32;
  constexpr int locality = Prefetch == 2 ? 0 : 3;
  float acc[lanes] = {};
  Index i = 0;
  for (; i + lanes <= count; i += lanes) {
    if constexpr (Prefetch > 0) {
      // Integer arithmetic: the address may lie past the end of the buffer (a prefetch never faults).
      const auto ahead = reinterpret_cast<std::uintptr_t>(a + i) + Distance;
      __builtin_prefetch(reinterpret_cast<const void*>(ahead), 0, locality);
      __builtin_prefetch(reinterpret_cast<const void*>(ahead + 64), 0, locality);
      if constexpr (Two) {
        const auto ahead_b = reinterpret_cast<std::uintptr_t>(b + i) + Distance;
        __builtin_prefetch(reinterpret_cast<const void*>(ahead_b), 0, locality);
        __builtin_prefetch(reinterpret_cast<const void*>(ahead_b + 64), 0, locality);
      }
    }
    for (int k = 0; k < lanes; ++k) acc[k] += Two ? a[i + k] + b[i + k] : a[i + k];
  }
  float s = 0.0f;
  for (; i < count; ++i) s += Two ? a[i] + b[i] : a[i];
  for (int k = 0; k < lanes; ++k) s += acc[k];
  return s;
}

/// Work item: a block on a host backend, an entry on a device.
template <bool Two, int Prefetch = 0, int Distance = 8192>
struct ReadStreams {
  static constexpr Index block = 4096;
  ConstFloatView a, b;
  Index n;
  KOKKOS_INLINE_FUNCTION void operator()(Index item, double& sum) const {
    if constexpr (host_backend) {
      const Index begin = item * block;
      sum += read_block<Two, Prefetch, Distance>(a.data() + begin, b.data() + begin,
                                                 begin + block < n ? block : n - begin);
    } else {
      sum += Two ? a(item) + b(item) : a(item);
    }
  }
};

/// The forms of a read ceiling over (a, b, n), each passed to f: no software prefetch; prefetch
/// into all cache levels and non-temporal, 8 KB ahead (the plain two-means kernel's distance) and,
/// with two streams, 4 KB ahead (the error-feedback kernel's). A ceiling is the fastest of its
/// forms, so that a kernel's prefetching cannot beat a ceiling that lacks it.
template <bool Two, class F>
void for_each_read_form(const ConstFloatView& a, const ConstFloatView& b, Index n, F&& f) {
  f(ReadStreams<Two, 0>{a, b, n});
  f(ReadStreams<Two, 1>{a, b, n});
  f(ReadStreams<Two, 2>{a, b, n});
  if constexpr (Two) {
    f(ReadStreams<Two, 1, 4096>{a, b, n});
    f(ReadStreams<Two, 2, 4096>{a, b, n});
  }
}

/// Bandwidths of the reference kernels, bytes counted as in Pass (GB/s, 1e9 bytes per second).
struct Ceilings {
  double read = 0.0;      ///< sum of a[i] + b[i]: 8 bytes per value
  double read_one = 0.0;  ///< sum of a[i]: 4 bytes per value (one stream; printed, not a pattern)
  double copy = 0.0;      ///< b[i] = a[i]: 12 bytes per value (4 read, 4 written, 4 write-allocate)
  double triad = 0.0;     ///< a[i] = b[i] + s c[i]: 16 bytes per value
  double axpy = 0.0;      ///< x[i] += s u[i]: 12 bytes per value
  double rmw = 0.0;       ///< A2SGD's apply pattern (read g, e, x; write e, x): 20 bytes per value
  /// QSGD's stochastic rounding alone (its hash and rounding rule at the default 256 levels, by
  /// the codec's own kernels, on 16 KB in L1, nothing stored): values per second. 0: not measured.
  double rounding = 0.0;
  /// QSGD's pack alone (the codec's pack kernel at 256 levels, the rounding and the packing, on a
  /// 4096-value block in L1): values per second. 0: not measured.
  double packing = 0.0;
  /// QSGD's decode unpacking alone (the codec's kernel at 256 levels over the p ranks' payloads
  /// of a 4096-value block, payloads and result in L1): fields per second. 0: not measured.
  double unpacking = 0.0;

  /// Seconds a pass takes at its ceilings: its memory time, or its arithmetic's time where that
  /// is longer (the roofline's bound).
  double pass_seconds(const Pass& p) const {
    double t = p.bytes / (for_access(p.access) * 1e9);
    if (p.compute == Compute::field_packing && packing > 0.0) t = std::max(t, p.computed / packing);
    if (p.compute == Compute::field_unpacking && unpacking > 0.0) t = std::max(t, p.computed / unpacking);
    return t;
  }

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
    for (const auto& p : phase.passes) ideal += pass_seconds(p);
    return ideal / seconds;
  }
};

/// Every ceiling at n values per buffer (medians of `repeats` after `warmup`, the slowest rank's).
Ceilings measure_ceilings(const Communicator& comm, Index n, int warmup, int repeats);

/// "GB/s (% of the matching ceilings)" of one phase.
std::string phase_figure(const PhaseTraffic& phase, double seconds, const Ceilings& ceil);

/// Whether the decode work grows with p (every rank's payload is decoded): the allgather methods.
inline bool decode_grows_with_p(const std::vector<PlannedCollective>& traffic) {
  for (const auto& c : traffic)
    if (c.kind == CollectiveKind::allgather) return true;
  return false;
}

}  // namespace a2sgd::bench
