#include <a2sgd/comm/CollectiveWatchdog.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace a2sgd {
namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The rank cannot leave through MPI (the collective it waits in never completes, and MPI_Abort
// from a second thread is not allowed without MPI_THREAD_MULTIPLE): it reports and exits, and
// the launcher takes the job down.
void report_and_exit(const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  std::fflush(stdout);
  std::_Exit(EXIT_FAILURE);
}

}  // namespace

CollectiveWatchdog::CollectiveWatchdog(double timeout_s, int rank, Handler handler)
    : m_timeout_s(timeout_s), m_rank(rank), m_handler(handler ? std::move(handler) : Handler(report_and_exit)) {
  if (enabled()) m_thread = std::thread([this] { watch(); });
}

CollectiveWatchdog::~CollectiveWatchdog() {
  if (!m_thread.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_stop = true;
  }
  m_wake.notify_all();
  m_thread.join();
}

void CollectiveWatchdog::note_step(std::uint64_t step, double step_seconds) noexcept {
  m_step.store(step, std::memory_order_relaxed);
  const auto ns = static_cast<std::int64_t>(step_seconds * 1e9);
  if (ns > m_longest_step_ns.load(std::memory_order_relaxed)) m_longest_step_ns.store(ns, std::memory_order_relaxed);
}

double CollectiveWatchdog::effective_timeout() const noexcept {
  return std::max(m_timeout_s, 20.0 * 1e-9 * static_cast<double>(m_longest_step_ns.load(std::memory_order_relaxed)));
}

CollectiveWatchdog::Wait::Wait(CollectiveWatchdog* dog, const char* what) noexcept : m_dog(dog) {
  if (!m_dog || !m_dog->enabled() || m_dog->m_depth++ > 0) return;
  m_dog->m_what.store(what, std::memory_order_relaxed);
  m_dog->m_wait_start_ns.store(now_ns(), std::memory_order_release);
}

CollectiveWatchdog::Wait::~Wait() {
  if (!m_dog || !m_dog->enabled() || --m_dog->m_depth > 0) return;
  m_dog->m_wait_start_ns.store(-1, std::memory_order_release);
}

void CollectiveWatchdog::watch() {
  // Polls a few times per timeout: the report comes at most ~10% late.
  const auto poll = std::chrono::milliseconds(static_cast<long>(std::clamp(m_timeout_s * 100.0, 10.0, 1000.0)));
  std::unique_lock<std::mutex> lock(m_mutex);
  while (!m_wake.wait_for(lock, poll, [this] { return m_stop; })) {
    const std::int64_t start = m_wait_start_ns.load(std::memory_order_acquire);
    if (start < 0) continue;
    const double waited = 1e-9 * static_cast<double>(now_ns() - start);
    const double limit = effective_timeout();
    if (waited <= limit) continue;
    char text[512];
    std::snprintf(text, sizeof text,
                  "a2sgd: rank %d: no progress for %.1f s waiting in %s at step %llu: another rank stopped, died "
                  "or hangs (timeout %.0f s)",
                  m_rank, waited, m_what.load(std::memory_order_relaxed),
                  static_cast<unsigned long long>(m_step.load(std::memory_order_relaxed)), limit);
    m_handler(text);
    m_wait_start_ns.store(-1, std::memory_order_release);  // a handler that returns is called once per wait
  }
}

}  // namespace a2sgd
