#pragma once
// Host round trips of an exchange step, counted through the Kokkos Tools deep-copy and fence
// hooks: every deep_copy between a memory space the host cannot read and one it can is a
// transfer the step waits for (a host round trip when it goes to the host), and every fence the
// step issues. On a host-only build no copy crosses spaces, so the counts are zero by
// construction; on a device they are the step's synchronisations with the host.
#include <cstdint>

namespace a2sgd::apps {

struct HostTransfers {
  std::uint64_t to_host = 0;    ///< device-to-host deep copies (the step waits on each)
  std::uint64_t to_device = 0;  ///< host-to-device deep copies
  std::uint64_t fences = 0;     ///< fences, of one execution space or global
};

/// Installs the hooks for its lifetime (one at a time; it replaces no tool's other hooks).
class HostTransferCounter {
 public:
  HostTransferCounter();
  ~HostTransferCounter();
  HostTransferCounter(const HostTransferCounter&) = delete;
  HostTransferCounter& operator=(const HostTransferCounter&) = delete;

  /// Starts counting from zero.
  void start();
  /// Stops counting; what was counted since start().
  HostTransfers stop();
};

}  // namespace a2sgd::apps
