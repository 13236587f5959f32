#pragma once
/// @file CollectiveWatchdog.hpp
/// Ends a rank that waits in a collective for longer than a timeout: one stopped, dead or hung
/// rank would otherwise keep every other rank spinning in MPI until the batch system's time limit.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace a2sgd {

/// A thread that watches this rank's waits in collectives (Communicator::watch) and calls its
/// handler once a single wait has lasted longer than the effective timeout: the configured one,
/// or 20 times the longest step seen so far (note_step) when that is longer, so a slow model
/// does not trip it. The handler gets a message that says which collective and step the rank
/// waits in; the default one prints it and ends the process with EXIT_FAILURE (the MPI launcher
/// then ends the others; a stopped rank cannot be asked to finalize). An application passes its
/// own to choose the exit code (a2sgd-train: 76, which its job scripts requeue on).
class CollectiveWatchdog {
 public:
  using Handler = std::function<void(const std::string& message)>;

  /// timeout_s <= 0: disabled (no thread). `rank` names this rank in the message.
  CollectiveWatchdog(double timeout_s, int rank, Handler handler = {});
  ~CollectiveWatchdog();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  bool enabled() const noexcept { return m_timeout_s > 0.0; }
  /// The step this rank works on, and how long the previous one took.
  void note_step(std::uint64_t step, double step_seconds) noexcept;
  /// What the timeout is now (seconds).
  double effective_timeout() const noexcept;

  /// Marks this rank as waiting in `what` (a string literal) until the scope ends; nested scopes
  /// keep the outermost. Used from the thread that calls MPI.
  class Wait {
   public:
    Wait(CollectiveWatchdog* dog, const char* what) noexcept;
    ~Wait();
    Wait(const Wait&) = delete;
    Wait& operator=(const Wait&) = delete;

   private:
    CollectiveWatchdog* m_dog;
  };

 private:
  void watch();

  double m_timeout_s;
  int m_rank;
  Handler m_handler;
  int m_depth = 0;  // nesting of Wait scopes (the MPI thread only)
  std::atomic<std::int64_t> m_wait_start_ns{-1};
  std::atomic<const char*> m_what{""};
  std::atomic<std::uint64_t> m_step{0};
  std::atomic<std::int64_t> m_longest_step_ns{0};
  std::mutex m_mutex;
  std::condition_variable m_wake;
  bool m_stop = false;
  std::thread m_thread;
};

}  // namespace a2sgd
