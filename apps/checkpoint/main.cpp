// a2sgd-checkpoint: inspect, compare and benchmark a2sgd checkpoint files.
//
//   a2sgd-checkpoint info FILE        attributes and datasets
//   a2sgd-checkpoint diff A B         exit 0 when every dataset and run attribute is identical
//   a2sgd-checkpoint verify FILE      exit 0 when the metadata and every row pass their checks
//                                     (checksums, types, finite values), 2 naming what failed
//   mpirun -np P a2sgd-checkpoint bench [--params N] [--dir DIR]
//                                     parallel checkpoint write/read bandwidth against a plain
//                                     sequential write/read of the same bytes, in one run
#include <a2sgd/a2sgd.hpp>
#include "../common/Statistics.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

using namespace a2sgd;
namespace fs = std::filesystem;

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: a2sgd-checkpoint info FILE\n"
               "       a2sgd-checkpoint diff A B\n"
               "       a2sgd-checkpoint verify FILE\n"
               "       mpirun -np P a2sgd-checkpoint bench [--params N] [--repeats R] [--dir DIR]\n");
  return 2;
}

// Plain POSIX sequential write of `bytes` bytes, fsync'ed (a parallel HDF5 flush syncs the
// checkpoint file too), and a sequential read of `bytes` bytes: the baselines.
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
  ::fsync(fd);
  ::close(fd);
  return clock.seconds();
}

// Cold reads: the file's pages are written back and dropped from the page cache
// (posix_fadvise(POSIX_FADV_DONTNEED), which needs no privileges), so a read after it comes from
// the disk and not from memory. Returns the fraction of the file's pages still resident after it
// (mincore), which the report prints: near 0 means the read that follows is cold.
double drop_cached_pages(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw Error("cannot open " + path + ": " + std::strerror(errno));
  ::fdatasync(fd);  // dirty pages cannot be dropped
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  const off_t size = ::lseek(fd, 0, SEEK_END);
  double resident = 0.0;
  if (size > 0) {
    void* map = ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ, MAP_SHARED, fd, 0);
    if (map != MAP_FAILED) {
      const long page = ::sysconf(_SC_PAGESIZE);
      std::vector<unsigned char> in_core(static_cast<std::size_t>((size + page - 1) / page));
      if (::mincore(map, static_cast<std::size_t>(size), in_core.data()) == 0) {
        std::size_t count = 0;
        for (unsigned char c : in_core) count += c & 1u;
        resident = static_cast<double>(count) / static_cast<double>(in_core.size());
      }
      ::munmap(map, static_cast<std::size_t>(size));
    }
  }
  ::close(fd);
  return resident;
}

double plain_read(const std::string& path, std::vector<char>& buffer, std::uint64_t bytes) {
  Stopwatch clock;
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw Error("cannot open " + path);
  for (std::uint64_t done = 0; done < bytes;) {
    const ssize_t r =
        ::read(fd, buffer.data(), static_cast<std::size_t>(std::min<std::uint64_t>(buffer.size(), bytes - done)));
    if (r <= 0) break;
    done += static_cast<std::uint64_t>(r);
  }
  ::close(fd);
  return clock.seconds();
}

using a2sgd::apps::median;

int bench(int argc, char** argv, const Communicator& comm) {
  std::int64_t n = 100'000'000;
  int repeats = 3;
  std::string dir = ".";
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--params" && i + 1 < argc) {
      n = std::atoll(argv[++i]);
    } else if (a == "--repeats" && i + 1 < argc) {
      repeats = std::atoi(argv[++i]);
    } else if (a == "--dir" && i + 1 < argc) {
      dir = argv[++i];
    } else {
      return usage();
    }
  }
  if (n < 1 || repeats < 1) return usage();
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
  meta.batch_size = 1;
  io::CheckpointState state;
  state.params = params;
  state.averaged = averaged;
  io::CheckpointState restart;  // what a restart reads: each rank its own replica
  restart.params = params;
  const std::string file = io::checkpoint_path(dir, 0);
  const std::string plain = (fs::path(dir) / "a2sgd-bench-plain.bin").string();
  const std::uint64_t read_bytes = static_cast<std::uint64_t>(comm.size()) * count * sizeof(float);
  std::vector<char> buffer(comm.rank() == 0 ? (64 << 20) : 0, 1);

  // Alternating rounds; every timed phase starts with no dirty pages of an earlier phase, and
  // every read with the file's pages dropped from the page cache (cold).
  std::vector<double> ckpt_w, ckpt_r, plain_w, plain_r;
  double resident = 0.0;  // the largest fraction of a file's pages left cached before a read
  std::uint64_t bytes = 0;
  for (int round = 0; round < repeats; ++round) {
    ::sync();
    comm.barrier();
    Stopwatch clock;
    bytes = io::write_checkpoint(comm, file, meta, state);
    comm.barrier();
    ckpt_w.push_back(clock.seconds());
    ::sync();
    resident = std::max(resident, drop_cached_pages(file));  // every rank: one call per node would do
    comm.barrier();
    clock.restart();
    io::read_checkpoint(comm, file, io::read_checkpoint_metadata(comm, file), restart);
    comm.barrier();
    ckpt_r.push_back(clock.seconds());
    if (comm.rank() == 0) {
      ::sync();
      plain_w.push_back(plain_write(plain, buffer, bytes));
      ::sync();
      resident = std::max(resident, drop_cached_pages(plain));
      plain_r.push_back(plain_read(plain, buffer, read_bytes));
      fs::remove(plain);
      fs::remove(file);
    }
    comm.barrier();
  }
  if (comm.rank() == 0) {
    const double w = median(ckpt_w), r = median(ckpt_r), pw = median(plain_w), pr = median(plain_r);
    const double gb = static_cast<double>(bytes) / 1e9, rgb = static_cast<double>(read_bytes) / 1e9;
    std::printf("checkpoint of %lld parameters, %d ranks (replicas + averaged model): %.3f GB; medians of %d rounds\n",
                static_cast<long long>(n), comm.size(), gb, repeats);
    std::printf(
        "  write %.3f GB: checkpoint %.3f GB/s (%.2f s), plain sequential write+fsync %.3f GB/s (%.2f s), "
        "ratio %.2f\n",
        gb, gb / w, w, gb / pw, pw, pw / w);
    std::printf(
        "  read  %.3f GB: checkpoint restart %.3f GB/s (%.2f s), plain sequential read %.3f GB/s (%.2f s), "
        "ratio %.2f\n"
        "  writes include fsync; reads are cold: the files' pages were dropped from the page cache first "
        "(at most %.1f%% of a file's pages still cached)\n",
        rgb, rgb / r, r, rgb / pr, pr, pr / r, 100.0 * resident);
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
  if (cmd == "verify" && argc == 3) {
    std::string summary;
    const auto problems = io::verify_checkpoint(argv[2], summary);
    for (const auto& p : problems) std::fprintf(stderr, "a2sgd-checkpoint: damaged: %s\n", p.c_str());
    if (problems.empty()) std::printf("ok: %s\n", summary.c_str());
    return problems.empty() ? 0 : 2;
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
