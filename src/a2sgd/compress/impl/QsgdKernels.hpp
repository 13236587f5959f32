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

/// QSGD's pack alone: the kernel the codec runs for `levels` (the stochastic rounding and the
/// packing of the fields into words) over `groups` whole 32-entry groups of g (entry indices from
/// `first`, a multiple of 32), into out[0 .. bits x groups). a2sgd-bench times it on a block in L1
/// as the arithmetic ceiling of the pack pass. Host backends only.
void qsgd_pack_only(const float* g, std::int64_t groups, std::int64_t first, std::uint64_t key, float v,
                    std::int64_t levels, std::uint32_t* out);

/// The unpacking of QSGD's decode alone: the kernel the codec runs for `levels`, over `groups`
/// 32-entry groups of p payloads, into u[0 .. 32 groups). `all` holds the p payloads `stride`
/// words apart, each its norm word, then (bits) x groups words of fields and at least two words
/// more (the kernels read a field as 8 bytes). a2sgd-bench times it on payloads and u in L1 as
/// the arithmetic ceiling of the decode pass, whose unpacking grows with p. Host backends only.
void qsgd_decode_only(const std::uint32_t* all, std::int64_t stride, int p, std::int64_t groups, std::int64_t levels,
                      float* u);

}  // namespace a2sgd::compress::impl
