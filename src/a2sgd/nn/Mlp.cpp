#include <a2sgd/core/Error.hpp>
#include <a2sgd/core/Random.hpp>
#include <a2sgd/nn/Mlp.hpp>

#include <cmath>
#include <limits>
#include <sstream>

namespace a2sgd::nn {

InitScheme parse_init_scheme(std::string_view name) {
  if (name == "he") return InitScheme::he;
  if (name == "xavier") return InitScheme::xavier;
  throw InvalidArgument("unknown initialisation \"" + std::string(name) + "\" (valid: he, xavier)");
}

std::string to_string(InitScheme scheme) {
  return scheme == InitScheme::he ? "he" : "xavier";
}

Mlp::Mlp(const MlpConfig& config, ParameterStore& store) : m_config(config), m_store(&store) {
  if (config.inputs < 1 || config.classes < 2)
    throw InvalidArgument("mlp: need at least 1 input and 2 classes (got " + std::to_string(config.inputs) + ", " +
                          std::to_string(config.classes) + ")");
  std::vector<Index> widths{config.inputs};
  for (Index h : config.hidden) {
    if (h < 1) throw InvalidArgument("mlp: hidden layer width " + std::to_string(h) + " is not positive");
    widths.push_back(h);
  }
  widths.push_back(config.classes);
  for (std::size_t l = 0; l + 1 < widths.size(); ++l) {
    const std::string name = "fc" + std::to_string(l + 1);
    m_weights.push_back(store.add(name + ".weight", {widths[l + 1], widths[l]}));
    m_biases.push_back(store.add(name + ".bias", {widths[l + 1]}));
  }
}

std::string Mlp::describe() const {
  std::ostringstream out;
  out << "mlp " << m_config.inputs;
  for (Index h : m_config.hidden) out << '-' << h;
  out << '-' << m_config.classes;
  return out.str();
}

void Mlp::initialize(const FloatView& params, std::uint64_t seed, InitScheme scheme) const {
  auto host = Kokkos::create_mirror_view(params);
  Kokkos::deep_copy(host, 0.0f);
  Rng rng(seed);
  for (std::size_t l = 0; l < layers(); ++l) {
    const TensorInfo& w = m_store->info(m_weights[l]);
    const double fan_out = static_cast<double>(w.shape[0]), fan_in = static_cast<double>(w.shape[1]);
    const double std_he = std::sqrt(2.0 / fan_in);
    const double bound = std::sqrt(6.0 / (fan_in + fan_out));
    for (Index i = 0; i < w.size; ++i)
      host(w.offset + i) =
          static_cast<float>(scheme == InitScheme::he ? std_he * rng.normal() : bound * (2.0 * rng.uniform() - 1.0));
  }
  Kokkos::deep_copy(params, host);
}

void Mlp::reserve(Index max_batch) {
  if (max_batch < 1) throw InvalidArgument("mlp: batch size must be positive");
  if (max_batch <= m_capacity) return;
  for (std::size_t l = 0; l < layers(); ++l) {
    // rows x width x 4 bytes must not wrap around (Kokkos would allocate the wrapped size).
    const auto width = static_cast<std::size_t>(m_store->info(m_weights[l]).shape[0]);
    if (width > 0 &&
        static_cast<std::size_t>(max_batch) > std::numeric_limits<std::size_t>::max() / sizeof(float) / width)
      throw InvalidArgument("mlp: a batch of " + std::to_string(max_batch) + " rows of " + std::to_string(width) +
                            " activations does not fit in memory");
  }
  m_out.clear();
  m_dout.clear();
  for (std::size_t l = 0; l < layers(); ++l) {
    const auto width = static_cast<std::size_t>(m_store->info(m_weights[l]).shape[0]);
    m_out.emplace_back(Kokkos::view_alloc(Kokkos::WithoutInitializing, "a2sgd::nn::out" + std::to_string(l)),
                       static_cast<std::size_t>(max_batch), width);
    m_dout.emplace_back(Kokkos::view_alloc(Kokkos::WithoutInitializing, "a2sgd::nn::dout" + std::to_string(l)),
                        static_cast<std::size_t>(max_batch), width);
  }
  m_capacity = max_batch;
}

Matrix Mlp::rows(const Matrix& m, Index batch) const {
  return Kokkos::subview(m, std::make_pair(Index(0), batch), Kokkos::ALL);
}

void Mlp::forward(const ExecutionSpace& exec, const FloatView& params, const ConstMatrix& x, Index batch) {
  if (batch > m_capacity)
    throw InvalidArgument("mlp: batch of " + std::to_string(batch) + " rows exceeds the reserved " +
                          std::to_string(m_capacity));
  if (static_cast<Index>(x.extent(1)) != m_config.inputs)
    throw InvalidArgument("mlp: input has " + std::to_string(x.extent(1)) + " features, the model expects " +
                          std::to_string(m_config.inputs));
  ConstMatrix in = x;
  for (std::size_t l = 0; l < layers(); ++l) {
    const Matrix out = rows(m_out[l], batch);
    linear_forward(exec, in, m_store->matrix(params, m_weights[l]), m_store->slice(params, m_biases[l]), out,
                   l + 1 < layers() ? Activation::relu : Activation::none);
    in = out;
  }
}

LossResult Mlp::evaluate(const ExecutionSpace& exec, const FloatView& params, const ConstMatrix& x,
                         const ConstLabelView& labels) {
  const auto batch = static_cast<Index>(x.extent(0));
  forward(exec, params, x, batch);
  return softmax_cross_entropy(exec, rows(m_out.back(), batch), labels, Matrix(), 0.0f);
}

std::vector<GradientRange> Mlp::gradient_order() const {
  std::vector<GradientRange> order;
  for (std::size_t l = layers(); l-- > 0;) order.push_back(layer_range(l));
  return order;
}

GradientRange Mlp::layer_range(std::size_t l) const {
  const TensorInfo& w = m_store->info(m_weights[l]);
  const TensorInfo& b = m_store->info(m_biases[l]);
  return {std::min(w.offset, b.offset), std::max(w.offset + w.size, b.offset + b.size)};
}

LossResult Mlp::forward_backward(const ExecutionSpace& exec, const FloatView& params, const FloatView& grads,
                                 const ConstMatrix& x, const ConstLabelView& labels, const StepContext& context) {
  const auto batch = static_cast<Index>(x.extent(0));
  forward(exec, params, x, batch);
  const LossResult r = softmax_cross_entropy(exec, rows(m_out.back(), batch), labels, rows(m_dout.back(), batch),
                                             1.0f / static_cast<float>(batch));
  for (std::size_t l = layers(); l-- > 0;) {
    const ConstMatrix in = l > 0 ? ConstMatrix(rows(m_out[l - 1], batch)) : x;
    // The input layer's gradient is not needed: skip that GEMM.
    const Matrix din = l > 0 ? rows(m_dout[l - 1], batch) : Matrix();
    linear_backward(exec, in, rows(m_dout[l], batch), m_store->matrix(params, m_weights[l]),
                    m_store->matrix(grads, m_weights[l]), m_store->slice(grads, m_biases[l]), din,
                    l > 0 ? Activation::relu : Activation::none);
    context.gradient_ready(exec, layer_range(l));
  }
  return r;
}

}  // namespace a2sgd::nn
