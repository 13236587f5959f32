#include <a2sgd/compress/DenseExchange.hpp>

namespace a2sgd {

DenseExchange::DenseExchange(const Communicator& comm, Index n, const CommonExchangeOptions& common,
                             const ExecutionSpace& exec)
    : Exchange(comm, n, exec, common, "dense") {}

std::vector<std::pair<std::string, std::string>> DenseExchange::options() const {
  return {};
}

void DenseExchange::do_step(const FloatView& params, const FloatView& grad, Optimizer& opt, double lr,
                            StepStats& stats) {
  allreduce_sum(grad, stats);
  // Dividing by p happens inside the optimizer kernel: one pass instead of two.
  apply_dense(params, grad, opt, lr, 1.0f / static_cast<float>(comm().size()), stats);
}

}  // namespace a2sgd
