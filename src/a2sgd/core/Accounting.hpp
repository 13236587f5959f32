#pragma once
/// @file Accounting.hpp
/// Per-step and cumulative cost accounting of a gradient exchange: bytes handed to MPI, message
/// count, and wall time split into compression, communication and optimizer phases.

#include <chrono>
#include <cstdint>

namespace a2sgd {

/// Costs of one step (or a sum of steps). Times are seconds of wall clock on the calling rank;
/// device work is fenced before a phase's clock stops, so no phase is billed for another's kernels.
struct StepStats {
  /// Payload bytes this rank handed to MPI (send side of every collective; not wire bytes).
  std::uint64_t bytes_sent = 0;
  /// Number of MPI collectives issued.
  std::uint64_t messages = 0;
  /// Kernels that encode the gradient before communication (A2SGD: the two-means reduction).
  double compress_s = 0.0;
  /// Time inside MPI, including waiting for the slowest rank.
  double comm_s = 0.0;
  /// Decoding and applying the update (A2SGD: the fused residual + update + optimizer pass).
  double optimizer_s = 0.0;
  /// Collectives started during the backward pass (gradient buckets overlapping it), of `messages`.
  std::uint64_t overlapped = 0;

  StepStats& operator+=(const StepStats& o) noexcept {
    bytes_sent += o.bytes_sent;
    messages += o.messages;
    compress_s += o.compress_s;
    comm_s += o.comm_s;
    optimizer_s += o.optimizer_s;
    overlapped += o.overlapped;
    return *this;
  }
};

/// What an exchange has spent: the last training step, all training steps, and the
/// out-of-step work (average_replicas for evaluation/export) kept apart from training traffic.
struct ExchangeStats {
  StepStats last_step;
  StepStats total;
  StepStats averaging;
  std::uint64_t steps = 0;
};

/// Monotonic wall clock in seconds.
class Stopwatch {
 public:
  Stopwatch() : m_start(clock::now()) {}
  double seconds() const { return std::chrono::duration<double>(clock::now() - m_start).count(); }
  void restart() { m_start = clock::now(); }

 private:
  using clock = std::chrono::steady_clock;
  clock::time_point m_start;
};

}  // namespace a2sgd
