#include <a2sgd/core/Error.hpp>
#include <a2sgd/core/Random.hpp>
#include <a2sgd/nn/Dropout.hpp>
#include <a2sgd/nn/Embedding.hpp>
#include <a2sgd/nn/Linear.hpp>
#include <a2sgd/nn/LstmLanguageModel.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <utility>

namespace a2sgd::nn {
namespace {

using Range = std::pair<Index, Index>;

// a * b, or an InvalidArgument naming `what` when the product of element counts (times 4 bytes)
// would not fit in size_t.
std::size_t checked_product(const std::vector<Index>& factors, const std::string& what) {
  std::size_t n = sizeof(float);
  for (Index f : factors) {
    const auto u = static_cast<std::size_t>(std::max<Index>(f, 0));
    if (u != 0 && n > std::numeric_limits<std::size_t>::max() / u)
      throw InvalidArgument("lstm-lm: the " + what + " does not fit in memory");
    n *= u;
  }
  return n / sizeof(float);
}

// targets(t C + c) = tokens(t + 1, c): the next token of every prediction, time-major.
void fill_targets(const ExecutionSpace& exec, const ConstTokenMatrix& tokens, const LabelView& targets, Index rows,
                  Index columns) {
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::nn::lstm_lm::targets"),
      Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>(exec, 0, rows),
      KOKKOS_LAMBDA(Index r) { targets(r) = tokens(r / columns + 1, r % columns); });
}

FloatView allocate(const std::string& label, std::size_t n) {
  return FloatView(Kokkos::view_alloc(Kokkos::WithoutInitializing, "a2sgd::nn::lstm_lm::" + label), n);
}

}  // namespace

LstmLanguageModel::LstmLanguageModel(const LstmConfig& config, ParameterStore& store)
    : m_config(config), m_store(&store) {
  const LstmConfig& c = config;
  if (c.vocab < 2 || c.embedding < 1 || c.hidden < 1 || c.layers < 1)
    throw InvalidArgument("lstm-lm: need a vocabulary of at least 2 words and positive widths and layer count (got " +
                          std::to_string(c.vocab) + " words, embedding " + std::to_string(c.embedding) + ", hidden " +
                          std::to_string(c.hidden) + ", " + std::to_string(c.layers) + " layers)");
  if (!(c.dropout >= 0.0f && c.dropout < 1.0f))
    throw InvalidArgument("lstm-lm: dropout " + std::to_string(c.dropout) + " is not in [0, 1)");
  if (c.tie_weights && c.embedding != c.hidden)
    throw InvalidArgument("lstm-lm: tied weights need the embedding width (" + std::to_string(c.embedding) +
                          ") to equal the hidden width (" + std::to_string(c.hidden) + ")");
  m_embedding = store.add("embedding.weight", {c.vocab, c.embedding});
  for (Index l = 0; l < c.layers; ++l) {
    const std::string name = "lstm" + std::to_string(l);
    m_w_ih.push_back(store.add(name + ".weight_ih", {4 * c.hidden, l == 0 ? c.embedding : c.hidden}));
    m_w_hh.push_back(store.add(name + ".weight_hh", {4 * c.hidden, c.hidden}));
    m_bias.push_back(store.add(name + ".bias", {4 * c.hidden}));
  }
  m_decoder_weight = c.tie_weights ? m_embedding : store.add("decoder.weight", {c.vocab, c.hidden});
  m_decoder_bias = store.add("decoder.bias", {c.vocab});
}

std::string LstmLanguageModel::describe() const {
  std::ostringstream out;
  out << "lstm-lm " << m_config.vocab << '-' << m_config.embedding << '-' << m_config.hidden << 'x' << m_config.layers;
  if (m_config.tie_weights) out << " tied";
  return out.str();
}

