#include <a2sgd/core/Error.hpp>
#include <a2sgd/core/HeapPolicy.hpp>

#include <atomic>
#include <cstdlib>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace a2sgd {
namespace {

std::atomic<HeapPolicy> in_effect{HeapPolicy::system};

}  // namespace

HeapPolicy parse_heap_policy(const std::string& text) {
  if (text == "keep") return HeapPolicy::keep;
  if (text == "system") return HeapPolicy::system;
  throw InvalidArgument("unknown heap policy \"" + text + "\" (valid: keep, system)");
}

const char* to_string(HeapPolicy policy) noexcept {
  return policy == HeapPolicy::keep ? "keep" : "system";
}

HeapPolicy heap_policy_from_environment() {
  const char* value = std::getenv("A2SGD_HEAP_POLICY");
  if (!value || !*value) return HeapPolicy::keep;
  try {
    return parse_heap_policy(value);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(std::string("A2SGD_HEAP_POLICY=") + value + ": " + e.what());
  }
}

bool apply_heap_policy(HeapPolicy policy) noexcept {
  if (policy == HeapPolicy::system) return true;
#if defined(__GLIBC__)
  // No mapping per block: blocks of any size come from the heap. Freed memory at the heap's top
  // is never returned to the system. glibc answers 0 where it refuses; a sanitizer's allocator
  // intercepts mallopt and answers 0 as well.
  if (mallopt(M_MMAP_MAX, 0) != 1) return false;
  if (mallopt(M_TRIM_THRESHOLD, -1) != 1) {
    mallopt(M_MMAP_MAX, 65536);  // glibc's default: leave the allocator as it was
    return false;
  }
  in_effect = HeapPolicy::keep;
  return true;
#else
  return false;
#endif
}

HeapPolicy heap_policy_in_effect() noexcept {
  return in_effect;
}

}  // namespace a2sgd
