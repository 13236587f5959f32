#pragma once
/// @file Mlp.hpp
/// Multi-layer perceptron classifier: Linear + ReLU hidden layers, a linear output layer and
/// softmax cross-entropy; parameters and gradients are slices of a ParameterStore.

#include <a2sgd/core/ParameterStore.hpp>
#include <a2sgd/core/Types.hpp>
#include <a2sgd/nn/Linear.hpp>
#include <a2sgd/nn/Model.hpp>
#include <a2sgd/nn/SoftmaxCrossEntropy.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace a2sgd::nn {

enum class InitScheme {
  he,     ///< W ~ N(0, 2 / fan_in) (ReLU layers); biases 0
  xavier  ///< W ~ U(-a, a), a = sqrt(6 / (fan_in + fan_out)); biases 0
};
InitScheme parse_init_scheme(std::string_view name);
std::string to_string(InitScheme scheme);

struct MlpConfig {
  Index inputs = 784;
  std::vector<Index> hidden = {256, 256};
  Index classes = 10;
  InitScheme init = InitScheme::he;  ///< used by Model::initialize(params, seed)
};

class Mlp final : public Model {
 public:
  /// Registers "fc<i>.weight" [out, in] and "fc<i>.bias" [out] for every layer in `store`
  /// (which must not be allocated yet and must outlive the model).
  Mlp(const MlpConfig& config, ParameterStore& store);

  const MlpConfig& config() const noexcept { return m_config; }
  /// E.g. "mlp 784-256-256-10".
  std::string describe() const override;

  /// Deterministic initialisation of `params` from `seed` (identical for every rank and build).
  void initialize(const FloatView& params, std::uint64_t seed, InitScheme scheme) const;
  /// The same with the configuration's scheme.
  void initialize(const FloatView& params, std::uint64_t seed) const override {
    initialize(params, seed, m_config.init);
  }

  /// Allocates activation buffers for mini-batches of up to `max_batch` rows.
  void reserve(Index max_batch);
  void reserve(const BatchShape& train, const BatchShape& eval) override { reserve(std::max(train.rows, eval.rows)); }

  /// Forward and backward pass: overwrites `grads` with the gradient of the mean loss over the
  /// batch; returns the summed loss and the correct count. Each layer's weight and bias are
  /// reported to `context` as one group, the last layer first (gradient_order()).
  LossResult forward_backward(const ExecutionSpace& exec, const FloatView& params, const FloatView& grads,
                              const ConstMatrix& x, const ConstLabelView& labels, const StepContext& context = {});

  /// Forward pass only.
  LossResult evaluate(const ExecutionSpace& exec, const FloatView& params, const ConstMatrix& x,
                      const ConstLabelView& labels);

  /// Model interface: batch.features and batch.labels (the context's listener only: no dropout).
  LossResult forward_backward(const ExecutionSpace& exec, const FloatView& params, const FloatView& grads,
                              const Batch& batch, const StepContext& context) override {
    return forward_backward(exec, params, grads, batch.features, batch.labels, context);
  }
  /// Per layer, last first: its weight and bias (adjacent in the buffer).
  std::vector<GradientRange> gradient_order() const override;
  LossResult evaluate(const ExecutionSpace& exec, const FloatView& params, const Batch& batch) override {
    return evaluate(exec, params, batch.features, batch.labels);
  }

 private:
  std::size_t layers() const noexcept { return m_weights.size(); }
  Matrix rows(const Matrix& m, Index batch) const;
  /// Layer l's weight and bias in the flat buffer (the constructor adds them one after the other).
  GradientRange layer_range(std::size_t l) const;
  void forward(const ExecutionSpace& exec, const FloatView& params, const ConstMatrix& x, Index batch);

  MlpConfig m_config;
  const ParameterStore* m_store;
  std::vector<std::size_t> m_weights;  // tensor indices in the store
  std::vector<std::size_t> m_biases;
  std::vector<Matrix> m_out;   // output of each layer (post-activation)
  std::vector<Matrix> m_dout;  // gradient w.r.t. each layer's pre-activation
  Index m_capacity = 0;
};

}  // namespace a2sgd::nn
