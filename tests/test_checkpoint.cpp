#include "TestingCatch.hpp"

#include <a2sgd/core/Error.hpp>
#include <a2sgd/io/Checkpoint.hpp>

#include <hdf5.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include <unistd.h>

using namespace a2sgd;
using namespace a2sgd::testing;
namespace fs = std::filesystem;

namespace {

constexpr Index n = 1037;

// Deterministic per-rank contents: value(kind, rank, i).
float value(int kind, int rank, Index i) {
  return static_cast<float>(kind * 1000 + rank * 10) + 0.001f * i;
}

FloatView filled(int kind, int rank, Index len = n) {
  std::vector<float> v(static_cast<std::size_t>(len));
  for (Index i = 0; i < len; ++i) v[i] = value(kind, rank, i);
  return to_device(v);
}

// Exchange state of another length than n, merged by mean (e.g. PowerSGD's Q matrices).
constexpr Index shared_len = 37;

io::CheckpointMetadata make_meta(const Communicator& comm, std::uint64_t step) {
  io::CheckpointMetadata m;
  m.library_version = "test";
  m.model = "test model";
  m.layout = "w[1037]";
  m.compressor = "a2sgd";
  m.optimizer = "momentum";
  m.world_size = comm.size();
  m.num_params = n;
  m.step = step;
  m.epoch = 2;
  m.samples_in_epoch = 640;
  return m;
}

io::CheckpointState make_state(int rank) {
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

io::CheckpointState empty_state() {
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
fs::path shared_dir(const Communicator& comm, const std::string& name) {
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

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A communicator over the first `size` ranks of `parent` (null on the others).
std::unique_ptr<Communicator> first_ranks(const Communicator& parent, int size) {
  MPI_Comm split = MPI_COMM_NULL;
  MPI_Comm_split(parent.get(), parent.rank() < size ? 0 : MPI_UNDEFINED, parent.rank(), &split);
  if (split == MPI_COMM_NULL) return nullptr;
  auto sub = std::make_unique<Communicator>(split);
  MPI_Comm_free(&split);
  return sub;
}

}  // namespace

TEST_CASE("checkpoint round trip on the same ranks is bit-exact and atomic", "[checkpoint]") {
  Communicator comm;
  const fs::path dir = shared_dir(comm, "roundtrip");
  const std::string older = io::checkpoint_path(dir.string(), 5);
  const std::string path = io::checkpoint_path(dir.string(), 10);
  CHECK(fs::path(path).filename() == "ckpt-000000010.h5");
  io::write_checkpoint(comm, older, make_meta(comm, 5), make_state(comm.rank()));
  const std::string older_bytes = file_bytes(older);
  const auto bytes = io::write_checkpoint(comm, path, make_meta(comm, 10), make_state(comm.rank()));
  CHECK(bytes == fs::file_size(path));
  CHECK(file_bytes(older) == older_bytes);  // an older checkpoint is never touched
  int leftovers = 0;
  for (const auto& e : fs::directory_iterator(dir)) leftovers += e.path().extension() == ".tmp";
  CHECK(leftovers == 0);
  const auto listed = io::list_checkpoints(dir.string());
  REQUIRE(listed.size() == 2);
  CHECK(listed[0].first == 10);
  CHECK(listed[1].first == 5);

  const auto meta = io::read_checkpoint_metadata(comm, path);
  CHECK(meta.world_size == comm.size());
  CHECK(meta.num_params == n);
  CHECK(meta.step == 10);
  CHECK(meta.samples_in_epoch == 640);
  CHECK(meta.compressor == "a2sgd");
  CHECK(!meta.created.empty());
  auto s = empty_state();
  io::read_checkpoint(comm, path, meta, s);
  const auto want = make_state(comm.rank());
  CHECK(to_host(s.params) == to_host(want.params));
  CHECK(to_host(s.averaged) == to_host(want.averaged));
  CHECK(to_host(s.exchange_state[0].view) == to_host(want.exchange_state[0].view));
  CHECK(to_host(s.exchange_state[1].view) == to_host(want.exchange_state[1].view));
  CHECK(to_host(s.optimizer_state[0].view) == to_host(want.optimizer_state[0].view));
  CHECK(s.optimizer_steps == 17);
  CHECK(s.exchange_steps == 18);
  CHECK(s.scalars == want.scalars);
  CHECK(s.timers == want.timers);
  // Identical files compare equal; a file from another step does not.
  if (comm.rank() == 0) {
    CHECK(io::compare_checkpoints(path, path).empty());
    CHECK(!io::compare_checkpoints(path, older).empty());
  }
  comm.barrier();
  if (comm.rank() == 0) fs::remove_all(dir);
}

TEST_CASE("elastic restart: averaged model, conserved residual sum, mean optimizer and shared state", "[checkpoint]") {
  Communicator comm;
  const int p = comm.size();
  // (old world size, new world size) pairs this rank count can run.
  std::vector<std::pair<int, int>> cases;
  if (p == 2) cases = {{1, 2}, {2, 1}};
  if (p == 4) cases = {{4, 2}, {2, 4}};
  for (const auto& [p_old, p_new] : cases) {
    INFO(p_old << " -> " << p_new << " ranks");
    const fs::path dir = shared_dir(comm, "elastic" + std::to_string(p_old) + std::to_string(p_new));
    const std::string path = io::checkpoint_path(dir.string(), 1);
    if (auto writers = first_ranks(comm, p_old))
      io::write_checkpoint(*writers, path, make_meta(*writers, 1), make_state(writers->rank()));
    comm.barrier();
    if (auto readers = first_ranks(comm, p_new)) {
      const auto meta = io::read_checkpoint_metadata(*readers, path);
      CHECK(meta.world_size == p_old);
      auto s = empty_state();
      io::read_checkpoint(*readers, path, meta, s);
      const auto params = to_host(s.params), averaged = to_host(s.averaged);
      const auto residual = to_host(s.exchange_state[0].view), momentum = to_host(s.optimizer_state[0].view);
      // Sum of the residual over the new ranks, gathered on every reader.
      std::vector<float> residual_sum(residual);
      MPI_Allreduce(MPI_IN_PLACE, residual_sum.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, readers->get());
      // Float rounding of the merge: the p_old rows are summed in float (p_old - 1 additions in any
      // order) and scaled by fl(1 / p) (two roundings); the conserved sum is then summed again over
      // the p_new ranks here. Relative to the sum of |row values|: gamma32(p_old + p_new + 2) for
      // the sum, gamma32(p_old + 1) / p_old for a mean.
      const double sum_tol = gamma32(p_old + p_new + 2), mean_tol = gamma32(p_old + 1) / p_old;
      int wrong = 0;
      for (Index i = 0; i < n; ++i) {
        double old_sum = 0.0, old_mean = 0.0, abs_sum = 0.0, abs_mean = 0.0;
        for (int r = 0; r < p_old; ++r) {
          old_sum += value(3, r, i), abs_sum += std::abs(value(3, r, i));
          old_mean += value(4, r, i) / p_old, abs_mean += std::abs(value(4, r, i));
        }
        wrong += params[i] != value(2, 0, i);  // every replica starts from the averaged model
        wrong += averaged[i] != value(2, 0, i);
        wrong += std::abs(residual_sum[i] - old_sum) > sum_tol * abs_sum;
        wrong += std::abs(momentum[i] - old_mean) > mean_tol * abs_mean;
      }
      CHECK(wrong == 0);
      const auto shared = to_host(s.exchange_state[1].view);  // StateMerge::mean: the old ranks' mean
      REQUIRE(shared.size() == static_cast<std::size_t>(shared_len));
      for (Index i = 0; i < shared_len; ++i) {
        double old_mean = 0.0, abs_mean = 0.0;
        for (int r = 0; r < p_old; ++r) old_mean += value(5, r, i) / p_old, abs_mean += std::abs(value(5, r, i));
        wrong += std::abs(shared[i] - old_mean) > mean_tol * abs_mean;
      }
      CHECK(wrong == 0);
      // Mean over the old ranks of the double values 1.5 + r: an exact sum and one division.
      const double scalar_mean = 1.5 + (p_old - 1) / 2.0;
      CHECK_THAT(s.scalars[0].second, WithinAbs(scalar_mean, u64 * scalar_mean));
      CHECK(s.optimizer_steps == 17);
    }
    comm.barrier();
    if (comm.rank() == 0) fs::remove_all(dir);
  }
}

TEST_CASE("bad checkpoint files fail on every rank with the file named and stay untouched", "[checkpoint]") {
  Communicator comm;
  const fs::path dir = shared_dir(comm, "bad");
  const std::string good = io::checkpoint_path(dir.string(), 3);
  io::write_checkpoint(comm, good, make_meta(comm, 3), make_state(comm.rank()));
  const std::string text = (dir / "text.h5").string(), truncated = (dir / "truncated.h5").string();
  const std::string incomplete = (dir / "incomplete.h5").string(), missing = (dir / "missing.h5").string();
  if (comm.rank() == 0) {
    std::ofstream(text) << "this is not HDF5\n";
    const std::string bytes = file_bytes(good);
    std::ofstream(truncated, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
    // An HDF5 file whose writer died before the final "complete" attribute.
    hid_t f = H5Fcreate(incomplete.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    H5Fclose(f);
    // A complete-looking checkpoint without its replica dataset.
    fs::copy_file(good, missing);
    f = H5Fopen(missing.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    H5Ldelete(f, "/replicas/params", H5P_DEFAULT);
    H5Fclose(f);
  }
  comm.barrier();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {(dir / "absent.h5").string(), "does not exist"},
      {text, "not an HDF5 file"},
      {truncated, "truncated"},
      {incomplete, "is incomplete"},
      {missing, "dataset /replicas/params is missing"},
  };
  for (const auto& [path, message] : cases) {
    INFO(path);
    const std::string before = fs::exists(path) ? file_bytes(path) : "";
    CHECK_THROWS_WITH(io::read_checkpoint_metadata(comm, path), A2SGD_CONTAINS(message) && A2SGD_CONTAINS(path));
    if (fs::exists(path)) CHECK(file_bytes(path) == before);
  }
  // The state a run expects must be in the file: a dense checkpoint has no residual.
  const std::string dense = io::checkpoint_path(dir.string(), 4);
  auto without_residual = make_state(comm.rank());
  without_residual.exchange_state.clear();
  io::write_checkpoint(comm, dense, make_meta(comm, 4), without_residual);
  auto s = empty_state();
  CHECK_THROWS_WITH(io::read_checkpoint(comm, dense, io::read_checkpoint_metadata(comm, dense), s),
                    A2SGD_CONTAINS("dataset /replicas/residual is missing"));
  // Wrong parameter count in the expecting state.
  auto small = empty_state();
  small.params = FloatView("p", n - 1);
  CHECK_THROWS_WITH(io::read_checkpoint(comm, good, io::read_checkpoint_metadata(comm, good), small),
                    A2SGD_CONTAINS("holds 1037 parameters"));
  // Exchange state of another length than the file's (e.g. another PowerSGD rank).
  auto other_len = empty_state();
  other_len.exchange_state[1].view = FloatView("q", shared_len + 1);
  CHECK_THROWS_WITH(io::read_checkpoint(comm, good, io::read_checkpoint_metadata(comm, good), other_len),
                    A2SGD_CONTAINS("/replicas/shared has shape [" + std::to_string(comm.size()) + ", 37], expected [" +
                                   std::to_string(comm.size()) + ", 38]"));
  // An unwritable destination fails on every rank, and leaves nothing behind.
  CHECK_THROWS_WITH(io::write_checkpoint(comm, (dir / "no" / "such" / "dir.h5").string(), make_meta(comm, 1),
                                         make_state(comm.rank())),
                    A2SGD_CONTAINS("cannot create checkpoint file"));
  comm.barrier();
  if (comm.rank() == 0) fs::remove_all(dir);
}

namespace {

// Replaces the "names" attribute of `dataset` in `path` (a fixed-length string, as the writer's).
void set_names(const std::string& path, const char* dataset, const std::string& names) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  const hid_t d = H5Dopen2(f, dataset, H5P_DEFAULT);
  H5Adelete(d, "names");
  const hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, names.size());
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate2(d, "names", type, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, type, names.data());
  H5Aclose(a), H5Sclose(space), H5Tclose(type), H5Dclose(d), H5Fclose(f);
}

}  // namespace

TEST_CASE(
    "per-rank values: names that do not match the columns are refused, optional ones keep their value, "
    "model state round trips",
    "[checkpoint]") {
  Communicator comm;
  const fs::path dir = shared_dir(comm, "named");
  auto state = make_state(comm.rank());
  state.model_state = {{"carried", filled(6, comm.rank(), 11), StateMerge::mean}};
  const std::string good = io::checkpoint_path(dir.string(), 5);
  io::write_checkpoint(comm, good, make_meta(comm, 5), state);
  // The model state comes back bit for bit at the same rank count; an optional scalar the file
  // lacks keeps the caller's value.
  auto back = empty_state();
  back.model_state = {{"carried", FloatView("c", 11), StateMerge::mean}};
  back.scalars.emplace_back("newer_value", 42.0);
  back.optional_scalars = {"newer_value"};
  io::read_checkpoint(comm, good, io::read_checkpoint_metadata(comm, good), back);
  CHECK(to_host(back.model_state[0].view) == to_host(state.model_state[0].view));
  CHECK(back.scalars[2].second == 42.0);
  CHECK(back.scalars[0].second == 1.5 + comm.rank());
  // A crafted file whose names list more values than the dataset has columns.
  const std::string crafted = (dir / "crafted.h5").string();
  if (comm.rank() == 0) {
    fs::copy_file(good, crafted);
    set_names(crafted, "/replicas/scalars", "loss_sum\nbytes\nextra");
  }
  comm.barrier();
  auto again = empty_state();
  CHECK_THROWS_WITH(io::read_checkpoint(comm, crafted, io::read_checkpoint_metadata(comm, crafted), again),
                    A2SGD_CONTAINS("has 2 columns but names 3 values") && A2SGD_CONTAINS(crafted));
  comm.barrier();
  if (comm.rank() == 0) fs::remove_all(dir);
}