void LstmLanguageModel::initialize(const FloatView& params, std::uint64_t seed) const {
  auto host = Kokkos::create_mirror_view(params);
  Kokkos::deep_copy(host, 0.0f);
  Rng rng(seed);
  auto fill = [&](std::size_t tensor, double bound) {
    const TensorInfo& t = m_store->info(tensor);
    for (Index i = 0; i < t.size; ++i) host(t.offset + i) = static_cast<float>(bound * (2.0 * rng.uniform() - 1.0));
  };
  fill(m_embedding, m_config.init_range);
  const double k = 1.0 / std::sqrt(static_cast<double>(m_config.hidden));
  for (Index l = 0; l < m_config.layers; ++l) {
    fill(m_w_ih[l], k);
    fill(m_w_hh[l], k);
    fill(m_bias[l], k);
  }
  if (!m_config.tie_weights) fill(m_decoder_weight, m_config.init_range);
  Kokkos::deep_copy(params, host);
}

void LstmLanguageModel::reserve(const BatchShape& train, const BatchShape& eval) {
  if (train.rows < 1 || train.time < 1 || eval.rows < 1 || eval.time < 1)
    throw InvalidArgument("lstm-lm: batch columns and time steps must be positive");
  const LstmConfig& c = m_config;
  const std::size_t train_rows = checked_product({train.rows, train.time}, "training batch");
  const std::size_t eval_rows = checked_product({eval.rows, eval.time}, "evaluation batch");
  const auto rows = static_cast<Index>(std::max(train_rows, eval_rows));
  const Index cols = std::max(train.rows, eval.rows);
  const Index width = std::max(c.embedding, c.hidden);
  // Every buffer's size checked before the first allocation.
  const std::size_t logits = checked_product({rows, c.vocab}, "logits of a batch");
  const std::size_t gates = checked_product({rows, 4, c.hidden}, "gates of a batch");
  const std::size_t states = checked_product({rows + cols, c.hidden}, "states of a batch");
  const std::size_t acts = checked_product({rows, width}, "activations of a batch");
  const std::size_t carried = checked_product({c.layers, 2, train.rows, c.hidden}, "carried state");
  const std::size_t eval_carried = checked_product({c.layers, 2, eval.rows, c.hidden}, "evaluation state");
  m_gates.clear(), m_h.clear(), m_c.clear(), m_dropped.clear();
  for (Index l = 0; l < c.layers; ++l) {
    m_gates.push_back(allocate("gates", gates));
    m_h.push_back(allocate("h", states));
    m_c.push_back(allocate("c", states));
    if (c.dropout > 0.0f) m_dropped.push_back(allocate("dropped", acts));
  }
  m_x0 = allocate("x0", acts);
  m_logits = allocate("logits", logits);
  m_dlogits = allocate("dlogits", checked_product({train.rows, train.time, c.vocab}, "logits of a batch"));
  m_dy_a = allocate("dy_a", acts);
  m_dy_b = allocate("dy_b", acts);
  m_dgates = allocate("dgates", checked_product({train.rows, train.time, 4, c.hidden}, "gates of a batch"));
  m_dh_next = allocate("dh_next", checked_product({train.rows, c.hidden}, "state"));
  m_dc = allocate("dc", checked_product({train.rows, c.hidden}, "state"));
  m_targets = LabelView(Kokkos::view_alloc(Kokkos::WithoutInitializing, "a2sgd::nn::lstm_lm::targets"),
                        static_cast<std::size_t>(rows));
  m_state = FloatView("a2sgd::nn::lstm_lm::state", carried);
  m_eval_state = FloatView("a2sgd::nn::lstm_lm::eval_state", eval_carried);
  m_train = train;
  m_eval = eval;
}

Matrix LstmLanguageModel::buffer(const FloatView& storage, Index rows, Index cols) const {
  return Matrix(storage.data(), static_cast<std::size_t>(rows), static_cast<std::size_t>(cols));
}

LstmWeights LstmLanguageModel::layer_weights(const FloatView& flat, Index layer) const {
  return {m_store->matrix(flat, m_w_ih[layer]), m_store->matrix(flat, m_w_hh[layer]),
          m_store->slice(flat, m_bias[layer])};
}

