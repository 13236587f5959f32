// Library example: train your own model with a2sgd's training loop (a2sgd::train::Trainer).
//
// A model implements a2sgd::nn::Model (its tensors, initialisation, forward + backward), a data
// source implements a2sgd::train::DataSource (this rank's batches); the Trainer does the rest:
// exchange (here A2SGD), optimizer, evaluation of a replica and of the averaged model,
// checkpoints and stop signals. This one fits a linear regression y = x w + b with squared loss.
// Run:
//   mpirun -np 2 a2sgd-example-custom-model --method a2sgd
#include "common/AppMain.hpp"
#include "common/OptionErrors.hpp"

#include <a2sgd/a2sgd.hpp>

#include <boost/program_options.hpp>

#include <cmath>
#include <cstdio>
#include <iostream>

namespace po = boost::program_options;
using namespace a2sgd;

namespace {

// Loss sum of y = x w + b against the targets in x's last column, (1/2)(y - t)^2 per row, and,
// when gw is not empty, the gradient of the mean loss: one pass over the rows, the gradient
// accumulated with atomics (kept short for the example; a real model would use GEMMs, and atomics
// make the summation order, hence the last bits, vary between runs on threaded backends).
double squared_loss(const ExecutionSpace& exec, const ConstMatrix& x, const ConstFloatView& w, const ConstFloatView& b,
                    const FloatView& gw, const FloatView& gb) {
  const auto rows = static_cast<Index>(x.extent(0)), cols = static_cast<Index>(x.extent(1));
  const bool want_grad = gw.extent(0) > 0;
  const float scale = 1.0f / static_cast<float>(rows);
  double loss = 0.0;
  Kokkos::parallel_reduce(
      "example::linear_regression", Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>(exec, 0, rows),
      KOKKOS_LAMBDA(Index r, double& sum) {
        float y = b(0);
        for (Index c = 0; c + 1 < cols; ++c) y += x(r, c) * w(c);
        const float d = y - x(r, cols - 1);
        sum += 0.5 * static_cast<double>(d) * d;
        if (want_grad) {
          for (Index c = 0; c + 1 < cols; ++c) Kokkos::atomic_add(&gw(c), d * x(r, c) * scale);
          Kokkos::atomic_add(&gb(0), d * scale);
        }
      },
      loss);
  return loss;
}

// y = x w + b. Tensors "linear.weight" [features], "linear.bias" [1].
class LinearRegression final : public nn::Model {
 public:
  LinearRegression(Index features, ParameterStore& store) : m_features(features), m_store(&store) {
    m_weight = store.add("linear.weight", {features});
    m_bias = store.add("linear.bias", {1});
  }
  std::string describe() const override { return "linear-regression " + std::to_string(m_features); }
  void initialize(const FloatView& params, std::uint64_t) const override { Kokkos::deep_copy(params, 0.0f); }
  void reserve(const nn::BatchShape&, const nn::BatchShape&) override {}

  nn::LossResult forward_backward(const ExecutionSpace& exec, const FloatView& params, const FloatView& grads,
                                  const nn::Batch& batch, const nn::StepContext&) override {
    Kokkos::deep_copy(exec, grads, 0.0f);
    return result(squared_loss(exec, batch.features, m_store->slice(params, m_weight), m_store->slice(params, m_bias),
                               m_store->slice(grads, m_weight), m_store->slice(grads, m_bias)),
                  batch);
  }
  nn::LossResult evaluate(const ExecutionSpace& exec, const FloatView& params, const nn::Batch& batch) override {
    return result(squared_loss(exec, batch.features, m_store->slice(params, m_weight), m_store->slice(params, m_bias),
                               FloatView(), FloatView()),
                  batch);
  }

 private:
  static nn::LossResult result(double loss, const nn::Batch& batch) {
    nn::LossResult r;
    r.loss_sum = loss;
    r.count = static_cast<std::int64_t>(batch.features.extent(0));
    return r;
  }

