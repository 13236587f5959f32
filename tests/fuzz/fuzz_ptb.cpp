// libFuzzer harness: the Penn Treebank reader. The input is split at its first two 0xff bytes into
// ptb.train.txt, ptb.valid.txt and ptb.test.txt (missing parts: empty files). Every input must
// either load or raise a2sgd::InvalidArgument.
#include "FuzzFile.hpp"

#include <a2sgd/core/Error.hpp>
#include <a2sgd/data/Ptb.hpp>

#include <algorithm>
#include <filesystem>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const a2sgd::fuzz::ScratchPath scratch("ptb");
  static const std::string& dir = []() -> const std::string& {
    std::filesystem::create_directories(scratch.path());
    return scratch.path();
  }();
  const std::uint8_t* end = data + size;
  const std::uint8_t* cut1 = std::find(data, end, 0xff);
  const std::uint8_t* cut2 = cut1 == end ? end : std::find(cut1 + 1, end, 0xff);
  const std::uint8_t* start2 = cut1 == end ? end : cut1 + 1;
  const std::uint8_t* start3 = cut2 == end ? end : cut2 + 1;
  a2sgd::fuzz::write_file(dir + "/ptb.train.txt", data, static_cast<std::size_t>(cut1 - data));
  a2sgd::fuzz::write_file(dir + "/ptb.valid.txt", start2, static_cast<std::size_t>(cut2 - start2));
  a2sgd::fuzz::write_file(dir + "/ptb.test.txt", start3, static_cast<std::size_t>(end - start3));
  try {
    const auto corpus = a2sgd::data::load_ptb(dir);
    const auto words = static_cast<std::int64_t>(corpus.vocab.size());
    for (const auto* split : {&corpus.train, &corpus.valid, &corpus.test})
      for (const auto t : *split)
        if (t < 0 || t >= words) __builtin_trap();  // a token outside the vocabulary
  } catch (const a2sgd::InvalidArgument&) {
  }
  return 0;
}
