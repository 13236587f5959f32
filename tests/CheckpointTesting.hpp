#pragma once
// Helpers of the checkpoint tests (test_checkpoint.cpp, test_checkpoint_sweep.cpp): per-rank state
// with known contents, a directory shared by the ranks, whole-file loads to compare, and the file
// offsets of the datasets' rows.
#include "TestingCatch.hpp"

#include <a2sgd/comm/Communicator.hpp>
#include <a2sgd/core/Error.hpp>
#include <a2sgd/io/Checkpoint.hpp>

#include <hdf5.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <unistd.h>

namespace a2sgd::testing::checkpoint {

namespace fs = std::filesystem;

constexpr Index n = 1037;

// Deterministic per-rank contents: value(kind, rank, i).
inline float value(int kind, int rank, Index i) {
  return static_cast<float>(kind * 1000 + rank * 10) + 0.001f * i;
}

inline FloatView filled(int kind, int rank, Index len = n) {
  std::vector<float> v(static_cast<std::size_t>(len));
  for (Index i = 0; i < len; ++i) v[i] = value(kind, rank, i);
  return to_device(v);
}

// Exchange state of another length than n, merged by mean (e.g. PowerSGD's Q matrices).
constexpr Index shared_len = 37;

inline io::CheckpointMetadata make_meta(const Communicator& comm, std::uint64_t step) {
  io::CheckpointMetadata m;
  m.library_version = "test";
  m.model = "test model";
  m.layout = "w[1037]";
  m.compressor = "a2sgd";
  m.optimizer = "momentum";
  m.world_size = comm.size();
  m.num_params = n;
  m.step = step;
  m.epoch = step / 4;  // at most the step: an epoch holds at least one step
  m.samples_in_epoch = 640;
  m.batch_size = 32;
  return m;
}

inline io::CheckpointState make_state(int rank) {
  io::CheckpointState s;
  s.params = filled(1, rank);
  s.averaged = filled(2, 0);
  s.exchange_state = {{"residual", filled(3, rank)}, {"shared", filled(5, rank, shared_len), StateMerge::mean}};
  s.optimizer_state = {{"momentum", filled(4, rank)}};
  s.optimizer_steps = 17;
  s.exchange_steps = 18;
  s.scalars = {{"loss_sum", 1.5 + rank}, {"bytes", 1e6 * (rank + 1)}};
  s.timers = {{"wall_s", 0.25 * rank}};
  return s;
}

inline io::CheckpointState empty_state() {
  io::CheckpointState s;
  s.params = FloatView("p", n);
  s.averaged = FloatView("a", n);
  s.exchange_state = {{"residual", FloatView("e", n)}, {"shared", FloatView("q", shared_len), StateMerge::mean}};
  s.optimizer_state = {{"momentum", FloatView("m", n)}};
  s.scalars = {{"loss_sum", 0.0}, {"bytes", 0.0}};
  s.timers = {{"wall_s", 0.0}};
  return s;
}

// A directory shared by the ranks of this test process group.
inline fs::path shared_dir(const Communicator& comm, const std::string& name) {
  long id = comm.rank() == 0 ? static_cast<long>(::getpid()) : 0;
  MPI_Bcast(&id, 1, MPI_LONG, 0, comm.get());
  const fs::path dir = fs::temp_directory_path() / ("a2sgd_ckpt_" + std::to_string(id) + "_" + name);
  if (comm.rank() == 0) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  comm.barrier();
  return dir;
}

inline std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A communicator over the first `size` ranks of `parent` (null on the others).
inline std::unique_ptr<Communicator> first_ranks(const Communicator& parent, int size) {
  MPI_Comm split = MPI_COMM_NULL;
  MPI_Comm_split(parent.get(), parent.rank() < size ? 0 : MPI_UNDEFINED, parent.rank(), &split);
  if (split == MPI_COMM_NULL) return nullptr;
  auto sub = std::make_unique<Communicator>(split);
  MPI_Comm_free(&split);
  return sub;
}

// Everything a load returns, for comparing the loads of two files.
struct Loaded {
  io::CheckpointMetadata meta;
  std::vector<std::vector<float>> views;
  std::vector<std::pair<std::string, double>> scalars, timers;
  std::uint64_t optimizer_steps = 0, exchange_steps = 0;

