#pragma once
// The applications' exit codes (docs/training.md): the same on every rank of a run.

namespace a2sgd::apps {

inline constexpr int exit_ok = 0;
inline constexpr int exit_error = 1;     ///< any other error
inline constexpr int exit_input = 2;     ///< invalid options, unreadable or malformed input, unwritable output
inline constexpr int exit_diverged = 3;  ///< a non-finite value, or the divergence monitor stopped the run
/// A checkpoint could not be written (full disk, quota, I/O error): EX_IOERR from sysexits.h.
inline constexpr int exit_io = 74;
/// Stopped by a signal after writing a checkpoint: EX_TEMPFAIL ("temporary failure, retry");
/// the job scripts requeue on it.
inline constexpr int exit_requeue = 75;
/// A rank waited in one collective for longer than its timeout: EX_PROTOCOL. The run can go on
/// from its newest checkpoint (the job scripts requeue on it too).
inline constexpr int exit_stalled = 76;

}  // namespace a2sgd::apps
