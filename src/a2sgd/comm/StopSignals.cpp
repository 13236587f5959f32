#include <a2sgd/comm/StopSignals.hpp>

#include <atomic>
#include <cstring>

#include <unistd.h>

namespace a2sgd {
namespace {

volatile std::sig_atomic_t g_received = 0;
std::atomic<bool> g_installed{false};

extern "C" void a2sgd_on_stop_signal(int signal_number) {
  if (g_received != 0) {
    // Only async-signal-safe calls here: write(2) and _exit(2).
    static const char text[] = "a2sgd: second stop signal: exiting now, without a checkpoint\n";
    [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, text, sizeof text - 1);
    ::_exit(128 + signal_number);
  }
  g_received = signal_number;
}

}  // namespace

StopSignals::StopSignals(const Communicator& comm, std::vector<int> signals)
    : m_comm(comm.get()), m_signals(std::move(signals)) {
  m_comm.set_watchdog(comm.watchdog());  // its agreement is a collective wait like any other
  if (g_installed.exchange(true)) throw Error("a2sgd::StopSignals: another instance is already installed");
  g_received = 0;
  m_previous.resize(m_signals.size());
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = a2sgd_on_stop_signal;
  sigemptyset(&action.sa_mask);
  // Interrupted system calls (file I/O of a checkpoint, MPI's sockets) resume instead of failing.
  action.sa_flags = SA_RESTART;
  for (std::size_t i = 0; i < m_signals.size(); ++i)
    if (::sigaction(m_signals[i], &action, &m_previous[i]) != 0) {
      for (std::size_t j = 0; j < i; ++j) ::sigaction(m_signals[j], &m_previous[j], nullptr);
      g_installed = false;
      throw Error("a2sgd::StopSignals: cannot install a handler for signal " + std::to_string(m_signals[i]) + ": " +
                  std::strerror(errno));
    }
}

StopSignals::~StopSignals() {
  // Every rank posted the outstanding agreement at the same poll(), so it completes even while
  // another rank is unwinding an error: that rank's blocking MPI calls keep progressing it.
  if (m_request != MPI_REQUEST_NULL) MPI_Wait(&m_request, MPI_STATUS_IGNORE);
  for (std::size_t i = 0; i < m_signals.size(); ++i) ::sigaction(m_signals[i], &m_previous[i], nullptr);
  g_installed = false;
}

bool StopSignals::complete() {
  if (m_request == MPI_REQUEST_NULL) return false;
  const auto wait = m_comm.watch("the stop-signal agreement (MPI_Wait)");
  A2SGD_MPI_CHECK(MPI_Wait(&m_request, MPI_STATUS_IGNORE));
  if (m_recv == 0) return false;
  m_agreed = m_recv;
  return true;
}

bool StopSignals::poll() {
  if (complete()) return true;
  m_send = g_received;
  A2SGD_MPI_CHECK(MPI_Iallreduce(&m_send, &m_recv, 1, MPI_INT, MPI_MAX, m_comm.get(), &m_request));
  return false;
}

bool StopSignals::finish() {
  return complete();
}

int StopSignals::received() noexcept {
  return g_received;
}

}  // namespace a2sgd
