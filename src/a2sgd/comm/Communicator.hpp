#pragma once
/// @file Communicator.hpp
/// RAII MPI communicator with checked calls, byte/time accounting and collective error agreement.

#include <a2sgd/comm/CollectiveWatchdog.hpp>
#include <a2sgd/comm/Request.hpp>
#include <a2sgd/core/Accounting.hpp>
#include <a2sgd/core/Error.hpp>

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <type_traits>

namespace a2sgd {

/// Throws MpiError naming the call and MPI's own description when rc != MPI_SUCCESS.
void check_mpi(int rc, const char* call);

#define A2SGD_MPI_CHECK(call) ::a2sgd::check_mpi((call), #call)

namespace detail {
template <class T>
MPI_Datatype mpi_datatype() {
  if constexpr (std::is_same_v<T, float>)
    return MPI_FLOAT;
  else if constexpr (std::is_same_v<T, double>)
    return MPI_DOUBLE;
  else if constexpr (std::is_same_v<T, int>)
    return MPI_INT;
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return MPI_INT64_T;
  else if constexpr (std::is_same_v<T, std::uint64_t>)
    return MPI_UINT64_T;
  else if constexpr (std::is_same_v<T, char>)
    return MPI_CHAR;
  else if constexpr (std::is_same_v<T, std::uint8_t>)
    return MPI_UINT8_T;
  else if constexpr (std::is_same_v<T, std::uint32_t>)
    return MPI_UINT32_T;
  else if constexpr (std::is_same_v<T, std::uint16_t>)
    return MPI_UINT16_T;
  else
    static_assert(sizeof(T) == 0, "a2sgd: no MPI datatype for this type");
}
}  // namespace detail

/// Owns a duplicate of a parent communicator (so a2sgd's traffic never matches user messages),
/// freed exactly once. The duplicate returns error codes instead of aborting, and every call
/// is checked.
///
/// Collectives take an optional StepStats* into which they add the bytes handed to MPI, the
/// number of collectives, and the wall time spent in MPI (comm_s).
class Communicator {
 public:
  /// Duplicates `parent` (collective over `parent`).
  explicit Communicator(MPI_Comm parent = MPI_COMM_WORLD);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  Communicator(Communicator&& other) noexcept;
  Communicator& operator=(Communicator&& other) noexcept;

  MPI_Comm get() const noexcept { return m_comm; }
  int rank() const noexcept { return m_rank; }
  int size() const noexcept { return m_size; }

  /// In-place MPI_Allreduce of `count` values; counts above INT_MAX are split into chunks.
  template <class T>
  void allreduce(T* inout, std::size_t count, MPI_Op op, StepStats* stats = nullptr) const {
    allreduce_bytes(inout, count, sizeof(T), detail::mpi_datatype<T>(), op, stats);
  }

  /// MPI_Allgather of `count` values per rank into `recv` (size() * count values, rank order).
  /// Bytes accounted: the `count` values this rank sends.
  template <class T>
  void allgather(const T* send, std::size_t count, T* recv, StepStats* stats = nullptr) const {
    allgather_bytes(send, count, sizeof(T), detail::mpi_datatype<T>(), recv, stats);
  }

  /// Non-blocking in-place MPI_Iallreduce of `count` values (at most INT_MAX): the returned Request
  /// completes it; `inout` must stay valid and untouched until then. Bytes and the collective are
  /// accounted now, the waiting in Request::test() / wait(). Every rank must start the same
  /// non-blocking collectives in the same order (MPI's rule), as with the blocking ones.
  template <class T>
  [[nodiscard]] Request iallreduce(T* inout, std::size_t count, MPI_Op op, StepStats* stats = nullptr) const {
    return iallreduce_bytes(inout, count, sizeof(T), detail::mpi_datatype<T>(), op, stats);
  }

  /// Non-blocking MPI_Iallgather of `count` values per rank into `recv` (rank order); as iallreduce.
  template <class T>
  [[nodiscard]] Request iallgather(const T* send, std::size_t count, T* recv, StepStats* stats = nullptr) const {
    return iallgather_bytes(send, count, sizeof(T), detail::mpi_datatype<T>(), recv, stats);
  }

  /// Non-blocking MPI_Ialltoallv, as alltoallv; the count and displacement arrays and both buffers
  /// must stay valid and untouched until the returned Request completes.
  template <class T>
  [[nodiscard]] Request ialltoallv(const T* send, const int* send_counts, const int* send_displs, T* recv,
                                   const int* recv_counts, const int* recv_displs, StepStats* stats = nullptr) const {
    return ialltoallv_bytes(send, send_counts, send_displs, recv, recv_counts, recv_displs, sizeof(T),
                            detail::mpi_datatype<T>(), stats);
  }

