#pragma once
/// @file KernelTraffic.hpp
/// The memory traffic of one exchange step's kernels, as passes with an access pattern, which
/// every method declares with its registration (ExchangeRegistry.hpp) and a2sgd-bench holds
/// against ceilings measured for each pattern in the same run (docs/methods.md, "Kernel memory
/// traffic"). Bytes are what the memory system moves: a store to a line the kernel has not read
/// first also reads it (write-allocate). Whole passes over float32 buffers of n values, SGD as the
/// optimizer; the MPI library's own copies are communication time.

#include <vector>

namespace a2sgd {

/// How a pass touches memory.
enum class Access {
  read,    ///< loads only (reductions)
  stream,  ///< loads of some buffers, stores to another not read first (copy, triad)
  axpy,    ///< x += s u: one buffer read, one read and written back (12 bytes per value)
  rmw,     ///< A2SGD's apply: one buffer read, two read and written back (20 bytes per value)
};

/// Arithmetic a pass does per value that can bound it rather than its memory traffic.
enum class Compute {
  none,
  field_packing,    ///< QSGD's pack of an entry: its stochastic rounding (a counter-based hash and the
                    ///< rounding rule) and the packing of its field into words
  field_unpacking,  ///< QSGD's decode of one rank's field: unpack, sign, level, multiply-add
};

/// One pass: its pattern and the bytes it moves (write-allocate included for Access::stream),
/// and, for a pass whose arithmetic can bound it, that arithmetic and how many times it is done
/// (values, or fields: a decode unpacks p n): a2sgd-bench then holds the pass against the larger of its memory time and
/// its compute time (that arithmetic alone, on data in cache, measured in the same run).
struct Pass {
  Access access;
  double bytes;
  Compute compute = Compute::none;
  double computed = 0.0;
};

struct PhaseTraffic {
  std::vector<Pass> passes;
  double bytes() const {
    double b = 0.0;
    for (const auto& p : passes) b += p.bytes;
    return b;
  }
};

/// A step's two phases around its collectives.
struct KernelTraffic {
  PhaseTraffic compress;  ///< before the (first) collective, plus between collectives
  PhaseTraffic apply;     ///< after the last collective: decode, residual, optimizer
};

/// Passes every method's description is made of, for n float32 values.
namespace traffic {
/// One pass over a float32 buffer of n values.
inline double buffer(double n) {
  return 4.0 * n;
}
/// SGD: read u, read and write x.
inline Pass sgd(double n) {
  return {Access::rmw, 3.0 * buffer(n)};
}
/// Error feedback e += g: read g, read and write e.
inline Pass fold(double n) {
  return {Access::rmw, 3.0 * buffer(n)};
}
/// A pass that only reads `bytes`.
inline Pass read(double bytes) {
  return {Access::read, bytes};
}
/// A pass reading `read` bytes and storing `write` bytes to a buffer it did not read.
inline Pass written(double read, double write) {
  return {Access::stream, read + 2.0 * write};
}
}  // namespace traffic

}  // namespace a2sgd
