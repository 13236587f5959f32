#include <a2sgd/comm/Communicator.hpp>

#include <algorithm>
#include <climits>
#include <utility>
#include <vector>

namespace a2sgd {

void check_mpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
  throw MpiError(std::string("MPI call failed: ") + call + ": " +
                 (len > 0 ? std::string(text, static_cast<std::size_t>(len)) : "error " + std::to_string(rc)));
}

Communicator::Communicator(MPI_Comm parent) {
  int initialized = 0;
  A2SGD_MPI_CHECK(MPI_Initialized(&initialized));
  if (!initialized) throw Error("a2sgd::Communicator: MPI is not initialized (call MPI_Init first)");
  A2SGD_MPI_CHECK(MPI_Comm_dup(parent, &m_comm));
  // From here on a failing call returns its code to us instead of aborting the job.
  A2SGD_MPI_CHECK(MPI_Comm_set_errhandler(m_comm, MPI_ERRORS_RETURN));
  A2SGD_MPI_CHECK(MPI_Comm_rank(m_comm, &m_rank));
  A2SGD_MPI_CHECK(MPI_Comm_size(m_comm, &m_size));
}

Communicator::~Communicator() {
  release();
}

Communicator::Communicator(Communicator&& other) noexcept
    : m_comm(std::exchange(other.m_comm, MPI_COMM_NULL)),
      m_watchdog(std::exchange(other.m_watchdog, nullptr)),
      m_rank(other.m_rank),
      m_size(other.m_size) {}

Communicator& Communicator::operator=(Communicator&& other) noexcept {
  if (this != &other) {
    release();
    m_comm = std::exchange(other.m_comm, MPI_COMM_NULL);
    m_watchdog = std::exchange(other.m_watchdog, nullptr);
    m_rank = other.m_rank;
    m_size = other.m_size;
  }
  return *this;
}

void Communicator::release() noexcept {
  if (m_comm == MPI_COMM_NULL) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&m_comm);
  m_comm = MPI_COMM_NULL;
}

namespace {

// MPI counts are int: issue one call per INT_MAX elements, time them together and account the
// payload this rank hands over (`sent` is false for receivers of a broadcast).
template <class Call>
void chunked(void* data, std::size_t count, std::size_t elem_size, bool sent, StepStats* stats, Call&& call) {
  Stopwatch clock;
  std::size_t chunks = 0;
  auto* bytes = static_cast<char*>(data);
  for (std::size_t done = 0; done < count; ++chunks) {
    const std::size_t n = std::min<std::size_t>(count - done, static_cast<std::size_t>(INT_MAX));
    call(bytes + done * elem_size, static_cast<int>(n));
    done += n;
  }
  if (stats) {
    stats->comm_s += clock.seconds();
    if (sent) stats->bytes_sent += count * elem_size;
    stats->messages += chunks;
  }
}

}  // namespace

void Communicator::allreduce_bytes(void* inout, std::size_t count, std::size_t elem_size, MPI_Datatype type, MPI_Op op,
                                   StepStats* stats) const {
  const auto wait = watch("MPI_Allreduce");
  chunked(inout, count, elem_size, true, stats,
          [&](void* chunk, int n) { A2SGD_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, chunk, n, type, op, m_comm)); });
}

void Communicator::allgather_bytes(const void* send, std::size_t count, std::size_t elem_size, MPI_Datatype type,
                                   void* recv, StepStats* stats) const {
  const auto wait = watch("MPI_Allgather");
  if (count > static_cast<std::size_t>(INT_MAX))
    throw InvalidArgument("Communicator::allgather: " + std::to_string(count) + " values per rank exceed INT_MAX");
  Stopwatch clock;
  A2SGD_MPI_CHECK(MPI_Allgather(send, static_cast<int>(count), type, recv, static_cast<int>(count), type, m_comm));
  if (stats) {
    stats->comm_s += clock.seconds();
    stats->bytes_sent += count * elem_size;
    stats->messages += 1;
  }
}

