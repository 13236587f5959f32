#pragma once
// Which host kernels QSGD's codec runs (internal; for tests and benchmarks).

#include <cstdint>

namespace a2sgd::compress::impl {

/// True when the codec packs and decodes fields of up to 16 bits with its AVX-512 kernels (an
/// x86-64 GCC/Clang build on a CPU with AVX-512F), unless the generic kernels are forced.
bool qsgd_avx512_kernels() noexcept;

/// Forces the generic (per-ISA, compiler-vectorised) kernels, or lifts that; the two produce the
/// same payload and update, which tests/test_quantization.cpp checks.
void force_qsgd_generic_kernels(bool force) noexcept;

/// The stochastic rounding of QSGD's encode alone: the fields of g[0 .. n) (entry indices from
/// `first`, the key, s levels, v the norm) computed by the kernels the codec runs, XOR-folded into
/// one word and nothing stored. a2sgd-bench times it on data in cache as the compute ceiling of
/// the pack pass. Host backends only.
std::uint32_t qsgd_round_only(const float* g, std::int64_t n, std::int64_t first, std::uint64_t key, float v,
                              std::int64_t levels);

}  // namespace a2sgd::compress::impl