  Index m_features;
  const ParameterStore* m_store;
  std::size_t m_weight, m_bias;
};

// Synthetic data: rows [x, t] with t = x w* + 0.5 + noise; each rank draws its own rows.
class Regression final : public train::DataSource {
 public:
  Regression(Index features, Index rows, Index batch, int rank) : m_batch(batch) {
    m_train = make(features, rows, 1000 + static_cast<unsigned>(rank));
    m_test = make(features, rows / 4, 5000 + static_cast<unsigned>(rank));
  }
  std::string name() const override { return "synthetic-regression"; }
  std::uint64_t steps_per_epoch() const override { return m_train.extent(0) / m_batch; }
  Index batch_size() const override { return m_batch; }
  std::string unit() const override { return "samples"; }
  nn::BatchShape train_shape() const override { return {m_batch, 1}; }
  nn::BatchShape eval_shape() const override { return {static_cast<Index>(m_test.extent(0)), 1}; }
  nn::Batch train_batch(const ExecutionSpace&, std::uint64_t step) override {
    const auto first = static_cast<Index>(step % steps_per_epoch()) * m_batch;
    nn::Batch b;
    b.features = Kokkos::subview(m_train, std::make_pair(first, first + m_batch), Kokkos::ALL);
    return b;
  }
  std::vector<std::string> eval_splits() const override { return {"test"}; }
  Index eval_batches(const std::string&) const override { return 1; }
  nn::Batch eval_batch(const ExecutionSpace&, const std::string&, Index) override {
    nn::Batch b;
    b.features = m_test;
    return b;
  }

 private:
  static Matrix make(Index features, Index rows, unsigned seed) {
    Matrix m("example::data", static_cast<std::size_t>(rows), static_cast<std::size_t>(features + 1));
    auto h = Kokkos::create_mirror_view(m);
    Rng rng(seed), truth(42);  // the same w* on every rank
    std::vector<double> w(static_cast<std::size_t>(features));
    for (auto& v : w) v = truth.normal();
    for (Index r = 0; r < rows; ++r) {
      double t = 0.5 + 0.01 * rng.normal();
      for (Index c = 0; c < features; ++c) {
        h(r, c) = static_cast<float>(rng.normal());
        t += h(r, c) * w[static_cast<std::size_t>(c)];
      }
      h(r, features) = static_cast<float>(t);
    }
    Kokkos::deep_copy(m, h);
    return m;
  }
  Index m_batch;
  Matrix m_train, m_test;
};

// Prints the evaluations (rank 0).
class Printer final : public train::TrainObserver {
 public:
  explicit Printer(bool rank0) : m_rank0(rank0) {}
  void message(const std::string& text) override {
    if (m_rank0) std::printf("%s\n", text.c_str());
  }

 private:
  bool m_rank0;
};

int run(int argc, char** argv, const Communicator& comm) {
  std::string method = "a2sgd";
  long long steps = 600, features = 32;
  double lr = 0.05;
  po::options_description desc("a2sgd-example-custom-model options");
  desc.add_options()("help,h", "show this help")("method", po::value(&method)->default_value(method),
                                                 "exchange method (a2sgd, dense, topk, ...)")(
      "steps", po::value(&steps)->default_value(steps), "training steps")(
      "features", po::value(&features)->default_value(features), "input features")(
      "lr", po::value(&lr)->default_value(lr), "learning rate");
  po::variables_map vm;
  a2sgd::apps::parse_command_line(argc, argv, desc, vm);
  if (vm.count("help")) {
    if (comm.rank() == 0) std::cout << desc << '\n';
    return 0;
  }
  if (steps < 1 || features < 1 || !(lr > 0)) throw InvalidArgument("--steps, --features and --lr must be positive");

  ParameterStore store;
  LinearRegression model(features, store);
  Regression data(features, 4096, 32, comm.rank());
  train::TrainerConfig config;
  config.steps = static_cast<std::uint64_t>(steps);
  config.lr.base_lr = lr;
  config.exchange.method = method;
  config.eval_every = static_cast<std::uint64_t>(steps / 4);
  Printer printer(comm.rank() == 0);
  train::Trainer trainer(config, comm, model, store, data, &printer);
  trainer.setup();
  // The initial loss: one evaluation before training (the model starts at zero).
  double initial = 0.0;
  {
    model.begin_evaluation();
    const nn::LossResult r = model.evaluate(ExecutionSpace(), store.params(), data.eval_batch({}, "test", 0));
    double sums[2] = {r.loss_sum, static_cast<double>(r.count)};
    comm.allreduce(sums, 2, MPI_SUM);
    initial = sums[0] / sums[1];
  }
  trainer.run();
  const train::SplitResult& test = trainer.last_evaluation().splits.front();
  if (comm.rank() == 0) {
    std::printf("bytes handed to MPI per step per rank: %.1f\n",
                static_cast<double>(trainer.exchange().stats().total.bytes_sent) / static_cast<double>(steps));
    std::printf("final loss %.6e (initial %.6e, ratio %.3e), averaged model %.6e\n", test.loss, initial,
                test.loss / initial, test.loss_averaged);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return a2sgd::apps::app_main(argc, argv, "a2sgd-example-custom-model", run);
}
