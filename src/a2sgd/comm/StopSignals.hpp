#pragma once
/// @file StopSignals.hpp
/// Graceful stop on a batch system's warning signal, agreed by all ranks at a step boundary.

#include <a2sgd/comm/Communicator.hpp>

#include <mpi.h>

#include <csignal>
#include <vector>

namespace a2sgd {

/// Catches stop signals (by default SIGUSR1, what `sbatch --signal=USR1@T` and Open MPI's
/// `mpirun` forward, and SIGTERM) and lets every rank agree on them at the same step boundary.
///
/// The first signal only sets a flag. Every rank calls poll() once per step boundary, in the same
/// order relative to its other collectives; a signal that reached any rank, even one rank alone,
/// makes poll() return true on every rank at the same call. A second signal to a process that
/// has already been asked to stop ends it at once with exit code 128 + signal number, without
/// a checkpoint: the user's (or the batch system's) way to insist.
///
/// The agreement costs no blocking collective per step: poll() completes a 4-byte non-blocking
/// MPI_Iallreduce (MPI_MAX of the signal number) started by the previous poll(), which has had a
/// whole step to progress, and starts the next one, on a duplicate of the communicator so that it
/// never interleaves with the training's own collectives. A signal is therefore acted on at the
/// second step boundary after it arrives. Piggybacking the flag on the exchange's own collective
/// would save that latency but change every method's payload and byte accounting.
///
/// One instance per process at a time (the handlers are process-wide); the destructor restores the
/// previous handlers.
class StopSignals {
 public:
  /// Collective over `comm`. Installs the handlers for `signals`.
  explicit StopSignals(const Communicator& comm, std::vector<int> signals = {SIGUSR1, SIGTERM});
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  /// Collective: call at every step boundary. True when every rank must stop now; then
  /// signal_number() is the agreed signal (the largest number any rank received).
  bool poll();

  /// Collective: completes the outstanding agreement (call before the ranks part ways, e.g. at the
  /// end of training). Returns whether a signal reached any rank since the last poll().
  bool finish();

  /// The signal that stopped the run (0 until poll() or finish() returned true).
  int signal_number() const noexcept { return m_agreed; }

  /// The signal this process received (0 if none); local, not agreed.
  static int received() noexcept;

 private:
  bool complete();

  Communicator m_comm;
  std::vector<int> m_signals;
  std::vector<struct sigaction> m_previous;
  MPI_Request m_request = MPI_REQUEST_NULL;
  int m_send = 0;
  int m_recv = 0;
  int m_agreed = 0;
};

}  // namespace a2sgd