namespace {

// The count a non-blocking collective takes: one MPI call (a request per chunk would make the
// caller juggle several), so at most INT_MAX values.
int single_call_count(std::size_t count, const char* what) {
  if (count > static_cast<std::size_t>(INT_MAX))
    throw InvalidArgument(std::string("Communicator::") + what + ": " + std::to_string(count) +
                          " values exceed INT_MAX");
  return static_cast<int>(count);
}

}  // namespace

Request Communicator::iallreduce_bytes(void* inout, std::size_t count, std::size_t elem_size, MPI_Datatype type,
                                       MPI_Op op, StepStats* stats) const {
  const int n = single_call_count(count, "iallreduce");
  Stopwatch clock;
  MPI_Request request = MPI_REQUEST_NULL;
  A2SGD_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, inout, n, type, op, m_comm, &request));
  if (stats) {
    stats->comm_s += clock.seconds();
    stats->bytes_sent += count * elem_size;
    stats->messages += 1;
  }
  return Request(request, stats, m_watchdog, "MPI_Iallreduce");
}

Request Communicator::iallgather_bytes(const void* send, std::size_t count, std::size_t elem_size, MPI_Datatype type,
                                       void* recv, StepStats* stats) const {
  const int n = single_call_count(count, "iallgather");
  Stopwatch clock;
  MPI_Request request = MPI_REQUEST_NULL;
  A2SGD_MPI_CHECK(MPI_Iallgather(send, n, type, recv, n, type, m_comm, &request));
  if (stats) {
    stats->comm_s += clock.seconds();
    stats->bytes_sent += count * elem_size;
    stats->messages += 1;
  }
  return Request(request, stats, m_watchdog, "MPI_Iallgather");
}

Request::~Request() {
  if (m_request != MPI_REQUEST_NULL) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Wait(&m_request, MPI_STATUS_IGNORE);  // no throw from a destructor
  }
}

Request::Request(Request&& other) noexcept
    : m_request(std::exchange(other.m_request, MPI_REQUEST_NULL)),
      m_stats(other.m_stats),
      m_watchdog(other.m_watchdog),
      m_what(other.m_what) {}

Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    if (m_request != MPI_REQUEST_NULL) MPI_Wait(&m_request, MPI_STATUS_IGNORE);
    m_request = std::exchange(other.m_request, MPI_REQUEST_NULL);
    m_stats = other.m_stats;
    m_watchdog = other.m_watchdog;
    m_what = other.m_what;
  }
  return *this;
}

bool Request::test() {
  if (m_request == MPI_REQUEST_NULL) return true;
  Stopwatch clock;
  int done = 0;
  A2SGD_MPI_CHECK(MPI_Test(&m_request, &done, MPI_STATUS_IGNORE));
  account(clock.seconds());
  return done != 0;
}

void Request::wait() {
  if (m_request == MPI_REQUEST_NULL) return;
  const CollectiveWatchdog::Wait watching(m_watchdog, m_what);
  Stopwatch clock;
  A2SGD_MPI_CHECK(MPI_Wait(&m_request, MPI_STATUS_IGNORE));
  account(clock.seconds());
}

namespace {
// The values an all-to-all sends: the sum of its send counts.
std::size_t sent_values(const int* send_counts, int size) {
  std::size_t sent = 0;
  for (int q = 0; q < size; ++q) sent += static_cast<std::size_t>(send_counts[q]);
  return sent;
}
}  // namespace

void Communicator::alltoallv_bytes(const void* send, const int* send_counts, const int* send_displs, void* recv,
                                   const int* recv_counts, const int* recv_displs, std::size_t elem_size,
                                   MPI_Datatype type, StepStats* stats) const {
  const auto wait = watch("MPI_Alltoallv");
  Stopwatch clock;
  A2SGD_MPI_CHECK(MPI_Alltoallv(send, send_counts, send_displs, type, recv, recv_counts, recv_displs, type, m_comm));
  if (stats) {
    stats->comm_s += clock.seconds();
    stats->bytes_sent += sent_values(send_counts, m_size) * elem_size;
    stats->messages += 1;
  }
}

