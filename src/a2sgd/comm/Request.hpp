#pragma once
/// @file Request.hpp
/// One non-blocking collective in flight (Communicator::iallreduce, iallgather): RAII over an
/// MPI_Request, with the time this rank waits for it added to the step's accounting.

#include <a2sgd/comm/CollectiveWatchdog.hpp>
#include <a2sgd/core/Accounting.hpp>

#include <mpi.h>

namespace a2sgd {

/// Started by a Communicator; completed by wait() or by test() returning true. The bytes and the
/// collective were accounted when it started; comm_s gains the time spent in test() and wait(),
/// which is what the collective costs this rank once it overlaps other work. A request still in
/// flight when destroyed is waited for there (its buffers must outlive it), so none is leaked and
/// none completes into freed memory; an error at that point cannot be thrown and is lost, so call
/// wait() on every path that can fail.
class Request {
 public:
  Request() = default;
  ~Request();
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  Request(Request&& other) noexcept;
  Request& operator=(Request&& other) noexcept;

  /// Whether the collective is still in flight.
  bool active() const noexcept { return m_request != MPI_REQUEST_NULL; }
  /// Makes progress on the collective (MPI_Test); true once it completed. Throws MpiError on failure.
  bool test();
  /// Blocks until the collective completes (MPI_Wait); at once when it already has. Throws MpiError.
  void wait();

 private:
  friend class Communicator;
  Request(MPI_Request request, StepStats* stats, CollectiveWatchdog* watchdog, const char* what) noexcept
      : m_request(request), m_stats(stats), m_watchdog(watchdog), m_what(what) {}
  void account(double seconds) noexcept {
    if (m_stats) m_stats->comm_s += seconds;
  }

  MPI_Request m_request = MPI_REQUEST_NULL;
  StepStats* m_stats = nullptr;
  CollectiveWatchdog* m_watchdog = nullptr;
  const char* m_what = "";
};

}  // namespace a2sgd
