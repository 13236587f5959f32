// a2sgd-checkpoint: inspect, compare and benchmark a2sgd checkpoint files.
//
//   a2sgd-checkpoint info FILE        attributes and datasets
//   a2sgd-checkpoint diff A B         exit 0 when every dataset and run attribute is identical
//   mpirun -np P a2sgd-checkpoint bench [--params N] [--dir DIR]
//                                     parallel checkpoint write/read bandwidth against a plain
//                                     sequential write/read of the same bytes, in one run
#include <a2sgd/a2sgd.hpp>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

using namespace a2sgd;
namespace fs = std::filesystem;

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: a2sgd-checkpoint info FILE\n"
               "       a2sgd-checkpoint diff A B\n"
               "       mpirun -np P a2sgd-checkpoint bench [--params N] [--dir DIR]\n");
  return 2;
}

// Plain POSIX sequential write (then close) and read of `bytes` bytes: the baseline.
double plain_write(const std::string& path, const std::vector<char>& buffer, std::uint64_t bytes) {
  Stopwatch clock;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw Error("cannot create " + path + ": " + std::strerror(errno));
  for (std::uint64_t done = 0; done < bytes;) {
    const auto chunk = static_cast<std::size_t>(std::min<std::uint64_t>(buffer.size(), bytes - done));
    const ssize_t w = ::write(fd, buffer.data(), chunk);
    if (w <= 0) throw Error("cannot write " + path + ": " + std::strerror(errno));
    done += static_cast<std::uint64_t>(w);
  }
  ::close(fd);
  return clock.seconds();
}

double plain_read(const std::string& path, std::vector<char>& buffer) {
  Stopwatch clock;
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw Error("cannot open " + path);
  while (::read(fd, buffer.data(), buffer.size()) > 0) {
  }
  ::close(fd);
  return clock.seconds();
}

int bench(int argc, char** argv, const Communicator& comm) {
  std::int64_t n = 100'000'000;
  std::string dir = ".";
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--params" && i + 1 < argc) {
      n = std::atoll(argv[++i]);
    } else if (a == "--dir" && i + 1 < argc) {
      dir = argv[++i];
    } else {
      return usage();
    }
  }
  if (n < 1) return usage();
  const auto count = static_cast<std::size_t>(n);
  // A dense-SGD run's checkpoint: every rank's replica and the averaged model.
  FloatView params("params", count), averaged("averaged", count);
  Kokkos::parallel_for(
      "fill", Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>(0, n),
      KOKKOS_LAMBDA(Index i) { params(i) = averaged(i) = 1e-3f * static_cast<float>(i % 1000); });
  Kokkos::fence();
  io::CheckpointMetadata meta;
  meta.model = "benchmark buffer";
  meta.layout = "params[" + std::to_string(n) + "]";
  meta.compressor = "dense";
  meta.optimizer = "sgd";
  meta.world_size = comm.size();
  meta.num_params = n;
  io::CheckpointState state;
  state.params = params;
  state.averaged = averaged;
  const std::string file = io::checkpoint_path(dir, 0);

  comm.barrier();
  Stopwatch clock;
  const std::uint64_t bytes = io::write_checkpoint(comm, file, meta, state);
  comm.barrier();
  const double write_s = clock.seconds();
  clock.restart();
  io::read_checkpoint(comm, file, io::read_checkpoint_metadata(comm, file), state);
  comm.barrier();
  const double read_s = clock.seconds();

  double plain_w = 0, plain_r = 0;
  if (comm.rank() == 0) {
    const std::string plain = (fs::path(dir) / "a2sgd-bench-plain.bin").string();
    std::vector<char> buffer(64 << 20, 1);
    plain_w = plain_write(plain, buffer, bytes);
    plain_r = plain_read(plain, buffer);
    fs::remove(plain);
    fs::remove(file);
    const double gb = static_cast<double>(bytes) / 1e9;
    std::printf("checkpoint of %lld parameters x (%d replicas + averaged model): %.3f GB\n",
                static_cast<long long>(n), comm.size(), gb);
    std::printf("  write: checkpoint %.2f GB/s (%.2f s), plain sequential write %.2f GB/s (%.2f s), ratio %.2f\n",
                gb / write_s, write_s, gb / plain_w, plain_w, plain_w / write_s);
    std::printf("  read : checkpoint %.2f GB/s (%.2f s), plain sequential read  %.2f GB/s (%.2f s), ratio %.2f\n",
                gb / read_s, read_s, gb / plain_r, plain_r, plain_r / read_s);
  }
  return 0;
}

int run(int argc, char** argv, const Communicator& comm) {
  if (argc < 2) return usage();
  const std::string cmd = argv[1];
  if (cmd == "bench") return bench(argc, argv, comm);
  if (comm.rank() != 0) return 0;  // the serial commands run on rank 0 only
  if (cmd == "info" && argc == 3) {
    std::printf("%s", io::describe_checkpoint(argv[2]).c_str());
    return 0;
  }
  if (cmd == "diff" && argc == 4) {
    const auto diffs = io::compare_checkpoints(argv[2], argv[3]);
    for (const auto& d : diffs) std::printf("%s\n", d.c_str());
    if (diffs.empty()) std::printf("identical: %s %s\n", argv[2], argv[3]);
    return diffs.empty() ? 0 : 1;
  }
  return usage();
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int code = 0;
  {
    Kokkos::ScopeGuard kokkos(argc, argv);
    try {
      Communicator comm;
      code = run(argc, argv, comm);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "a2sgd-checkpoint: error: %s\n", e.what());
      code = 2;
    }
  }
  MPI_Finalize();
  return code;
}
