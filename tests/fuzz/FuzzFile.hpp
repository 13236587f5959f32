#pragma once
// Shared by the fuzz harnesses: the readers under test take file names, so each input is written
// to a scratch file of this process first.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

#include <unistd.h>

namespace a2sgd::fuzz {

/// A path in $TMPDIR (or /tmp) unique to this process and `tag`.
inline std::string scratch_path(const std::string& tag) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/a2sgd-fuzz-" + std::to_string(::getpid()) + "-" + tag;
}

inline void write_file(const std::string& path, const std::uint8_t* data, std::size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

}  // namespace a2sgd::fuzz
