// Links against the installed a2sgd and runs one A2SGD exchange step on every rank: the mean of
// the ranks' identical gradients must come back as the update, the traffic 16 bytes.
#include <a2sgd/a2sgd.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int code = 1;
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    a2sgd::Communicator comm;
    const a2sgd::Index n = 1000;
    a2sgd::ExchangeConfig config;
    config.method = "a2sgd";
    auto exchange = a2sgd::make_exchange(config, comm, n, a2sgd::ExecutionSpace());
    a2sgd::FloatView params("params", n), grads("grads", n);
    Kokkos::deep_copy(grads, 1.0f);
    a2sgd::Optimizer sgd(a2sgd::OptimizerConfig{}, n);
    exchange->step(params, grads, sgd, 0.5);
    auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), params);
    const std::uint64_t bytes = exchange->stats().total.bytes_sent;
    // Every gradient entry is 1, so the positive mean is 1 and the update -0.5 per entry.
    code = (host(0) == -0.5f && host(n - 1) == -0.5f && bytes == 16) ? 0 : 1;
    if (comm.rank() == 0)
      std::printf("a2sgd consumer: x[0] = %g, %llu bytes sent: %s\n", static_cast<double>(host(0)),
                  static_cast<unsigned long long>(bytes), code == 0 ? "ok" : "WRONG");
  }
  MPI_Finalize();
  return code;
}
