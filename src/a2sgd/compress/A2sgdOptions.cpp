#include <a2sgd/compress/A2sgdOptions.hpp>
#include <a2sgd/core/Error.hpp>

namespace a2sgd {

GlobalAveraging parse_global_averaging(std::string_view name) {
  if (name == "mean") return GlobalAveraging::mean;
  if (name == "weighted") return GlobalAveraging::weighted;
  throw InvalidArgument("unknown A2SGD global averaging \"" + std::string(name) + "\" (valid: mean, weighted)");
}

ResidualReference parse_residual_reference(std::string_view name) {
  if (name == "local") return ResidualReference::local;
  if (name == "global") return ResidualReference::global;
  throw InvalidArgument("unknown A2SGD residual reference \"" + std::string(name) + "\" (valid: local, global)");
}

ZeroGradient parse_zero_gradient(std::string_view name) {
  if (name == "move") return ZeroGradient::move;
  if (name == "hold") return ZeroGradient::hold;
  throw InvalidArgument("unknown A2SGD zero-gradient treatment \"" + std::string(name) + "\" (valid: move, hold)");
}

std::string to_string(ZeroGradient v) {
  return v == ZeroGradient::move ? "move" : "hold";
}

Granularity parse_granularity(std::string_view name) {
  if (name == "model") return Granularity::model;
  if (name == "layer") return Granularity::layer;
  throw InvalidArgument("unknown A2SGD granularity \"" + std::string(name) + "\" (valid: model, layer)");
}

std::string to_string(Granularity v) {
  return v == Granularity::model ? "model" : "layer";
}

std::string to_string(GlobalAveraging v) {
  return v == GlobalAveraging::mean ? "mean" : "weighted";
}
std::string to_string(ResidualReference v) {
  return v == ResidualReference::local ? "local" : "global";
}

}  // namespace a2sgd