void Communicator::allgatherv_bytes(void* data, const int* counts, const int* displs, std::size_t elem_size,
                                    MPI_Datatype type, StepStats* stats) const {
  const auto wait = watch("MPI_Allgatherv");
  Stopwatch clock;
  A2SGD_MPI_CHECK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, counts, displs, type, m_comm));
  if (stats) {
    stats->comm_s += clock.seconds();
    stats->bytes_sent += static_cast<std::size_t>(counts[m_rank]) * elem_size;
    stats->messages += 1;
  }
}

Request Communicator::ialltoallv_bytes(const void* send, const int* send_counts, const int* send_displs, void* recv,
                                       const int* recv_counts, const int* recv_displs, std::size_t elem_size,
                                       MPI_Datatype type, StepStats* stats) const {
  Stopwatch clock;
  MPI_Request request = MPI_REQUEST_NULL;
  A2SGD_MPI_CHECK(
      MPI_Ialltoallv(send, send_counts, send_displs, type, recv, recv_counts, recv_displs, type, m_comm, &request));
  if (stats) {
    stats->comm_s += clock.seconds();
    stats->bytes_sent += sent_values(send_counts, m_size) * elem_size;
    stats->messages += 1;
  }
  return Request(request, stats, m_watchdog, "MPI_Ialltoallv");
}

Request Communicator::iallgatherv_bytes(void* data, const int* counts, const int* displs, std::size_t elem_size,
                                        MPI_Datatype type, StepStats* stats) const {
  Stopwatch clock;
  MPI_Request request = MPI_REQUEST_NULL;
  A2SGD_MPI_CHECK(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, counts, displs, type, m_comm, &request));
  if (stats) {
    stats->comm_s += clock.seconds();
    stats->bytes_sent += static_cast<std::size_t>(counts[m_rank]) * elem_size;
    stats->messages += 1;
  }
  return Request(request, stats, m_watchdog, "MPI_Iallgatherv");
}

void Communicator::broadcast_bytes(void* data, std::size_t count, std::size_t elem_size, MPI_Datatype type, int root,
                                   StepStats* stats) const {
  const auto wait = watch("MPI_Bcast");
  chunked(data, count, elem_size, m_rank == root, stats,
          [&](void* chunk, int n) { A2SGD_MPI_CHECK(MPI_Bcast(chunk, n, type, root, m_comm)); });
}

void Communicator::barrier() const {
  const auto wait = watch("MPI_Barrier");
  A2SGD_MPI_CHECK(MPI_Barrier(m_comm));
}

void Communicator::raise_if_any(bool failed, const std::string& message) const {
  const auto wait = watch("an error agreement (MPI_Allreduce)");
  int origin = failed ? m_rank : m_size;
  A2SGD_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &origin, 1, MPI_INT, MPI_MIN, m_comm));
  if (origin == m_size) return;
  // Ship the first failing rank's message so that every rank reports the same root cause.
  std::uint64_t length = m_rank == origin ? message.size() : 0;
  A2SGD_MPI_CHECK(MPI_Bcast(&length, 1, MPI_UINT64_T, origin, m_comm));
  std::string text = m_rank == origin ? message : std::string(length, '\0');
  if (length > 0) broadcast(text.data(), text.size(), origin);
  // Error path only: how many ranks failed decides how the message is attributed.
  int failures = failed ? 1 : 0;
  A2SGD_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &failures, 1, MPI_INT, MPI_SUM, m_comm));
  std::string prefix;
  if (failures < m_size) {
    prefix = "rank " + std::to_string(origin);
    if (failures > 1) prefix += " (and " + std::to_string(failures - 1) + " more)";
    prefix += ": ";
  }
  throw CollectiveError(prefix + text, origin);
}

void Communicator::require_same(std::uint64_t value, const std::string& what) const {
  const auto wait = watch("an agreement check (MPI_Allreduce)");
  std::uint64_t range[2] = {value, ~value};  // min of value and min of ~value (= ~max)
  A2SGD_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, range, 2, MPI_UINT64_T, MPI_MIN, m_comm));
  const std::uint64_t lo = range[0];
  const std::uint64_t hi = ~range[1];
  if (lo != hi) {
    throw CollectiveError("ranks disagree on " + what + ": values range from " + std::to_string(lo) + " to " +
                              std::to_string(hi) + " (this rank has " + std::to_string(value) + ")",
                          -1);
  }
}

}  // namespace a2sgd
