#pragma once
/// @file Model.hpp
/// What a2sgd's training loop needs from a model: its tensors (registered in a ParameterStore at
/// construction), a seeded initialisation, forward+backward on a batch, evaluation, and the
/// per-rank state that must survive a checkpoint. Mlp and LstmLanguageModel implement it; a user's
/// model does too (examples/cpp/custom_model.cpp).

#include <a2sgd/core/GradientListener.hpp>
#include <a2sgd/core/Types.hpp>
#include <a2sgd/nn/SoftmaxCrossEntropy.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace a2sgd::nn {

/// Token ids of a language-model batch, indexed (time, column); any strides.
using ConstTokenMatrix = Kokkos::View<const std::int32_t**, Kokkos::LayoutStride, MemorySpace>;

/// One mini-batch. A model reads the members it understands and ignores the others.
struct Batch {
  ConstMatrix features;     ///< [rows, features]: inputs of dense models, one sample per row
  ConstLabelView labels;    ///< [rows]: the class of each row
  ConstTokenMatrix tokens;  ///< [time + 1, columns]: inputs are rows 0..time-1, targets rows 1..time
};

/// The largest batches a model must hold buffers for (reserve()).
struct BatchShape {
  Index rows = 0;  ///< samples (dense models) or columns (sequence models)
  Index time = 1;  ///< time steps per batch (sequence models)
};

/// Where a training step is: keys the model's random streams (dropout), so that a restarted run
/// draws the same numbers as an uninterrupted one.
struct StepContext {
  std::uint64_t seed = 0;
  std::uint64_t step = 0;
  int rank = 0;
  /// Told of each group of Model::gradient_order() as the backward pass finishes it (the exchange,
  /// which then starts that bucket's collective); none: nobody listens.
  GradientListener* gradient = nullptr;

  /// Reports `range` final to the listener, if any.
  void gradient_ready(const ExecutionSpace& exec, GradientRange range) const {
    if (gradient) gradient->gradient_ready(exec, range);
  }
};

class Model {
 public:
  virtual ~Model() = default;
  Model() = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  /// A stable one-line description, e.g. "mlp 784-256-256-10"; stored in checkpoints.
  virtual std::string describe() const = 0;

  /// Deterministic initialisation of `params` from `seed` (the same on every rank and build).
  virtual void initialize(const FloatView& params, std::uint64_t seed) const = 0;

  /// Allocates the buffers of the largest training and evaluation batches (and the per-rank
  /// state of sequence models, whose shape follows the batch's). Throws InvalidArgument when
  /// they cannot fit in memory.
  virtual void reserve(const BatchShape& train, const BatchShape& eval) = 0;

  /// Forward and backward pass of one training batch: overwrites `grads` with the gradient of the
  /// mean loss over the batch's predictions; returns the summed loss, the correct count and the
  /// number of predictions.
  virtual LossResult forward_backward(const ExecutionSpace& exec, const FloatView& params, const FloatView& grads,
                                      const Batch& batch, const StepContext& context) = 0;

  /// The groups of gradient values that forward_backward() finishes one after the other, in that
  /// order: it reports each through StepContext::gradient_ready() as soon as nothing writes it
  /// again, so that the exchange can overlap their communication with the rest of the backward
  /// pass. The groups cover the gradient exactly once. Empty (the default): the model reports
  /// nothing and the exchange starts after the backward pass.
  virtual std::vector<GradientRange> gradient_order() const { return {}; }

  /// Starts an evaluation pass (sequence models reset their evaluation state).
  virtual void begin_evaluation() {}

  /// Forward pass of one evaluation batch (no dropout), in order after begin_evaluation().
  virtual LossResult evaluate(const ExecutionSpace& exec, const FloatView& params, const Batch& batch) = 0;

  /// Per-rank training state carried from one batch to the next (an LSTM's hidden and cell
  /// state), checkpointed with the parameters. Empty for stateless models.
  virtual std::vector<NamedView> state() const { return {}; }

  /// Sets the carried state to its initial value (an elastic restart: the old ranks' states do
  /// not belong to the new ranks' data).
  virtual void reset_state() {}
};

}  // namespace a2sgd::nn