  bool operator==(const Loaded& o) const {
    const auto& a = meta;
    const auto& b = o.meta;
    return std::tie(a.format_version, a.library_version, a.model, a.layout, a.compressor, a.compressor_options,
                    a.optimizer, a.optimizer_options, a.dataset, a.world_size, a.num_params, a.batch_size, a.seed,
                    a.step, a.epoch, a.samples_in_epoch, a.created) ==
               std::tie(b.format_version, b.library_version, b.model, b.layout, b.compressor, b.compressor_options,
                        b.optimizer, b.optimizer_options, b.dataset, b.world_size, b.num_params, b.batch_size, b.seed,
                        b.step, b.epoch, b.samples_in_epoch, b.created) &&
           bitwise_equal(views, o.views) && scalars_equal(scalars, o.scalars) && scalars_equal(timers, o.timers) &&
           optimizer_steps == o.optimizer_steps && exchange_steps == o.exchange_steps;
  }
  static bool bitwise_equal(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0)
        return false;
    return true;
  }
  static bool scalars_equal(const std::vector<std::pair<std::string, double>>& a,
                            const std::vector<std::pair<std::string, double>>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (a[i].first != b[i].first || std::memcmp(&a[i].second, &b[i].second, sizeof(double)) != 0) return false;
    return true;
  }
};

inline io::CheckpointState state_with_model_state() {
  auto s = empty_state();
  s.model_state = {{"carried", FloatView("c", 11), StateMerge::mean}};
  return s;
}

// A checkpoint at step 8 with every kind of state, model state included.
inline std::string write_full(const Communicator& comm, const fs::path& dir) {
  auto state = make_state(comm.rank());
  state.model_state = {{"carried", filled(6, comm.rank(), 11), StateMerge::mean}};
  const std::string path = io::checkpoint_path(dir.string(), 8);
  io::write_checkpoint(comm, path, make_meta(comm, 8), state);
  return path;
}

inline Loaded load(const Communicator& comm, const std::string& path) {
  Loaded out;
  out.meta = io::read_checkpoint_metadata(comm, path);
  auto s = state_with_model_state();
  io::read_checkpoint(comm, path, out.meta, s);
  for (const auto& v : {s.params, s.averaged, s.exchange_state[0].view, s.exchange_state[1].view,
                        s.optimizer_state[0].view, s.model_state[0].view})
    out.views.push_back(to_host(v));
  out.scalars = s.scalars;
  out.timers = s.timers;
  out.optimizer_steps = s.optimizer_steps;
  out.exchange_steps = s.exchange_steps;
  return out;
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// File offset and size of each row of the contiguous float datasets of a checkpoint.
struct RowSpan {
  std::string dataset;
  std::size_t row, offset, bytes;
};
inline std::vector<RowSpan> row_spans(const std::string& path) {
  std::vector<RowSpan> spans;
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  for (const char* name : {"/replicas/params", "/replicas/residual", "/replicas/shared", "/replicas/optimizer/momentum",
                           "/replicas/model_state/carried", "/model/params", "/replicas/scalars", "/replicas/timers"}) {
    const hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    const hid_t space = H5Dget_space(d), type = H5Dget_type(d);
    hsize_t dims[2] = {1, 1};
    const int rank = H5Sget_simple_extent_dims(space, dims, nullptr);
    const std::size_t rows = rank == 2 ? dims[0] : 1, cols = rank == 2 ? dims[1] : dims[0];
    const std::size_t row_bytes = cols * H5Tget_size(type);
    const auto base = static_cast<std::size_t>(H5Dget_offset(d));
    for (std::size_t r = 0; r < rows; ++r) spans.push_back({name, r, base + r * row_bytes, row_bytes});
    H5Tclose(type), H5Sclose(space), H5Dclose(d);
  }
  H5Fclose(f);
  return spans;
}

}  // namespace a2sgd::testing::checkpoint
