#include <a2sgd/core/Error.hpp>
#include <a2sgd/core/ParameterStore.hpp>

#include <limits>
#include <sstream>
#include <utility>

namespace a2sgd {

std::size_t ParameterStore::add(std::string name, std::vector<Index> shape) {
  if (m_size_frozen) throw InvalidArgument("ParameterStore::add(\"" + name + "\"): the store is already allocated");
  if (name.empty()) throw InvalidArgument("ParameterStore::add: empty tensor name");
  for (const auto& t : m_tensors)
    if (t.name == name) throw InvalidArgument("ParameterStore::add: duplicate tensor name \"" + name + "\"");
  if (shape.empty()) throw InvalidArgument("ParameterStore::add(\"" + name + "\"): empty shape");
  Index size = 1;
  for (Index extent : shape) {
    if (extent <= 0)
      throw InvalidArgument("ParameterStore::add(\"" + name + "\"): extent " + std::to_string(extent) +
                            " is not positive");
    if (size > std::numeric_limits<Index>::max() / extent)
      throw InvalidArgument("ParameterStore::add(\"" + name + "\"): size overflows");
    size *= extent;
  }
  m_tensors.push_back(TensorInfo{std::move(name), std::move(shape), m_size, size});
  m_size += size;
  return m_tensors.size() - 1;
}

void ParameterStore::allocate() {
  if (m_size_frozen) throw InvalidArgument("ParameterStore::allocate: already allocated");
  if (m_tensors.empty()) throw InvalidArgument("ParameterStore::allocate: no tensors were added");
  m_params = FloatView("a2sgd::params", static_cast<std::size_t>(m_size));
  m_grads = FloatView("a2sgd::grads", static_cast<std::size_t>(m_size));
  m_size_frozen = true;
}

void ParameterStore::require_allocated(const char* what) const {
  if (!m_size_frozen) throw InvalidArgument(std::string("ParameterStore::") + what + ": call allocate() first");
}

const TensorInfo& ParameterStore::info(std::size_t index) const {
  if (index >= m_tensors.size())
    throw InvalidArgument("ParameterStore: tensor index " + std::to_string(index) + " out of range (" +
                          std::to_string(m_tensors.size()) + " tensors)");
  return m_tensors[index];
}

std::size_t ParameterStore::index_of(std::string_view name) const {
  for (std::size_t i = 0; i < m_tensors.size(); ++i)
    if (m_tensors[i].name == name) return i;
  throw InvalidArgument("ParameterStore: no tensor named \"" + std::string(name) + "\"");
}

const TensorInfo& ParameterStore::info(std::string_view name) const {
  return m_tensors[index_of(name)];
}

const FloatView& ParameterStore::params() const {
  require_allocated("params");
  return m_params;
}

const FloatView& ParameterStore::grads() const {
  require_allocated("grads");
  return m_grads;
}

void ParameterStore::require_layout(const FloatView& flat) const {
  if (static_cast<Index>(flat.extent(0)) != m_size)
    throw InvalidArgument("ParameterStore: buffer has " + std::to_string(flat.extent(0)) + " values, the layout has " +
                          std::to_string(m_size));
}

FloatView ParameterStore::slice(const FloatView& flat, std::size_t index) const {
  require_layout(flat);
  const TensorInfo& t = info(index);
  return FloatView(flat,
                   std::make_pair(static_cast<std::size_t>(t.offset), static_cast<std::size_t>(t.offset + t.size)));
}

FloatView ParameterStore::param(std::size_t index) const {
  return slice(params(), index);
}
FloatView ParameterStore::grad(std::size_t index) const {
  return slice(grads(), index);
}

MatrixView ParameterStore::matrix(const FloatView& flat, std::size_t index) const {
  require_layout(flat);
  const TensorInfo& t = info(index);
  if (t.shape.size() != 2)
    throw InvalidArgument("ParameterStore: tensor \"" + t.name + "\" has rank " + std::to_string(t.shape.size()) +
                          ", not 2");
  return MatrixView(flat.data() + t.offset, static_cast<std::size_t>(t.shape[0]), static_cast<std::size_t>(t.shape[1]));
}

MatrixView ParameterStore::param_matrix(std::size_t index) const {
  return matrix(params(), index);
}
MatrixView ParameterStore::grad_matrix(std::size_t index) const {
  return matrix(grads(), index);
}

void ParameterStore::zero_grads(const ExecutionSpace& exec) const {
  Kokkos::deep_copy(exec, grads(), 0.0f);
}

std::string ParameterStore::describe() const {
  std::ostringstream out;
  for (std::size_t i = 0; i < m_tensors.size(); ++i) {
    if (i) out << ';';
    out << m_tensors[i].name << '[';
    for (std::size_t d = 0; d < m_tensors[i].shape.size(); ++d) out << (d ? "," : "") << m_tensors[i].shape[d];
    out << ']';
  }
  return out.str();
}

}  // namespace a2sgd
