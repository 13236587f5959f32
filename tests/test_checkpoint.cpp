#include "CheckpointTesting.hpp"
#include "TestingCatch.hpp"

#include <a2sgd/core/Error.hpp>
#include <a2sgd/io/Checkpoint.hpp>

#include <hdf5.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <tuple>

#include <unistd.h>

using namespace a2sgd;
using namespace a2sgd::testing;
using namespace a2sgd::testing::checkpoint;

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

TEST_CASE("checksums: a damaged byte in any row is refused with the dataset named", "[checkpoint]") {
  Communicator comm;
  const fs::path dir = shared_dir(comm, "crc");
  const std::string good = write_full(comm, dir);
  const Loaded reference = load(comm, good);
  CHECK(reference.meta.format_version == io::checkpoint_format_version);
  const std::string bad = (dir / "bad.h5").string();
  std::vector<RowSpan> spans;
  std::string bytes;
  if (comm.rank() == 0) {
    spans = row_spans(good);
    bytes = file_bytes(good);
  }
  std::uint64_t count = spans.size();
  comm.broadcast(&count, 1, 0);
  REQUIRE(count == 5 * static_cast<std::uint64_t>(comm.size()) + 1 + 2 * static_cast<std::uint64_t>(comm.size()));
  for (std::uint64_t k = 0; k < count; ++k) {
    // The middle byte of row k's data, then its last byte (the exponent of a float).
    for (int where = 0; where < 2; ++where) {
      std::string name;
      std::uint64_t row = 0;
      if (comm.rank() == 0) {
        std::string damaged = bytes;
        const RowSpan& s = spans[k];
        damaged[s.offset + (where == 0 ? s.bytes / 2 : s.bytes - 1)] ^= 0x10;
        write_bytes(bad, damaged);
        name = s.dataset;
        row = s.row;
      }
      std::uint64_t len = name.size();
      comm.broadcast(&len, 1, 0);
      name.resize(len);
      comm.broadcast(name.data(), len, 0);
      comm.broadcast(&row, 1, 0);
      INFO(name << " row " << row);
      // Every rank reads every row of scalars/timers and of the averaged model, and its own rows
      // of the others; a row that no rank reads at this world size is still refused by the
      // rank that reads it, so the collective load fails.
      CHECK_THROWS_WITH(load(comm, bad),
                        A2SGD_CONTAINS("dataset " + name + " row ") && A2SGD_CONTAINS("fails its checksum"));
    }
  }
  comm.barrier();
  if (comm.rank() == 0) fs::remove_all(dir);
}

namespace {

// Serial edits of a checkpoint with the HDF5 C API, as a hostile or older writer would leave it.
void edit(const std::string& path, const std::function<void(hid_t)>& fn) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  REQUIRE(f >= 0);
  fn(f);
  H5Fclose(f);
}

herr_t drop_checksum(hid_t, const char* name, const H5L_info_t*, void* file) {
  const hid_t f = *static_cast<hid_t*>(file);
  const hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  if (d >= 0) {
    if (H5Aexists(d, "crc32") > 0) H5Adelete(d, "crc32");
    H5Dclose(d);
  }
  return 0;
}

template <class T>
void set_attr(hid_t f, const char* name, hid_t file_type, hid_t mem_type, T value) {
  H5Adelete(f, name);
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate2(f, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, mem_type, &value);
  H5Aclose(a), H5Sclose(space);
}

// Format 1: no checksums.
void make_format_1(hid_t f) {
  hid_t file = f;
  H5Lvisit(f, H5_INDEX_NAME, H5_ITER_INC, drop_checksum, &file);
  set_attr<std::int64_t>(f, "format_version", H5T_STD_I64LE, H5T_NATIVE_INT64, 1);
}

