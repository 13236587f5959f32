#pragma once
/// @file ModelRegistry.hpp
/// The models a2sgd-train (and any program) can train by name, each declared once, by its own
/// source file: its options, the datasets it trains on and how its data source is built, and the
/// training settings that suit it. docs/extending.md says how to add one.
///
/// A model registers itself with
///
///     A2SGD_REGISTER_MODEL(mymodel) {
///       ModelKind k;
///       k.summary = "...";
///       k.options = {...};
///       k.datasets = {"..."};
///       k.build = [](const ModelContext& c, ParameterStore& store) { ... return ModelProblem{...}; };
///       return k;
///     }
///
/// in a source file listed in src/CMakeLists.txt's A2SGD_MODEL_SOURCES.

#include <a2sgd/comm/Communicator.hpp>
#include <a2sgd/core/Options.hpp>
#include <a2sgd/core/ParameterStore.hpp>
#include <a2sgd/nn/Model.hpp>
#include <a2sgd/optim/LrSchedule.hpp>
#include <a2sgd/optim/Optimizer.hpp>
#include <a2sgd/train/DataSource.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace a2sgd::train {

/// What a model and its data are built from.
struct ModelContext {
  const Communicator& comm;
  const OptionValues& options;  ///< the model's own options
  std::string dataset;          ///< one of the model's datasets
  std::string data_dir;         ///< "" for the dataset's default location
  Index batch_size = 0;         ///< per rank (samples, or token columns)
  Index eval_batch = 0;
  std::uint64_t seed = 1;
};

/// A model over a parameter store, and the data it trains on.
struct ModelProblem {
  std::unique_ptr<DataSource> data;
  std::unique_ptr<nn::Model> model;
  std::string sizes;  ///< the data's sizes, for a banner ("60000 train / 10000 test samples")
};

/// Training settings that suit a model, used where the user gave none.
struct TrainingDefaults {
  Index batch_size = 64;
  Index eval_batch = 1000;
  double clip = 0.0;  ///< global-norm clipping (0: off)
  LrScheduleKind schedule = LrScheduleKind::constant;
  /// The optimizer for an exchange method, and its learning rate.
  std::function<OptimizerKind(const std::string& method)> optimizer;
  std::function<double(const std::string& method, OptimizerKind kind)> lr;
  /// The learning rate's linear warm-up in steps for an exchange method and optimizer (empty: none).
  std::function<std::uint64_t(const std::string& method, OptimizerKind kind)> lr_warmup_steps;
  /// Exchange options by method (method -> option -> value) that make the methods train this
  /// model well (docs/convergence.md for A2SGD's).
  std::map<std::string, std::map<std::string, std::string>> exchange_options;
  /// The averaging policy's options (averaging_option_specs()) for an exchange method and
  /// optimizer, likewise (empty: none; an application leaves the outer optimizer's out where
  /// the user asked for no periodic average).
  std::function<std::map<std::string, std::string>(const std::string& method, OptimizerKind kind)> averaging;
};

/// A registered model.
struct ModelKind {
  std::string name;     ///< set by the registry: the registration's name
  std::string summary;  ///< one line
  std::vector<OptionSpec> options;
  std::vector<std::string> datasets;  ///< the datasets it trains on; the first is the default
  TrainingDefaults defaults;
  /// Optional: throws OptionError for option values it cannot take, without loading data.
  std::function<void(const OptionValues&)> check_options;
  /// Loads the data (collective errors: every rank throws) and registers the model's tensors in
  /// `store` (not yet allocated).
  std::function<ModelProblem(const ModelContext&, ParameterStore& store)> build;
};

/// Every registered model, in the build's order (src/CMakeLists.txt).
const std::vector<ModelKind>& model_registry();

/// The model of that name; InvalidArgument listing the valid names otherwise.
const ModelKind& model_kind(const std::string& name);

/// A model's options at their defaults, ready to set().
OptionValues default_options(const ModelKind& kind);

}  // namespace a2sgd::train

/// Defines the registration of model `id` (see the file comment).
#define A2SGD_REGISTER_MODEL(id) ::a2sgd::train::ModelKind a2sgd_registered_model_##id()
