#pragma once
// Running rounding-error bounds for references of element-wise float32 computations
// (docs/testing.md).
//
// A Rounded is a value computed in exact arithmetic (double) together with a bound on how far the
// library's float32 computation of the same expression can be from it. Every operation adds what
// one float rounding of its result can cost (u32 |result|) to what the operands' bounds propagate
// into it, so a reference written with Rounded values that performs the library's float operations
// in the library's order carries its own tolerance. A compiler or GPU that fuses a multiply and an
// add (FMA) rounds once instead of twice, which the bound already covers. Double's own rounding is
// folded into every step (4 u64), so the exact-arithmetic value needs no tolerance of its own.

#include "TestingCatch.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace a2sgd::testing {

struct Rounded {
  double v = 0.0;  ///< the expression in exact arithmetic (to double precision)
  double e = 0.0;  ///< bound on |float32 result - v|
};

/// A value the library holds exactly (a float input, an integer, a power of two).
inline Rounded exact(double v) {
  return {v, 0.0};
}
/// A double constant the library converts to float (learning rate, beta, bias correction): its
/// conversion error, measured.
inline Rounded to_float(double v) {
  return {v, std::abs(double(static_cast<float>(v)) - v)};
}
/// The float rounding of a result whose operands' errors sum to `propagated`.
inline Rounded rounded(double v, double propagated) {
  return {v, propagated + (u32 + 4 * u64) * (std::abs(v) + propagated)};
}

inline Rounded operator+(Rounded a, Rounded b) {
  return rounded(a.v + b.v, a.e + b.e);
}
inline Rounded operator-(Rounded a, Rounded b) {
  return rounded(a.v - b.v, a.e + b.e);
}
inline Rounded operator*(Rounded a, Rounded b) {
  return rounded(a.v * b.v, std::abs(a.v) * b.e + std::abs(b.v) * a.e + a.e * b.e);
}
/// Requires |b.v| > b.e (the denominator's sign is known).
inline Rounded operator/(Rounded a, Rounded b) {
  const double q = a.v / b.v;
  return rounded(q, (a.e + std::abs(q) * b.e) / (std::abs(b.v) - b.e));
}
/// |sqrt(x) - sqrt(y)| <= min(sqrt|x - y|, |x - y| / sqrt(y)).
inline Rounded sqrt(Rounded a) {
  const double s = std::sqrt(std::max(0.0, a.v));
  return rounded(s, s > 0.0 ? std::min(std::sqrt(a.e), a.e / s) : std::sqrt(a.e));
}

/// fl(exp(a)) in float32: the propagated error plus the implementation's, at most 2 ulps (4 u32
/// relative; CUDA's documented bound for expf, glibc's expf is within 1 ulp).
inline Rounded exp32(Rounded a) {
  const double y = std::exp(a.v);
  return {y, y * std::expm1(a.e) + 4 * u32 * y * std::exp(a.e) + 4 * u64 * y};
}

/// A float32 dot product sum_k a_k b_k as BLAS computes a GEMM entry, in any order and blocking,
/// with or without FMA: the propagated errors plus gamma32(k) sum |a_k| |b_k| (Higham 3.1).
template <class A, class B>
Rounded dot(const A& a, const B& b, std::size_t k) {
  double v = 0.0, propagated = 0.0, magnitude = 0.0;
  for (std::size_t i = 0; i < k; ++i) {
    v += a(i).v * b(i).v;
    propagated += std::abs(a(i).v) * b(i).e + std::abs(b(i).v) * a(i).e + a(i).e * b(i).e;
    magnitude += (std::abs(a(i).v) + a(i).e) * (std::abs(b(i).v) + b(i).e);
  }
  return {v, propagated + (gamma32(double(k)) + gamma64(double(k))) * magnitude};
}

/// A sum of float32 values accumulated in double and rounded to float once (the library's bias
/// gradients, softmax denominators): gamma64(k) of the magnitudes, then one float rounding.
template <class A>
Rounded double_sum_to_float(const A& a, std::size_t k) {
  double v = 0.0, propagated = 0.0, magnitude = 0.0;
  for (std::size_t i = 0; i < k; ++i) v += a(i).v, propagated += a(i).e, magnitude += std::abs(a(i).v) + a(i).e;
  return rounded(v, propagated + gamma64(double(k)) * magnitude);
}

/// Whether a float result lies within the bound of its reference.
inline bool within(float got, const Rounded& want) {
  return std::abs(double(got) - want.v) <= want.e;
}

/// Checks a reference's analytic gradient against central differences of its own double loss.
/// `loss_at(i, delta)` is the loss with parameter i moved by delta. Two steps, h and h/2: their
/// difference bounds the truncation error of the finer one (Richardson: error(h/2) ~ |D(h) -
/// D(h/2)| / 3 once h is in the asymptotic range), and each quotient adds the loss's double
/// rounding, gamma64(64) (|loss| + 1) / (h/2). Returns the number of parameters outside.
template <class Loss>
int finite_difference_mismatches(const std::vector<Rounded>& grads, double loss, double h, const Loss& loss_at) {
  int bad = 0;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    const double coarse = (loss_at(i, h) - loss_at(i, -h)) / (2 * h);
    const double fine = (loss_at(i, h / 2) - loss_at(i, -h / 2)) / h;
    const double tol = std::abs(coarse - fine) + gamma64(64) * (std::abs(loss) + 1) / (h / 2);
    if (std::abs(fine - grads[i].v) > tol) {
      ++bad;
      UNSCOPED_INFO("parameter " << i << ": reference " << grads[i].v << ", finite differences " << fine);
    }
  }
  return bad;
}

// Mirrors of src/a2sgd/optim/impl/UpdateRules.hpp (same operations, same order) and of the
// constants Optimizer::visit_step converts to float.

/// x <- x decay - lr u
inline void sgd_step(Rounded& x, Rounded u, double lr, double weight_decay = 0.0) {
  x = x * to_float(1.0 - lr * weight_decay) - to_float(lr) * u;
}

/// v <- mu v + u; x <- x decay - lr (nesterov ? u + mu v : v)
inline void momentum_step(Rounded& x, Rounded& v, Rounded u, double lr, double mu, bool nesterov = false,
                          double weight_decay = 0.0) {
  v = to_float(mu) * v + u;
  const Rounded d = nesterov ? u + to_float(mu) * v : v;
  x = x * to_float(1.0 - lr * weight_decay) - to_float(lr) * d;
}

/// Adam step t (1-based) with the library's bias corrections c1 = 1 / (1 - b1^t),
/// c2 = 1 / sqrt(1 - b2^t).
inline void adam_step(Rounded& x, Rounded& m, Rounded& s, Rounded u, double lr, int t, double beta1 = 0.9,
                      double beta2 = 0.999, double eps = 1e-8, double weight_decay = 0.0) {
  const Rounded b1 = to_float(beta1), b2 = to_float(beta2), one = exact(1.0);
  m = b1 * m + (one - b1) * u;
  s = b2 * s + (one - b2) * u * u;
  const Rounded c1 = to_float(1.0 / (1.0 - std::pow(beta1, t)));
  const Rounded c2 = to_float(1.0 / std::sqrt(1.0 - std::pow(beta2, t)));
  x = x * to_float(1.0 - lr * weight_decay) - to_float(lr) * (m * c1) / (sqrt(s) * c2 + to_float(eps));
}

}  // namespace a2sgd::testing
