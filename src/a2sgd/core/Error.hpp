#pragma once
/// @file Error.hpp
/// Exception types. Library code throws; applications turn exceptions into one clear message
/// and a non-zero exit code on every rank.

#include <stdexcept>
#include <string>

namespace a2sgd {

/// Base class of every exception thrown by a2sgd.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A caller passed an invalid option, size or name.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

/// An MPI call returned an error code.
class MpiError : public Error {
 public:
  using Error::Error;
};

/// An error raised identically on every rank of a communicator: the ranks agreed that at least
/// one of them failed, and every rank throws with the same message.
class CollectiveError : public Error {
 public:
  CollectiveError(const std::string& what, int origin_rank) : Error(what), m_origin_rank(origin_rank) {}
  /// Lowest rank that reported the failure.
  int origin_rank() const noexcept { return m_origin_rank; }

 private:
  int m_origin_rank;
};

/// A file could not be written at the operating-system level (disk full, quota exceeded, I/O
/// error); raised on every rank. What the file replaces is intact.
class IoError : public CollectiveError {
 public:
  using CollectiveError::CollectiveError;
};

/// Non-finite values (NaN/Inf) were found in gradients or parameters; raised on every rank.
class NonFiniteError : public CollectiveError {
 public:
  using CollectiveError::CollectiveError;
};

/// Training went wrong without a non-finite value: the replicas drifted apart or the averaged
/// model got worse (train::TrainerConfig's divergence monitor, when told to stop); raised on every
/// rank.
class DivergenceError : public CollectiveError {
 public:
  using CollectiveError::CollectiveError;
};

}  // namespace a2sgd
