#include "HostTransfers.hpp"

#include <Kokkos_Core.hpp>

#include <atomic>
#include <cstring>

namespace a2sgd::apps {
namespace {

std::atomic<bool> counting{false};
std::atomic<std::uint64_t> to_host{0}, to_device{0}, fences{0};

// Memory spaces the host reads directly: Kokkos names them "Host", "CudaHostPinned",
// "HIPHostPinned", "SYCLHostUSM", "HBW"; the shared (UVM / managed) spaces are device memory
// whose host access migrates pages, so a copy from them to the host counts as a transfer.
bool host_space(const Kokkos::Profiling::SpaceHandle& h) {
  return std::strcmp(h.name, "Host") == 0 || std::strstr(h.name, "HostPinned") != nullptr ||
         std::strstr(h.name, "HostUSM") != nullptr || std::strcmp(h.name, "HBW") == 0;
}

void on_deep_copy(Kokkos::Profiling::SpaceHandle dst, const char*, const void*, Kokkos::Profiling::SpaceHandle src,
                  const char*, const void*, std::uint64_t) {
  if (!counting.load(std::memory_order_relaxed)) return;
  const bool dst_host = host_space(dst), src_host = host_space(src);
  if (dst_host && !src_host) to_host.fetch_add(1, std::memory_order_relaxed);
  if (!dst_host && src_host) to_device.fetch_add(1, std::memory_order_relaxed);
}

void on_fence(const char*, const std::uint32_t, std::uint64_t*) {
  if (counting.load(std::memory_order_relaxed)) fences.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

HostTransferCounter::HostTransferCounter() {
  Kokkos::Tools::Experimental::set_begin_deep_copy_callback(on_deep_copy);
  Kokkos::Tools::Experimental::set_begin_fence_callback(on_fence);
}

HostTransferCounter::~HostTransferCounter() {
  counting = false;
  Kokkos::Tools::Experimental::set_begin_deep_copy_callback(nullptr);
  Kokkos::Tools::Experimental::set_begin_fence_callback(nullptr);
}

void HostTransferCounter::start() {
  to_host = 0;
  to_device = 0;
  fences = 0;
  counting = true;
}

HostTransfers HostTransferCounter::stop() {
  counting = false;
  return {to_host.load(), to_device.load(), fences.load()};
}

}  // namespace a2sgd::apps
