#include <a2sgd/core/Error.hpp>
#include <a2sgd/train/TokenStreamSource.hpp>

#include <algorithm>

namespace a2sgd::train {

TokenStreamSource::Columns TokenStreamSource::to_device(const std::vector<data::Token>& stream, int rank, int world,
                                                        Index batch, const std::string& what) {
  try {
    const auto host = data::batchify(stream, rank, world, batch);
    Columns device("a2sgd::train::tokens_" + what, host.extent(0), host.extent(1));
    Kokkos::deep_copy(device, host);
    return device;
  } catch (const InvalidArgument& e) {
    throw InvalidArgument("the " + what + " text (" + std::to_string(stream.size()) + " tokens) over " +
                          std::to_string(world) + " ranks x " + std::to_string(batch) + " columns: " + e.what());
  }
}

TokenStreamSource::TokenStreamSource(const data::TokenCorpus& corpus, std::string name, int rank, int world,
                                     Index batch, Index eval_batch, Index bptt)
    : m_name(std::move(name)), m_batch(batch), m_eval_batch(eval_batch), m_bptt(bptt) {
  if (batch < 1 || eval_batch < 1 || bptt < 1)
    throw InvalidArgument("batch columns, evaluation columns and time steps per batch must be positive");
  m_train = to_device(corpus.train, rank, world, batch, "training");
  const auto length = static_cast<Index>(m_train.extent(0));
  m_steps_per_epoch = static_cast<std::uint64_t>((length - 1) / bptt);
  if (m_steps_per_epoch == 0)
    throw InvalidArgument(std::to_string(bptt) + " time steps per batch: each of the " + std::to_string(batch) +
                          " training columns of a rank holds only " + std::to_string(length) +
                          " tokens (fewer ranks, columns or time steps)");
  m_eval["valid"] = to_device(corpus.valid, rank, world, eval_batch, "validation");
  m_eval["test"] = to_device(corpus.test, rank, world, eval_batch, "test");
}

nn::Batch TokenStreamSource::train_batch(const ExecutionSpace&, std::uint64_t step) {
  const auto start = static_cast<Index>(step % m_steps_per_epoch) * m_bptt;
  nn::Batch b;
  b.tokens = Kokkos::subview(m_train, std::make_pair(start, start + m_bptt + 1), Kokkos::ALL);
  return b;
}

const TokenStreamSource::Columns& TokenStreamSource::split(const std::string& name) const {
  const auto it = m_eval.find(name);
  if (it == m_eval.end()) throw InvalidArgument("no evaluation split \"" + name + "\" (valid: valid, test)");
  return it->second;
}

Index TokenStreamSource::eval_batches(const std::string& name) const {
  const auto length = static_cast<Index>(split(name).extent(0));
  return (length - 1 + m_bptt - 1) / m_bptt;  // the last window may be shorter
}

nn::Batch TokenStreamSource::eval_batch(const ExecutionSpace&, const std::string& name, Index i) {
  const Columns& columns = split(name);
  const auto length = static_cast<Index>(columns.extent(0));
  const Index start = i * m_bptt;
  nn::Batch b;
  b.tokens = Kokkos::subview(columns, std::make_pair(start, std::min(length, start + m_bptt + 1)), Kokkos::ALL);
  return b;
}

}  // namespace a2sgd::train
