// Library example: plug an a2sgd exchange and optimizer into your own training loop.
//
// Each rank owns a shard of a linear least-squares problem  min_w (1/2m) ||A w + b0 - y||^2,
// computes its local gradient with Kokkos Kernels, and calls exchange->step(). Run:
//   mpirun -np 2 a2sgd-example-least-squares --method a2sgd
#include "common/OptionErrors.hpp"

#include <a2sgd/a2sgd.hpp>

#include <KokkosBlas1_dot.hpp>
#include <KokkosBlas2_gemv.hpp>
#include <boost/program_options.hpp>

#include <cstdio>
#include <iostream>
#include <random>

namespace po = boost::program_options;
using namespace a2sgd;

namespace {

struct Options {
  std::string method = "a2sgd";
  std::string optimizer = "sgd";
  int steps = 400;
  int dim = 64;
  int rows = 512;  // per rank
  double lr = 0.05;
  unsigned seed = 1;
  int print_every = 50;
};

Options parse(int argc, char** argv, bool& help) {
  Options o;
  po::options_description desc("a2sgd-example-least-squares options");
  desc.add_options()("help,h", "show this help")("method", po::value(&o.method)->default_value(o.method),
                                                 "exchange method: dense | a2sgd")(
      "optimizer", po::value(&o.optimizer)->default_value(o.optimizer), "sgd | momentum | adam")(
      "steps", po::value(&o.steps)->default_value(o.steps), "training steps")(
      "dim", po::value(&o.dim)->default_value(o.dim), "number of features")(
      "rows", po::value(&o.rows)->default_value(o.rows), "rows of A per rank")(
      "lr", po::value(&o.lr)->default_value(o.lr), "peak learning rate (cosine schedule)")(
      "seed", po::value(&o.seed)->default_value(o.seed), "random seed")(
      "print-every", po::value(&o.print_every)->default_value(o.print_every), "steps between loss lines");
  po::variables_map vm;
  a2sgd::apps::parse_command_line(argc, argv, desc, vm);
  help = vm.count("help") > 0;
  if (help) std::cout << desc << '\n';
  if (o.steps < 1 || o.dim < 1 || o.rows < 1 || o.print_every < 1)
    throw InvalidArgument("--steps, --dim, --rows and --print-every must be positive");
  return o;
}

using Matrix = Kokkos::View<float**, Kokkos::LayoutRight, MemorySpace>;

// The whole problem is drawn from `seed`; each rank keeps its own rows.
void make_shard(const Options& o, int rank, const Matrix& A, const FloatView& y) {
  std::mt19937 truth_rng(o.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w_true(static_cast<std::size_t>(o.dim));
  for (auto& w : w_true) w = normal(truth_rng);
  const float b_true = 0.5f;
  std::mt19937 rng(o.seed * 7919u + static_cast<unsigned>(rank));
  auto Ah = Kokkos::create_mirror_view(A);
  auto yh = Kokkos::create_mirror_view(y);
  for (int i = 0; i < o.rows; ++i) {
    double dot = b_true;
    for (int j = 0; j < o.dim; ++j) {
      Ah(i, j) = normal(rng);
      dot += Ah(i, j) * w_true[static_cast<std::size_t>(j)];
    }
    yh(i) = static_cast<float>(dot) + 0.01f * normal(rng);
  }
  Kokkos::deep_copy(A, Ah);
  Kokkos::deep_copy(y, yh);
}

int run(int argc, char** argv, const Communicator& comm) {
  bool help = false;
  Options o;
  comm.all_or_throw([&] { o = parse(argc, argv, help); });
  if (help) return 0;

  // 1. Model parameters as named slices of one flat buffer.
  ParameterStore store;
  store.add("weight", {o.dim});
  store.add("bias", {1});
  store.allocate();

  // 2. The exchange (selected by name) and the optimizer work on the flat buffers.
  ExchangeConfig xcfg;
  xcfg.method = o.method;
  std::unique_ptr<Exchange> exchange;
  comm.all_or_throw([&] { parse_optimizer_kind(o.optimizer); });
  exchange = make_exchange(xcfg, comm, store.size());
  OptimizerConfig ocfg;
  ocfg.kind = parse_optimizer_kind(o.optimizer);
  Optimizer optimizer(ocfg, store.size());
  LrScheduleConfig lcfg;
  lcfg.kind = LrScheduleKind::cosine;
  lcfg.base_lr = o.lr;
  lcfg.warmup_steps = static_cast<std::uint64_t>(o.steps / 20);
  lcfg.total_steps = static_cast<std::uint64_t>(o.steps);
  const LrSchedule schedule(lcfg);

  Matrix A("A", static_cast<std::size_t>(o.rows), static_cast<std::size_t>(o.dim));
  FloatView y("y", static_cast<std::size_t>(o.rows));
  FloatView r("residual", static_cast<std::size_t>(o.rows));
  make_shard(o, comm.rank(), A, y);

  const FloatView w = store.param("weight");
  const FloatView b = store.param("bias");
  const FloatView gw = store.grad("weight");
  const FloatView gb = store.grad("bias");
  const float inv_rows = 1.0f / static_cast<float>(o.rows);

  // Local loss and gradient: r = A w + b - y;  gw = A^T r / m;  gb = sum(r) / m.
  auto local_loss_and_grad = [&]() {
    Kokkos::deep_copy(r, y);
    KokkosBlas::gemv("N", 1.0f, A, w, -1.0f, r);
    const FloatView rr = r, bb = b, gbb = gb;
    Kokkos::parallel_for(
        "example::add_bias", Kokkos::RangePolicy<ExecutionSpace>(0, o.rows), KOKKOS_LAMBDA(int i) { rr(i) += bb(0); });
    KokkosBlas::gemv("T", inv_rows, A, r, 0.0f, gw);
    float sum_r = 0.0f;
    Kokkos::parallel_reduce(
        "example::sum_residual", Kokkos::RangePolicy<ExecutionSpace>(0, o.rows),
        KOKKOS_LAMBDA(int i, float& s) { s += rr(i); }, sum_r);
    Kokkos::deep_copy(gbb, sum_r * inv_rows);
    return 0.5 * static_cast<double>(KokkosBlas::dot(r, r)) * static_cast<double>(inv_rows);
  };
  auto global_loss = [&](double local) {
    comm.allreduce(&local, 1, MPI_SUM);  // diagnostics only, not part of the exchange
    return local / comm.size();
  };

  double initial = -1.0, loss = 0.0;
  for (int step = 0; step < o.steps; ++step) {
    const double local = local_loss_and_grad();
    if (step % o.print_every == 0 || step == o.steps - 1) {
      loss = global_loss(local);
      if (initial < 0) initial = loss;
      if (comm.rank() == 0) std::printf("step %5d  loss %.6e  lr %.4f\n", step, loss, schedule(step));
    }
    // 3. One call per step: exchange gradients across ranks and apply the optimizer.
    exchange->step(store.params(), store.grads(), optimizer, schedule(static_cast<std::uint64_t>(step)));
  }
  loss = global_loss(local_loss_and_grad());
  const auto& st = exchange->stats();
  if (comm.rank() == 0) {
    std::printf("method %s, %d ranks, %lld parameters\n", exchange->name().c_str(), comm.size(),
                static_cast<long long>(store.size()));
    std::printf("bytes handed to MPI per step per rank: %.1f\n",
                static_cast<double>(st.total.bytes_sent) / static_cast<double>(st.steps));
    std::printf("final loss %.6e (initial %.6e, ratio %.3e)\n", loss, initial, loss / initial);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int code = 0;
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    try {
      Communicator comm;
      try {
        code = run(argc, argv, comm);
      } catch (const CollectiveError& e) {
        // Every rank has the same error: report it once.
        if (comm.rank() == 0) std::fprintf(stderr, "a2sgd-example-least-squares: error: %s\n", e.what());
        code = 2;
      }
    } catch (const std::exception& e) {
      // Raised on this rank alone: report it and take the job down rather than leave others waiting.
      std::fprintf(stderr, "a2sgd-example-least-squares: error: %s\n", e.what());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  MPI_Finalize();
  return code;
}
