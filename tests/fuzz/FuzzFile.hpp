#pragma once
// Shared by the fuzz harnesses: the readers under test take file names, so each input is written
// to a scratch file (or directory) of this process first. It is removed when the process exits
// normally, as libFuzzer does at the end of a run; after a finding libFuzzer exits without running
// destructors and the file stays, but the input is in the crash artifact anyway.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

namespace a2sgd::fuzz {

/// A path in $TMPDIR (or /tmp) unique to this process and `tag`.
inline std::string scratch_path(const std::string& tag) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/a2sgd-fuzz-" + std::to_string(::getpid()) + "-" + tag;
}

/// A scratch path (see scratch_path()) removed, with anything under it, when this object is
/// destroyed: a harness holds one in a function-local static, destroyed at exit.
class ScratchPath {
 public:
  explicit ScratchPath(const std::string& tag) : m_path(scratch_path(tag)) {}
  ScratchPath(const ScratchPath&) = delete;
  ScratchPath& operator=(const ScratchPath&) = delete;
  ~ScratchPath() {
    std::error_code ignored;  // nothing to report from an exit handler
    std::filesystem::remove_all(m_path, ignored);
  }
  const std::string& path() const noexcept { return m_path; }

 private:
  std::string m_path;
};

inline void write_file(const std::string& path, const std::uint8_t* data, std::size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

}  // namespace a2sgd::fuzz