LstmLanguageModel::Shape LstmLanguageModel::check(const Batch& batch, const BatchShape& capacity,
                                                  const char* what) const {
  if (m_state.extent(0) == 0) throw InvalidArgument("lstm-lm: reserve() was not called");
  const auto steps = static_cast<Index>(batch.tokens.extent(0)) - 1;
  const auto columns = static_cast<Index>(batch.tokens.extent(1));
  if (steps < 1 || steps > capacity.time || columns != capacity.rows)
    throw InvalidArgument(std::string("lstm-lm: ") + what + " batch of " + std::to_string(steps) + " steps x " +
                          std::to_string(columns) + " columns; reserved for up to " + std::to_string(capacity.time) +
                          " steps x exactly " + std::to_string(capacity.rows) + " columns");
  return {steps, columns};
}

LossResult LstmLanguageModel::forward(const ExecutionSpace& exec, const FloatView& params,
                                      const ConstTokenMatrix& tokens, Shape shape, const FloatView& state,
                                      const StepContext* context, bool want_grad) {
  const LstmConfig& c = m_config;
  const Index T = shape.time, C = shape.columns, N = T * C, H = c.hidden;
  const bool drop = context != nullptr && c.dropout > 0.0f;
  const Matrix x0 = buffer(m_x0, N, c.embedding);
  embedding_forward(exec, tokens, T, m_store->matrix(params, m_embedding), x0);
  if (drop) dropout(exec, x0, x0, c.dropout, dropout_key(*context, 0));
  ConstMatrix in = x0;
  for (Index l = 0; l < c.layers; ++l) {
    const LstmActivations act{buffer(m_gates[l], N, 4 * H), buffer(m_h[l], N + C, H), buffer(m_c[l], N + C, H)};
    const Matrix h0(state.data() + (2 * l) * C * H, static_cast<std::size_t>(C), static_cast<std::size_t>(H));
    const Matrix c0(state.data() + (2 * l + 1) * C * H, static_cast<std::size_t>(C), static_cast<std::size_t>(H));
    Kokkos::deep_copy(exec, Kokkos::subview(act.h, Range(0, C), Kokkos::ALL), h0);
    Kokkos::deep_copy(exec, Kokkos::subview(act.c, Range(0, C), Kokkos::ALL), c0);
    lstm_forward(exec, C, in, layer_weights(params, l), act);
    // The state carries into the next batch; the gradient does not (truncated BPTT).
    Kokkos::deep_copy(exec, h0, Kokkos::subview(act.h, Range(N, N + C), Kokkos::ALL));
    Kokkos::deep_copy(exec, c0, Kokkos::subview(act.c, Range(N, N + C), Kokkos::ALL));
    const Matrix out = Kokkos::subview(act.h, Range(C, N + C), Kokkos::ALL);
    if (drop) {
      const Matrix dropped = buffer(m_dropped[l], N, H);
      dropout(exec, out, dropped, c.dropout, dropout_key(*context, static_cast<unsigned>(l + 1)));
      in = dropped;
    } else {
      in = out;
    }
  }
  fill_targets(exec, tokens, m_targets, N, C);
  const Matrix logits = buffer(m_logits, N, c.vocab);
  linear_forward(exec, in, m_store->matrix(params, m_decoder_weight), m_store->slice(params, m_decoder_bias), logits,
                 Activation::none);
  return softmax_cross_entropy(exec, logits, Kokkos::subview(m_targets, Range(0, N)),
                               want_grad ? buffer(m_dlogits, N, c.vocab) : Matrix(), 1.0f / static_cast<float>(N));
}

GradientRange LstmLanguageModel::span(std::initializer_list<std::size_t> tensors) const {
  GradientRange r{std::numeric_limits<Index>::max(), 0};
  for (std::size_t t : tensors) {
    const TensorInfo& info = m_store->info(t);
    r.begin = std::min(r.begin, info.offset);
    r.end = std::max(r.end, info.offset + info.size);
  }
  return r;
}

