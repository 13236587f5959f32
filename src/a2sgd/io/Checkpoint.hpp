#pragma once
/// @file Checkpoint.hpp
/// Parallel HDF5 checkpoints: every rank's replica, residual and optimizer state in one file,
/// written collectively and atomically (temporary name, flush, rename). Layout: docs/checkpoint.md.

#include <a2sgd/comm/Communicator.hpp>
#include <a2sgd/core/Types.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace a2sgd::io {

/// Current file format version (root attribute "format_version"). Version 2 added a CRC-32 per
/// dataset row (attribute "crc32") and HDF5's checksummed metadata format; files of version 1
/// are still read, without those checks.
inline constexpr std::int64_t checkpoint_format_version = 2;

/// Run description stored as root attributes; identical on every rank.
struct CheckpointMetadata {
  std::int64_t format_version = checkpoint_format_version;
  std::string library_version;
  std::string model;               ///< e.g. "mlp 784-256-256-10"
  std::string layout;              ///< ParameterStore::describe()
  std::string compressor;          ///< exchange method name
  std::string compressor_options;  ///< "key=value;..."
  std::string optimizer;           ///< "sgd" | "momentum" | "adam"
  std::string optimizer_options;   ///< "key=value;..."
  std::string dataset;
  std::int64_t world_size = 0;
  std::int64_t num_params = 0;
  std::int64_t batch_size = 0;
  std::uint64_t seed = 0;
  std::uint64_t step = 0;              ///< steps completed
  std::uint64_t epoch = 0;             ///< 0-based epoch of the next step
  std::uint64_t samples_in_epoch = 0;  ///< samples all ranks consumed in that epoch so far
  std::string created;                 ///< UTC, ISO 8601
};

/// What each rank writes, or receives on load (views pre-allocated with this run's shapes).
struct CheckpointState {
  FloatView params;                        ///< this rank's replica
  FloatView averaged;                      ///< the mean of all replicas
  std::vector<NamedView> exchange_state;   ///< e.g. {"residual", e}
  std::vector<NamedView> optimizer_state;  ///< e.g. {"momentum", v}
  /// The model's carried per-rank state (nn::Model::state(), e.g. an LSTM's hidden state):
  /// restored when the world size is the same; left alone in an elastic restart, where the
  /// caller resets it (another rank count splits the data differently).
  std::vector<NamedView> model_state;
  std::uint64_t optimizer_steps = 0;
  std::uint64_t exchange_steps = 0;
  std::vector<std::pair<std::string, double>> scalars;  ///< per-rank counters, by name
  /// Names in `scalars` that a file may lack (written by an older version): they keep the value
  /// the caller set. Every other name must be present.
  std::vector<std::string> optional_scalars;
  std::vector<std::pair<std::string, double>> timers;  ///< per-rank elapsed times, by name
};

/// Collective: writes `path` atomically. The data goes to a temporary file in the same directory
/// (".<name>.tmp"), which is flushed and closed before rank 0 renames it; a run killed at any
/// point leaves either the complete new file or none, and older checkpoints untouched.
/// The file's disk space is allocated before anything is written, so a full disk or quota is an
/// IoError (on every rank, naming the file and the system's reason, the temporary file removed)
/// rather than a failure inside HDF5. Returns the number of bytes of the file.
std::uint64_t write_checkpoint(const Communicator& comm, const std::string& path, const CheckpointMetadata& meta,
                               const CheckpointState& state);

/// Collective: opens `path` read-only and reads its metadata. A missing, non-HDF5, truncated or
/// incomplete file, or one without the a2sgd layout, raises CollectiveError on every rank with
/// the file named. Never modifies the file.
CheckpointMetadata read_checkpoint_metadata(const Communicator& comm, const std::string& path);

/// Collective: restores `state` from `path` (its metadata already read and accepted). The
/// averaged model is read only when `state.averaged` is non-empty. Every row read must be
/// float32 (float64 for scalars and timers), pass its stored CRC-32 (format 2) and hold only
/// finite values; otherwise every rank raises CollectiveError naming the dataset and row.
/// Same world size: every rank gets exactly its own replica, residual, optimizer state and
/// scalars (bit-exact restart). Different world size (elastic restart): every replica starts
/// from the averaged model; each exchange state tensor is the old ranks' sum divided by the new
/// world size (so the sum over ranks is conserved; StateMerge::conserve_sum) or the old ranks'
/// mean (StateMerge::mean); optimizer state and scalars are the mean
/// over the old ranks. Missing or mis-shaped datasets raise CollectiveError on every rank.
void read_checkpoint(const Communicator& comm, const std::string& path, const CheckpointMetadata& meta,
                     CheckpointState& state);

/// False after a checkpoint write failed inside HDF5 on some ranks (an I/O error after the space
/// was claimed): the ranks' views of that file differ, so HDF5's collective clean-up in
/// MPI_Finalize could never complete. An application should then end with
/// MPI_Abort(comm, its exit code) after reporting the error, instead of MPI_Finalize.
bool can_finalize() noexcept;

/// "<dir>/ckpt-<step, 9 digits>.h5".
std::string checkpoint_path(const std::string& dir, std::uint64_t step);

/// Checkpoint files ("ckpt-<step>.h5") in `dir`, newest step first (none if dir is missing).
std::vector<std::pair<std::uint64_t, std::string>> list_checkpoints(const std::string& dir);

/// Serial: compares two checkpoints, every dataset bit for bit (but the timers, which measure
/// elapsed time) and every run attribute (but "created" and "library_version"). Returns the
/// differences found; empty when identical.
std::vector<std::string> compare_checkpoints(const std::string& a, const std::string& b);

/// Serial (call with MPI initialised): checks a checkpoint completely without loading it into a
/// run: its metadata as read_checkpoint_metadata() checks it, and every row of every dataset
/// (float32 or float64, its stored CRC-32 in format 2, finite float32 values). Returns the
/// problems found, one per damaged dataset (empty: the file is sound); `summary` tells what was
/// checked.
std::vector<std::string> verify_checkpoint(const std::string& path, std::string& summary);

/// Serial: a human-readable listing of a checkpoint's attributes and datasets.
std::string describe_checkpoint(const std::string& path);

}  // namespace a2sgd::io
