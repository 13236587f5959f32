// libFuzzer harness: the IDX reader (plain and gzip data) on arbitrary bytes. Every input must
// either read or raise a2sgd::InvalidArgument; anything else (a crash, a sanitizer report, another
// exception, an allocation beyond libFuzzer's limit) is a finding.
#include "FuzzFile.hpp"

#include <a2sgd/core/Error.hpp>
#include <a2sgd/data/Idx.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const a2sgd::fuzz::ScratchPath scratch("idx");
  const std::string& path = scratch.path();
  a2sgd::fuzz::write_file(path, data, size);
  try {
    const auto array = a2sgd::data::read_idx(path);
    std::size_t total = 1;
    for (const auto d : array.dims) total *= d;
    if (array.data.size() != total) __builtin_trap();  // a read that does not hold what it claims
  } catch (const a2sgd::InvalidArgument&) {
  }
  return 0;
}
