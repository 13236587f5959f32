// The heap policy (core/HeapPolicy.hpp): its names, its environment variable, and what `keep`
// changes in glibc's allocator: a large block that is freed and allocated again is served from
// memory the process kept (no new mapping, no page faults) instead of a fresh mapping each time.
#include "TestingCatch.hpp"

#include <a2sgd/core/Error.hpp>
#include <a2sgd/core/HeapPolicy.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

using namespace a2sgd;
using namespace a2sgd::testing;

namespace {

// Restores A2SGD_HEAP_POLICY when a test section ends.
class ScopedEnv {
 public:
  explicit ScopedEnv(const char* value) {
    if (const char* old = std::getenv(name)) m_old = old, m_had = true;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (m_had)
      ::setenv(name, m_old.c_str(), 1);
    else
      ::unsetenv(name);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  static constexpr const char* name = "A2SGD_HEAP_POLICY";
  std::string m_old;
  bool m_had = false;
};

long minor_faults() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

#if defined(__GLIBC__)
struct Cycle {
  long faults = 0;        // page faults while the block was written
  long mapped_bytes = 0;  // growth of glibc's separately mapped blocks while it was held
};

// Allocates `bytes`, writes one byte per page, frees it.
Cycle allocate_touch_free(std::size_t bytes) {
  const long page = ::sysconf(_SC_PAGESIZE);
  const auto mapped_before = static_cast<long>(mallinfo2().hblkhd);
  const long faults_before = minor_faults();
  auto* p = static_cast<volatile char*>(std::malloc(bytes));
  REQUIRE(p != nullptr);
  for (std::size_t i = 0; i < bytes; i += static_cast<std::size_t>(page)) p[i] = 1;
  Cycle c;
  c.faults = minor_faults() - faults_before;
  c.mapped_bytes = static_cast<long>(mallinfo2().hblkhd) - mapped_before;
  std::free(const_cast<char*>(p));
  return c;
}
#endif

}  // namespace

TEST_CASE("heap policy names and the environment variable", "[heap]") {
  CHECK(parse_heap_policy("keep") == HeapPolicy::keep);
  CHECK(parse_heap_policy("system") == HeapPolicy::system);
  CHECK(std::string(to_string(HeapPolicy::keep)) == "keep");
  CHECK(std::string(to_string(HeapPolicy::system)) == "system");
  CHECK_THROWS_WITH(parse_heap_policy("Keep"), "unknown heap policy \"Keep\" (valid: keep, system)");
  CHECK_THROWS_AS(parse_heap_policy(""), InvalidArgument);
  {
    ScopedEnv env(nullptr);
    CHECK(heap_policy_from_environment() == HeapPolicy::keep);
  }
  {
    ScopedEnv env("");
    CHECK(heap_policy_from_environment() == HeapPolicy::keep);
  }
  {
    ScopedEnv env("system");
    CHECK(heap_policy_from_environment() == HeapPolicy::system);
  }
  {
    ScopedEnv env("sometimes");
    CHECK_THROWS_WITH(heap_policy_from_environment(),
                      "A2SGD_HEAP_POLICY=sometimes: unknown heap policy \"sometimes\" (valid: keep, system)");
  }
}

TEST_CASE("keep: a freed large block is reused without new mappings or page faults", "[heap]") {
#if defined(__GLIBC__)
  if (address_sanitizer_build) {
    // The sanitizer's allocator ignores mallopt: the policy must report that it is not in effect.
    CHECK_FALSE(apply_heap_policy(HeapPolicy::keep));
    CHECK(heap_policy_in_effect() == HeapPolicy::system);
    return;
  }
  // Larger than the 32 MB up to which glibc's mapping threshold adapts on its own, so that with
  // the defaults every allocation is a fresh mapping.
  const std::size_t bytes = std::size_t{64} << 20;
  REQUIRE(heap_policy_in_effect() == HeapPolicy::system);
  REQUIRE(apply_heap_policy(HeapPolicy::system));
  std::vector<Cycle> system;
  for (int i = 0; i < 3; ++i) system.push_back(allocate_touch_free(bytes));
  // The control: glibc's defaults map each block afresh and fault it in every time (with
  // transparent huge pages there are fewer faults per block, but as many every time).
  for (const Cycle& c : system) {
    CHECK(c.mapped_bytes >= static_cast<long>(bytes));
    CHECK(c.faults > 0);
    CHECK(2 * c.faults >= system.front().faults);
  }

  REQUIRE(apply_heap_policy(HeapPolicy::keep));
  CHECK(heap_policy_in_effect() == HeapPolicy::keep);
  std::vector<Cycle> keep;
  for (int i = 0; i < 3; ++i) keep.push_back(allocate_touch_free(bytes));
  for (const Cycle& c : keep) CHECK(c.mapped_bytes == 0);
  // The first block may grow the heap; the next ones reuse it: at most 1% of the faults of a
  // fresh mapping.
  for (std::size_t i = 1; i < keep.size(); ++i) CHECK(100 * keep[i].faults <= system.front().faults);
#else
  WARN("not glibc: apply_heap_policy(keep) reports whether this C library's allocator took it");
  CHECK(apply_heap_policy(HeapPolicy::keep) == (heap_policy_in_effect() == HeapPolicy::keep));
#endif
}
