#pragma once
/// @file LstmLanguageModel.hpp
/// Word-level LSTM language model (the paper's PTB model): embedding, a stack of LSTM layers
/// trained with truncated back-propagation through time, dropout, a linear decoder (optionally
/// sharing the embedding's weights) and softmax cross-entropy over the vocabulary.

#include <a2sgd/core/ParameterStore.hpp>
#include <a2sgd/nn/Lstm.hpp>
#include <a2sgd/nn/Model.hpp>

#include <string>
#include <vector>

namespace a2sgd::nn {

struct LstmConfig {
  Index vocab = 10000;
  Index embedding = 200;  ///< embedding width (= hidden when the weights are tied)
  Index hidden = 200;
  Index layers = 2;
  float dropout = 0.0f;      ///< probability, on the embedding output and every layer's output
  bool tie_weights = false;  ///< decoder weight = embedding weight (needs embedding == hidden)
  float init_range = 0.1f;   ///< embedding and decoder weights ~ U(-r, r)
};

/// Tensors: "embedding.weight" [V, E]; per layer l "lstm<l>.weight_ih" [4H, in],
/// "lstm<l>.weight_hh" [4H, H], "lstm<l>.bias" [4H] (one bias: PyTorch's b_ih + b_hh); and,
/// unless tied, "decoder.weight" [V, H]; "decoder.bias" [V].
///
/// A training batch is batch.tokens [T + 1, C]: C independent columns of the token stream, inputs
/// rows 0..T-1, targets rows 1..T; the loss is the mean over the T C predictions. The hidden and
/// cell states of the last step carry into the next batch (state(): per rank, checkpointed) but
/// no gradient flows across the batch boundary. Evaluation has its own carried state, reset by
/// begin_evaluation().
class LstmLanguageModel final : public Model {
 public:
  LstmLanguageModel(const LstmConfig& config, ParameterStore& store);

  const LstmConfig& config() const noexcept { return m_config; }
  /// E.g. "lstm-lm 10000-200x2 tied dropout 0.2".
  std::string describe() const override;
  /// LSTM tensors ~ U(-1/sqrt(H), 1/sqrt(H)) (PyTorch's default), embedding and decoder weights
  /// ~ U(-init_range, init_range), decoder bias 0.
  void initialize(const FloatView& params, std::uint64_t seed) const override;
  void reserve(const BatchShape& train, const BatchShape& eval) override;
  LossResult forward_backward(const ExecutionSpace& exec, const FloatView& params, const FloatView& grads,
                              const Batch& batch, const StepContext& context) override;
  /// The decoder bias (and the decoder weight when untied), then each LSTM layer, last first, then
  /// the embedding (with tied weights also the decoder's, which the embedding's rows finish).
  std::vector<GradientRange> gradient_order() const override;
  void begin_evaluation() override;
  LossResult evaluate(const ExecutionSpace& exec, const FloatView& params, const Batch& batch) override;
  /// "lstm_state": [layers][h, c][columns][H] of the training columns.
  std::vector<NamedView> state() const override { return {{"lstm_state", m_state, StateMerge::mean}}; }
  void reset_state() override;

 private:
  struct Shape {
    Index time, columns;
  };
  Shape check(const Batch& batch, const BatchShape& capacity, const char* what) const;
  Matrix buffer(const FloatView& storage, Index rows, Index cols) const;
  LstmWeights layer_weights(const FloatView& flat, Index layer) const;
  /// The flat-buffer range spanned by `tensors` (adjacent in the store, as the constructor adds them).
  GradientRange span(std::initializer_list<std::size_t> tensors) const;
  /// The forward pass from `state` (and into it); dropout when `context` is given.
  LossResult forward(const ExecutionSpace& exec, const FloatView& params, const ConstTokenMatrix& tokens, Shape shape,
                     const FloatView& state, const StepContext* context, bool want_grad);

  LstmConfig m_config;
  const ParameterStore* m_store;
  std::size_t m_embedding = 0, m_decoder_weight = 0, m_decoder_bias = 0;
  std::vector<std::size_t> m_w_ih, m_w_hh, m_bias;
  BatchShape m_train{}, m_eval{};
  FloatView m_state, m_eval_state;
  // Activations of the largest batch: per layer gates, h, c, and the dropped-out layer outputs.
  std::vector<FloatView> m_gates, m_h, m_c, m_dropped;
  FloatView m_x0;  // embedding output
  FloatView m_logits, m_dlogits;
  FloatView m_dy_a, m_dy_b;  // ping-pong gradients of layer inputs/outputs
  FloatView m_dgates, m_dh_next, m_dc;
  LabelView m_targets;
  std::vector<GradientRange> m_order;  // gradient_order(), made by the first training step
};

}  // namespace a2sgd::nn
