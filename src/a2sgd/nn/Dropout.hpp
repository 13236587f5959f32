#pragma once
/// @file Dropout.hpp
/// Inverted dropout with masks that are a pure function of (key, element): no random state, no
/// stored mask, the same mask in the forward and the backward pass, and the same masks after a
/// checkpoint restart (the key comes from the seed, the step, the rank and the site).

#include <a2sgd/core/Types.hpp>
#include <a2sgd/nn/Model.hpp>

#include <cstdint>

namespace a2sgd::nn {

/// Whether element `index` survives dropout with probability `p` under `key`: the top 24 bits of
/// a splitmix64 hash of (key, index) as a uniform u in [0, 1) on a 2^-24 grid; kept when u >= p.
KOKKOS_INLINE_FUNCTION bool dropout_keep(std::uint64_t key, std::uint64_t index, float p) {
  std::uint64_t z = key + 0x9E3779B97F4A7C15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * 0x1.0p-24f >= p;
}

/// The key of dropout site `site` (0: embedding output, l + 1: output of LSTM layer l) in the
/// training step `context` describes.
std::uint64_t dropout_key(const StepContext& context, unsigned site);

/// y = x * (keep ? 1 / (1 - p) : 0), element (r, c) of a [rows, cols] matrix having index
/// r * cols + c; y may be x (in place). p in [0, 1).
void dropout(const ExecutionSpace& exec, const ConstMatrix& x, const Matrix& y, float p, std::uint64_t key);

}  // namespace a2sgd::nn
