// The Trainer's divergence monitor (docs/training.md, "Divergence") on a scripted model whose
// evaluation loss is chosen by the test, so the verdict does not depend on any arithmetic: the
// warning comes at the evaluation where the loss has risen `patience` times in a row, on every
// rank, with its record; --stop-on-divergence turns it into NonFiniteError on every rank.
#include "TestingCatch.hpp"

#include <a2sgd/core/Error.hpp>
#include <a2sgd/train/Trainer.hpp>

#include <string>
#include <vector>

using namespace a2sgd;

namespace {

// One parameter, zero gradients (the replicas never move, so their divergence is 0); evaluation
// losses taken in turn from `script` (per prediction, one prediction per evaluation batch).
// With `drift`, even and odd ranks get opposite gradients (+1, -1) and (-1, +1), so that A2SGD's
// replicas move apart and each evaluation scores the averaged model, then rank 0's replica.
class ScriptedModel final : public nn::Model {
 public:
  ScriptedModel(ParameterStore& store, std::vector<double> script, bool drift = false)
      : m_script(std::move(script)), m_drift(drift) {
    store.add("w", {2});
  }
  std::string describe() const override { return "scripted"; }
  void initialize(const FloatView& params, std::uint64_t) const override { Kokkos::deep_copy(params, 1.0f); }
  void reserve(const nn::BatchShape&, const nn::BatchShape&) override {}
  nn::LossResult forward_backward(const ExecutionSpace& exec, const FloatView&, const FloatView& grads,
                                  const nn::Batch&, const nn::StepContext& context) override {
    Kokkos::deep_copy(exec, grads, 0.0f);
    if (m_drift) {
      const float sign = context.rank % 2 == 0 ? 1.0f : -1.0f;
      Kokkos::deep_copy(exec, Kokkos::subview(grads, 0), sign);
      Kokkos::deep_copy(exec, Kokkos::subview(grads, 1), -sign);
    }
    nn::LossResult r;
    r.loss_sum = 1.0;
    r.count = 1;
    return r;
  }
  nn::LossResult evaluate(const ExecutionSpace&, const FloatView&, const nn::Batch&) override {
    nn::LossResult r;
    // Without drift the replicas never differ, and the Trainer evaluates one model per evaluation.
    r.loss_sum = m_script.at(std::min(m_next++, m_script.size() - 1));
    r.count = 1;
    return r;
  }

 private:
  std::vector<double> m_script;
  bool m_drift = false;
  std::size_t m_next = 0;
};

class OneBatch final : public train::DataSource {
 public:
  std::string name() const override { return "one-batch"; }
  std::uint64_t steps_per_epoch() const override { return 100; }
  Index batch_size() const override { return 1; }
  std::string unit() const override { return "samples"; }
  nn::BatchShape train_shape() const override { return {1, 1}; }
  nn::BatchShape eval_shape() const override { return {1, 1}; }
  nn::Batch train_batch(const ExecutionSpace&, std::uint64_t) override { return {}; }
  std::vector<std::string> eval_splits() const override { return {"valid"}; }
  Index eval_batches(const std::string&) const override { return 1; }
  nn::Batch eval_batch(const ExecutionSpace&, const std::string&, Index) override { return {}; }
};

class Collector final : public train::TrainObserver {
 public:
  void record(const train::Record& rec) override {
    if (const auto* e = rec.find("event"); e && std::get<std::string>(*e) == "divergence_warning") {
      steps.push_back(std::get<std::uint64_t>(*rec.find("step")));
      rising.push_back(std::get<std::uint64_t>(*rec.find("rising_evaluations")));
    }
  }
  void rank_warning(int, const std::string& text) override { warnings.push_back(text); }
  std::vector<std::uint64_t> steps, rising;
  std::vector<std::string> warnings;
};

}  // namespace

TEST_CASE("the divergence monitor warns when the loss rises at K consecutive evaluations", "[trainer]") {
  Communicator comm;
  // Evaluations at steps 2, 4, ..., 16. Losses 5, 4, 6, 7, 8, 9, 10, 3: the loss rises at the
  // evaluations of steps 6, 8, 10, 12 and 14, so the run of 3 rises is reached at step 10 and
  // continues (4 at 12, 5 at 14); the fall at 16 ends it.
  const std::vector<double> script{5, 4, 6, 7, 8, 9, 10, 3};
  for (bool stop : {false, true}) {
    INFO("stop_on_divergence " << stop);
    ParameterStore store;
    ScriptedModel model(store, script);
    store.allocate();
    OneBatch data;
    Collector seen;
    train::TrainerConfig config;
    config.steps = 16;
    config.eval_every = 2;
    config.exchange.method = "dense";
    config.divergence_threshold = 0.5;
    config.divergence_patience = 3;
    config.stop_on_divergence = stop;
    train::Trainer trainer(config, comm, model, store, data, &seen);
    trainer.setup();
    if (stop) {
      CHECK_THROWS_AS(trainer.run(), DivergenceError);
      CHECK(seen.steps == std::vector<std::uint64_t>{10});
    } else {
      trainer.run();
      CHECK(seen.steps == (std::vector<std::uint64_t>{10, 12, 14}));
      CHECK(seen.rising == (std::vector<std::uint64_t>{3, 4, 5}));
    }
    REQUIRE(!seen.warnings.empty());
    CHECK_THAT(seen.warnings.front(), A2SGD_CONTAINS("rose at 3 consecutive evaluations"));
  }
}

TEST_CASE("the divergence monitor warns when the averaged model is worse than a replica", "[trainer]") {
  Communicator comm;
  // Evaluations at steps 2, 4, 6: (averaged, replica) losses (1.0, 1.0), (1.04, 1.0) within the 5%
  // gap, then (1.2, 1.0): 20% above. At one rank the replica is the average, scored once.
  const std::vector<double> script{1.0, 1.0, 1.04, 1.0, 1.2, 1.0};
  for (bool stop : {false, true}) {
    INFO("stop_on_divergence " << stop);
    ParameterStore store;
    ScriptedModel model(store, script, /*drift=*/true);
    store.allocate();
    OneBatch data;
    Collector seen;
    train::TrainerConfig config;
    config.steps = 6;
    config.eval_every = 2;
    config.exchange.method = "a2sgd";
    config.divergence_threshold = 0.0;
    config.divergence_patience = 0;
    config.divergence_gap = 0.05;
    config.stop_on_divergence = stop;
    train::Trainer trainer(config, comm, model, store, data, &seen);
    trainer.setup();
    if (comm.size() == 1) {
      trainer.run();
      CHECK(seen.steps.empty());
      continue;
    }
    if (stop)
      CHECK_THROWS_AS(trainer.run(), DivergenceError);
    else
      trainer.run();
    CHECK(seen.steps == std::vector<std::uint64_t>{6});
    REQUIRE(seen.warnings.size() == 1);
    CHECK_THAT(seen.warnings.front(), A2SGD_CONTAINS("the averaged model is worse than rank 0's replica"));
  }
}
