#include <a2sgd/core/Error.hpp>
#include <a2sgd/train/ClassificationSource.hpp>

#include <algorithm>

namespace a2sgd::train {

ClassificationSource::ClassificationSource(data::DatasetPair data, int rank, int world, Index batch, Index eval_batch,
                                           std::uint64_t seed)
    : m_data(std::move(data)),
      m_rank(rank),
      m_world(world),
      m_batch(batch),
      m_eval_batch(eval_batch),
      m_sampler(m_data.train.size(), rank, world, seed) {
  if (batch < 1 || eval_batch < 1) throw InvalidArgument("batch sizes must be positive");
  m_steps_per_epoch = static_cast<std::uint64_t>(m_sampler.shard_size() / batch);
  if (m_steps_per_epoch == 0)
    throw InvalidArgument("batch size " + std::to_string(batch) + " exceeds the " +
                          std::to_string(m_sampler.shard_size()) + " training samples of each rank (" +
                          std::to_string(m_data.train.size()) + " over " + std::to_string(world) + " ranks)");
  m_order = data::IndexView("a2sgd::train::order", static_cast<std::size_t>(m_sampler.shard_size()));
  m_x = Matrix("a2sgd::train::batch_x", static_cast<std::size_t>(batch),
               static_cast<std::size_t>(m_data.train.features()));
  m_y = LabelView("a2sgd::train::batch_y", static_cast<std::size_t>(batch));
}

nn::Batch ClassificationSource::train_batch(const ExecutionSpace& exec, std::uint64_t step) {
  const std::uint64_t epoch = step / m_steps_per_epoch;
  if (epoch != m_order_epoch) {
    // Once per epoch: the shard's order for this epoch, onto the device.
    const auto indices = m_sampler.epoch_indices(epoch);
    auto host = Kokkos::create_mirror_view(m_order);
    for (std::size_t i = 0; i < indices.size(); ++i) host(i) = indices[i];
    Kokkos::deep_copy(exec, m_order, host);
    exec.fence();
    m_order_epoch = epoch;
  }
  const auto position = static_cast<Index>(step % m_steps_per_epoch);
  data::gather_batch(exec, m_data.train, m_order, position * m_batch, m_batch, m_x, m_y);
  nn::Batch b;
  b.features = m_x;
  b.labels = m_y;
  return b;
}

Index ClassificationSource::eval_batches(const std::string&) const {
  const Index n = m_data.test.size();
  const Index part = n * (m_rank + 1) / m_world - n * m_rank / m_world;
  return (part + m_eval_batch - 1) / m_eval_batch;
}

nn::Batch ClassificationSource::eval_batch(const ExecutionSpace&, const std::string&, Index i) {
  const Index n = m_data.test.size();
  const Index begin = n * m_rank / m_world, end = n * (m_rank + 1) / m_world;
  const Index b = begin + i * m_eval_batch;
  const auto range = std::make_pair(b, std::min(end, b + m_eval_batch));
  nn::Batch batch;
  batch.features = Kokkos::subview(m_data.test.images, range, Kokkos::ALL);
  batch.labels = Kokkos::subview(m_data.test.labels, range);
  return batch;
}

}  // namespace a2sgd::train
