#pragma once
/// @file Observer.hpp
/// What a Trainer reports while it runs: flat records of named values (one per event: a log
/// interval, an evaluation, a checkpoint, ...), step status for progress displays, and lines of
/// text. An application turns them into a metrics file and a progress bar (apps/train); a library
/// user may ignore them or collect them.

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace a2sgd::train {

using RecordValue = std::variant<std::string, double, std::int64_t, std::uint64_t, bool>;

/// One event as ordered (key, value) fields; the "event" field comes first.
class Record {
 public:
  Record& add(std::string key, std::string value) { return put(std::move(key), RecordValue(std::move(value))); }
  Record& add(std::string key, const char* value) { return add(std::move(key), std::string(value)); }
  Record& add(std::string key, double value) { return put(std::move(key), RecordValue(value)); }
  Record& add(std::string key, std::int64_t value) { return put(std::move(key), RecordValue(value)); }
  Record& add(std::string key, std::uint64_t value) { return put(std::move(key), RecordValue(value)); }
  Record& add(std::string key, int value) { return add(std::move(key), static_cast<std::int64_t>(value)); }
  Record& add(std::string key, bool value) { return put(std::move(key), RecordValue(value)); }

  const std::vector<std::pair<std::string, RecordValue>>& fields() const noexcept { return m_fields; }
  /// The value of `key`, or nullptr.
  const RecordValue* find(const std::string& key) const {
    for (const auto& [k, v] : m_fields)
      if (k == key) return &v;
    return nullptr;
  }

 private:
  Record& put(std::string key, RecordValue value) {
    m_fields.emplace_back(std::move(key), std::move(value));
    return *this;
  }
  std::vector<std::pair<std::string, RecordValue>> m_fields;
};

/// Where the run is, for a progress display (between and at log records).
struct StepStatus {
  std::uint64_t done = 0, total = 0;
  std::uint64_t epoch = 0, epochs = 0;
  double loss = 0.0;
  double rate = 0.0;  ///< predictions per second over all ranks
  std::string unit;   ///< "samples", "tokens"
  double eta_s = 0.0;
  bool logged = false;  ///< true at a log record (plain output prints these only)
};

/// Callbacks of a run, on every rank (records carry the same reduced values on every rank; an
/// application usually writes rank 0's). The defaults ignore everything.
class TrainObserver {
 public:
  virtual ~TrainObserver() = default;
  virtual void record(const Record&) {}
  virtual void status(const StepStatus&) {}
  /// A line for people: an evaluation, a checkpoint written, a resume.
  virtual void message(const std::string&) {}
  /// A problem that does not stop the run (skipped checkpoint, option differing from a resumed
  /// checkpoint's, ...).
  virtual void warning(const std::string&) {}
  /// A warning every rank must show, because each rank's log may be read on its own (divergence:
  /// a Slurm job's per-task output). `rank` is the calling rank.
  virtual void rank_warning(int /*rank*/, const std::string&) {}
  /// The run leaves its step loop (a live display may end its line).
  virtual void finish() {}
};

}  // namespace a2sgd::train
