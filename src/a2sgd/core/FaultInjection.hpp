#pragma once
/// @file FaultInjection.hpp
/// Test hook for fault-tolerance tests: A2SGD_FAULT_INJECT="<site>@<step>[:<rank>][=<signal>]"
/// makes the given rank (default 1) send itself `signal` (USR1, USR2, TERM, INT or KILL; default
/// KILL) when it reaches `site` at `step`. Several such faults may be given, separated by commas.
/// Sites used by a2sgd: "step" (after a training step completes) and "checkpoint-write" (inside
/// a checkpoint write, after the data and before the file is published). Unset: a no-op.
///
/// A2SGD_FAULT_NO_RESERVE=1 makes checkpoint writes skip claiming their disk space first, so that
/// a full disk fails inside HDF5's writes (the path io::can_finalize() exists for).

#include <cstdint>

namespace a2sgd {

/// Signals this process if A2SGD_FAULT_INJECT names this site, step and rank.
void fault_point(const char* site, std::uint64_t step, int rank);

}  // namespace a2sgd