  /// Non-blocking in-place MPI_Iallgatherv, as allgatherv; the arrays and the data stay valid and
  /// untouched until the returned Request completes.
  template <class T>
  [[nodiscard]] Request iallgatherv(T* data, const int* counts, const int* displs, StepStats* stats = nullptr) const {
    return iallgatherv_bytes(data, counts, displs, sizeof(T), detail::mpi_datatype<T>(), stats);
  }

  /// MPI_Alltoallv: to rank q go send_counts[q] values from send + send_displs[q], from rank q
  /// come recv_counts[q] values into recv + recv_displs[q] (counts and displacements in values).
  /// Bytes accounted: the values this rank sends.
  template <class T>
  void alltoallv(const T* send, const int* send_counts, const int* send_displs, T* recv, const int* recv_counts,
                 const int* recv_displs, StepStats* stats = nullptr) const {
    alltoallv_bytes(send, send_counts, send_displs, recv, recv_counts, recv_displs, sizeof(T),
                    detail::mpi_datatype<T>(), stats);
  }

  /// In-place MPI_Allgatherv: rank q's counts[q] values at data + displs[q] reach every rank.
  /// Bytes accounted: this rank's counts[rank()] values.
  template <class T>
  void allgatherv(T* data, const int* counts, const int* displs, StepStats* stats = nullptr) const {
    allgatherv_bytes(data, counts, displs, sizeof(T), detail::mpi_datatype<T>(), stats);
  }

  /// MPI_Bcast of `count` values from `root`.
  template <class T>
  void broadcast(T* data, std::size_t count, int root, StepStats* stats = nullptr) const {
    broadcast_bytes(data, count, sizeof(T), detail::mpi_datatype<T>(), root, stats);
  }

  void barrier() const;

  /// Attaches a watchdog (or none: nullptr) that every collective of this communicator reports
  /// its waits to; the caller keeps it alive while attached. Changes no semantics of the calls.
  void set_watchdog(CollectiveWatchdog* watchdog) const noexcept { m_watchdog = watchdog; }
  CollectiveWatchdog* watchdog() const noexcept { return m_watchdog; }
  /// This rank waits in collective `what` (a string literal) until the returned scope ends.
  CollectiveWatchdog::Wait watch(const char* what) const noexcept { return CollectiveWatchdog::Wait(m_watchdog, what); }

  /// Collective: every rank calls it with its own verdict. If any rank failed, every rank
  /// throws CollectiveError carrying the lowest failing rank's message (prefixed with its rank).
  void raise_if_any(bool failed, const std::string& message) const;

  /// Collective: runs `fn` on every rank; an exception on any rank becomes a CollectiveError
  /// on all ranks, so no rank is left waiting in a later collective.
  template <class Fn>
  void all_or_throw(Fn&& fn) const {
    std::string message;
    bool failed = false;
    try {
      fn();
    } catch (const std::exception& e) {
      failed = true;
      message = e.what();
    } catch (...) {
      failed = true;
      message = "unknown exception";
    }
    raise_if_any(failed, message);
  }

  /// Collective: checks that every rank passed the same value; otherwise every rank throws a
  /// CollectiveError naming `what` and the smallest and largest values seen.
  void require_same(std::uint64_t value, const std::string& what) const;

 private:
  void allreduce_bytes(void* inout, std::size_t count, std::size_t elem_size, MPI_Datatype type, MPI_Op op,
                       StepStats* stats) const;
  void allgather_bytes(const void* send, std::size_t count, std::size_t elem_size, MPI_Datatype type, void* recv,
                       StepStats* stats) const;
  void broadcast_bytes(void* data, std::size_t count, std::size_t elem_size, MPI_Datatype type, int root,
                       StepStats* stats) const;
  void alltoallv_bytes(const void* send, const int* send_counts, const int* send_displs, void* recv,
                       const int* recv_counts, const int* recv_displs, std::size_t elem_size, MPI_Datatype type,
                       StepStats* stats) const;
  void allgatherv_bytes(void* data, const int* counts, const int* displs, std::size_t elem_size, MPI_Datatype type,
                        StepStats* stats) const;
  Request iallreduce_bytes(void* inout, std::size_t count, std::size_t elem_size, MPI_Datatype type, MPI_Op op,
                           StepStats* stats) const;
  Request iallgather_bytes(const void* send, std::size_t count, std::size_t elem_size, MPI_Datatype type, void* recv,
                           StepStats* stats) const;
  Request ialltoallv_bytes(const void* send, const int* send_counts, const int* send_displs, void* recv,
                           const int* recv_counts, const int* recv_displs, std::size_t elem_size, MPI_Datatype type,
                           StepStats* stats) const;
  Request iallgatherv_bytes(void* data, const int* counts, const int* displs, std::size_t elem_size, MPI_Datatype type,
                            StepStats* stats) const;
  void release() noexcept;

  MPI_Comm m_comm = MPI_COMM_NULL;
  mutable CollectiveWatchdog* m_watchdog = nullptr;
  int m_rank = 0;
  int m_size = 1;
};

}  // namespace a2sgd
