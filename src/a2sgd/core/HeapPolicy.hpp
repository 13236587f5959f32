#pragma once
/// @file HeapPolicy.hpp
/// What the process's allocator does with large blocks once they are freed.
///
/// glibc serves a block of 128 KB or more (a threshold that adapts up to 32 MB) with a memory
/// mapping of its own and unmaps it when the block is freed. A buffer that is allocated and
/// freed every step is then mapped and page-faulted afresh every step: an MPI library's
/// temporary buffers inside a large all-reduce are such buffers. `HeapPolicy::keep` serves every
/// block from the heap and keeps freed memory in the process for the next allocation; the
/// process's resident memory then stays at its peak instead of shrinking when buffers are freed.
///
/// a2sgd's tools (apps/) apply the policy named by A2SGD_HEAP_POLICY before MPI_Init, `keep`
/// when it is unset. docs/performance.md has what it changes.

#include <string>

namespace a2sgd {

/// How the allocator treats large freed blocks (process-wide).
enum class HeapPolicy {
  system,  ///< as the C library is configured: its defaults, or what GLIBC_TUNABLES / MALLOC_* say
  keep     ///< every block from the heap, freed memory kept for reuse (glibc: M_MMAP_MAX 0, M_TRIM_THRESHOLD -1)
};

/// "system" or "keep"; throws InvalidArgument naming the text and the valid values otherwise.
HeapPolicy parse_heap_policy(const std::string& text);

/// The policy's name as parse_heap_policy() reads it.
const char* to_string(HeapPolicy policy) noexcept;

/// A2SGD_HEAP_POLICY read with parse_heap_policy(); `keep` when it is unset or empty. Throws
/// InvalidArgument naming the variable and its value otherwise.
HeapPolicy heap_policy_from_environment();

/// Applies `policy` to the process's allocator. `system` changes nothing (call it before `keep`,
/// or not at all: `keep` is not undone). Returns false where the allocator refused or offers no
/// such control (a C library other than glibc, a sanitizer's allocator); the policy in effect is
/// then `system`.
bool apply_heap_policy(HeapPolicy policy) noexcept;

/// The policy that apply_heap_policy() put into effect; `system` before any call.
HeapPolicy heap_policy_in_effect() noexcept;

}  // namespace a2sgd
