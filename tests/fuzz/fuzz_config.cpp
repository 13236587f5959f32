// libFuzzer harness: a2sgd-train's option parsing with the input as its --config file. Every input
// must either parse or raise a2sgd::InvalidArgument (what a2sgd-train reports with exit code 2).
#include "../../apps/train/TrainConfig.hpp"
#include "FuzzFile.hpp"

#include <a2sgd/core/Error.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const a2sgd::fuzz::ScratchPath scratch("config.ini");
  std::string path = scratch.path();  // argv holds non-const pointers
  a2sgd::fuzz::write_file(path, data, size);
  std::string program = "a2sgd-train", option = "--config";
  char* argv[] = {program.data(), option.data(), path.data(), nullptr};
  a2sgd::train::TrainConfig config;
  std::string help;
  try {
    a2sgd::train::parse_options(3, argv, config, help);
  } catch (const a2sgd::InvalidArgument&) {
  }
  return 0;
}