std::vector<GradientRange> LstmLanguageModel::gradient_order() const {
  std::vector<GradientRange> order;
  if (m_config.tie_weights)
    order.push_back(span({m_decoder_bias}));
  else
    order.push_back(span({m_decoder_weight, m_decoder_bias}));
  for (Index l = m_config.layers; l-- > 0;) {
    const auto i = static_cast<std::size_t>(l);
    order.push_back(span({m_w_ih[i], m_w_hh[i], m_bias[i]}));
  }
  order.push_back(span({m_embedding}));
  return order;
}

LossResult LstmLanguageModel::forward_backward(const ExecutionSpace& exec, const FloatView& params,
                                               const FloatView& grads, const Batch& batch, const StepContext& context) {
  const Shape shape = check(batch, m_train, "training");
  const LossResult r = forward(exec, params, batch.tokens, shape, m_state, &context, true);
  const LstmConfig& c = m_config;
  const Index T = shape.time, C = shape.columns, N = T * C, H = c.hidden;
  const bool drop = c.dropout > 0.0f;
  auto layer_output = [&](Index l) -> ConstMatrix {
    if (drop) return buffer(m_dropped[l], N, H);
    return Kokkos::subview(buffer(m_h[l], N + C, H), Range(C, N + C), Kokkos::ALL);
  };
  // Ping-pong: the gradient of a layer's output in one buffer, of its input in the other.
  FloatView current = m_dy_a, spare = m_dy_b;
  Matrix dy = buffer(current, N, H);
  linear_backward(exec, layer_output(c.layers - 1), buffer(m_dlogits, N, c.vocab),
                  m_store->matrix(params, m_decoder_weight), m_store->matrix(grads, m_decoder_weight),
                  m_store->slice(grads, m_decoder_bias), dy, Activation::none);
  if (m_order.empty()) m_order = gradient_order();  // the store's layout is final by now; kept, not remade per step
  const std::vector<GradientRange>& order = m_order;
  context.gradient_ready(exec, order.front());
  if (drop) dropout(exec, dy, dy, c.dropout, dropout_key(context, static_cast<unsigned>(c.layers)));
  const LstmBackwardScratch scratch{buffer(m_dgates, N, 4 * H), buffer(m_dh_next, C, H), buffer(m_dc, C, H)};
  for (Index l = c.layers; l-- > 0;) {
    const Index in_width = l == 0 ? c.embedding : H;
    const ConstMatrix in = l == 0 ? ConstMatrix(buffer(m_x0, N, c.embedding)) : layer_output(l - 1);
    const LstmActivations act{buffer(m_gates[l], N, 4 * H), buffer(m_h[l], N + C, H), buffer(m_c[l], N + C, H)};
    const Matrix dx = buffer(spare, N, in_width);
    lstm_backward(exec, C, in, layer_weights(params, l), act, dy, scratch, layer_weights(grads, l), dx);
    if (drop) dropout(exec, dx, dx, c.dropout, dropout_key(context, static_cast<unsigned>(l)));
    std::swap(current, spare);
    dy = dx;
    context.gradient_ready(exec, order[static_cast<std::size_t>(c.layers - l)]);
  }
  // Tied: the decoder's GEMM wrote the weight gradient; the embedding's rows add to it.
  const MatrixView grad_embedding = m_store->matrix(grads, m_embedding);
  if (!c.tie_weights) Kokkos::deep_copy(exec, grad_embedding, 0.0f);
  embedding_backward(exec, batch.tokens, T, dy, grad_embedding);
  context.gradient_ready(exec, order.back());
  return r;
}

void LstmLanguageModel::begin_evaluation() {
  Kokkos::deep_copy(m_eval_state, 0.0f);
}

LossResult LstmLanguageModel::evaluate(const ExecutionSpace& exec, const FloatView& params, const Batch& batch) {
  return forward(exec, params, batch.tokens, check(batch, m_eval, "evaluation"), m_eval_state, nullptr, false);
}

void LstmLanguageModel::reset_state() {
  Kokkos::deep_copy(m_state, 0.0f);
}

}  // namespace a2sgd::nn