// Replaces dataset `name` by one of the same shape stored as `type`, holding `values`.
void retype(hid_t f, const char* name, hid_t type, const std::vector<float>& values) {
  const hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  const hid_t space = H5Dget_space(d);
  H5Dclose(d);
  H5Ldelete(f, name, H5P_DEFAULT);
  const hid_t nd = H5Dcreate2(f, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(nd, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
  H5Dclose(nd), H5Sclose(space);
}

}  // namespace

TEST_CASE("checkpoint values: format 1 files load; wrong types, ranges and non-finite values are refused",
          "[checkpoint]") {
  Communicator comm;
  const fs::path dir = shared_dir(comm, "strict");
  const std::string good = write_full(comm, dir);
  const Loaded reference = load(comm, good);
  const auto p = static_cast<std::size_t>(comm.size());
  auto variant = [&](const std::string& name, const std::function<void(hid_t)>& fn) {
    const std::string path = (dir / (name + ".h5")).string();
    if (comm.rank() == 0) {
      fs::copy_file(good, path, fs::copy_options::overwrite_existing);
      edit(path, fn);
    }
    comm.barrier();
    return path;
  };
  // A file of format 1 (no checksums) loads into the same state, bar its version number.
  {
    const std::string v1 = variant("v1", make_format_1);
    Loaded got = load(comm, v1);
    CHECK(got.meta.format_version == 1);
    got.meta.format_version = reference.meta.format_version;
    CHECK(got == reference);
  }
  std::vector<float> nan_row(p * static_cast<std::size_t>(n), 1.0f);
  nan_row[p * static_cast<std::size_t>(n) - 1] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> ones(p * static_cast<std::size_t>(n), 1.0f);
  const std::vector<std::pair<std::string, std::function<void(hid_t)>>> cases = {
      {"attribute \"step\" is not stored as uint64",
       [](hid_t f) { set_attr<double>(f, "step", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1.5); }},
      {"attribute \"world_size\" is not stored as int64",
       [&](hid_t f) { set_attr<std::int32_t>(f, "world_size", H5T_STD_I32LE, H5T_NATIVE_INT32, comm.size()); }},
      {"attribute \"step\" = 9223372036854775808 is out of range",
       [](hid_t f) { set_attr<std::uint64_t>(f, "step", H5T_STD_U64LE, H5T_NATIVE_UINT64, std::uint64_t(1) << 63); }},
      {"epoch 3 is beyond step 2",
       [](hid_t f) {
         set_attr<std::uint64_t>(f, "step", H5T_STD_U64LE, H5T_NATIVE_UINT64, 2);
         set_attr<std::uint64_t>(f, "epoch", H5T_STD_U64LE, H5T_NATIVE_UINT64, 3);
       }},
      {"batch_size -5", [](hid_t f) { set_attr<std::int64_t>(f, "batch_size", H5T_STD_I64LE, H5T_NATIVE_INT64, -5); }},
      {"dataset /replicas/params is not float32",
       [&](hid_t f) {
         make_format_1(f);
         retype(f, "/replicas/params", H5T_STD_I32LE, ones);
       }},
      {"dataset /replicas/optimizer/momentum is not float32",
       [&](hid_t f) {
         make_format_1(f);
         retype(f, "/replicas/optimizer/momentum", H5T_IEEE_F64LE, ones);
       }},
      // Without checksums (format 1) a NaN still does not pass.
      {"dataset /replicas/residual row " + std::to_string(p - 1) + " holds a non-finite value",
       [&](hid_t f) {
         make_format_1(f);
         retype(f, "/replicas/residual", H5T_IEEE_F32LE, nan_row);
       }},
      {"dataset /replicas/params has no checksum",
       [](hid_t f) {
         const hid_t d = H5Dopen2(f, "/replicas/params", H5P_DEFAULT);
         H5Adelete(d, "crc32");
         H5Dclose(d);
       }},
  };
  for (const auto& [message, fn] : cases) {
    INFO(message);
    const std::string path = variant("case", fn);
    CHECK_THROWS_WITH(load(comm, path), A2SGD_CONTAINS(message) && A2SGD_CONTAINS(path));
  }
  comm.barrier();
  if (comm.rank() == 0) fs::remove_all(dir);
}
