#pragma once
// The two-means pass alone (A2SGD's compress phase) against the read ceilings of the same number
// of streams, interleaved with them on the same buffers, and the kernel in cache; with AVX-512,
// every software prefetch form forced next to the library's choice (docs/methods.md).

#include "BenchConfig.hpp"
#include "CsvRows.hpp"

namespace a2sgd::bench {

/// Measures and prints (rank 0) and writes its rows; g0 is the size's gradient of n values.
void two_means_study(const Communicator& comm, const BenchConfig& c, const FloatView& g0, Index n, CsvRows& rows);

}  // namespace a2sgd::bench
