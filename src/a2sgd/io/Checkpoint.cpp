#include <a2sgd/comm/ViewCollectives.hpp>
#include <a2sgd/core/FaultInjection.hpp>
#include <a2sgd/io/Checkpoint.hpp>
#include <a2sgd/io/impl/Hdf5.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <type_traits>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <zlib.h>

namespace a2sgd::io {
namespace {

using impl::check;
using impl::Handle;
namespace fs = std::filesystem;

// MPI-IO counts are int: one collective transfer moves at most 2^28 floats (1 GiB).
constexpr hsize_t max_transfer = hsize_t(1) << 28;

constexpr std::uint64_t max_counter = std::uint64_t(1) << 53;

using HostFloats = Kokkos::View<float*, Kokkos::HostSpace>;

HostFloats to_host(const FloatView& v) {
  return Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
}

Handle mpio_fapl(const Communicator& comm) {
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "H5Pcreate(file access) failed");
  check(H5Pset_fapl_mpio(fapl.get(), comm.get(), MPI_INFO_NULL), "H5Pset_fapl_mpio failed");
  return fapl;
}

// The file format of HDF5 1.8 and later keeps a checksum in every superblock, object header
// and attribute record, so a damaged byte of metadata fails to open instead of being read.
Handle create_fapl(const Communicator& comm) {
  Handle fapl = mpio_fapl(comm);
  check(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_LATEST), "H5Pset_libver_bounds failed");
  return fapl;
}

// ---- checksums of the data ----

// Computed over the values' bytes in memory, which are the stored IEEE little-endian bytes.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "checkpoint checksums assume a little-endian host");

std::uint32_t crc32_of(const void* data, std::size_t bytes, std::uint32_t crc = 0) {
  return static_cast<std::uint32_t>(crc32_z(crc, static_cast<const Bytef*>(data), bytes));
}

constexpr const char* checksum_attr = "crc32";

// One CRC-32 per row of a dataset (a single one for a vector), as an attribute of it.
void write_checksums(hid_t dset, const std::vector<std::uint32_t>& crcs, const std::string& name) {
  const hsize_t count = crcs.size();
  Handle space(H5Screate_simple(1, &count, nullptr), H5Sclose, "H5Screate_simple failed");
  Handle attr(H5Acreate2(dset, checksum_attr, H5T_STD_U32LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
              "cannot create the checksums of " + name);
  check(H5Awrite(attr.get(), H5T_NATIVE_UINT32, crcs.data()), "cannot write the checksums of " + name);
}

// The stored CRC of row `row` of a dataset with `rows` rows; none when the file predates them.
std::optional<std::uint32_t> stored_checksum(hid_t dset, hsize_t row, hsize_t rows, bool required,
                                             const std::string& name, const std::string& path) {
  if (H5Aexists(dset, checksum_attr) <= 0) {
    if (required) throw Error(path + ": dataset " + name + " has no checksum");
    return std::nullopt;
  }
  Handle attr(H5Aopen(dset, checksum_attr, H5P_DEFAULT), H5Aclose, path + ": cannot open the checksums of " + name);
  Handle space(H5Aget_space(attr.get()), H5Sclose, path + ": cannot read the checksums of " + name);
  Handle type(H5Aget_type(attr.get()), H5Tclose, path + ": cannot read the checksums of " + name);
  hsize_t count = 0;
  if (H5Sget_simple_extent_ndims(space.get()) != 1 || H5Sget_simple_extent_dims(space.get(), &count, nullptr) != 1 ||
      count != rows || H5Tget_class(type.get()) != H5T_INTEGER || H5Tget_size(type.get()) != 4)
    throw Error(path + ": the checksums of dataset " + name + " do not match its rows");
  std::vector<std::uint32_t> crcs(count);
  check(H5Aread(attr.get(), H5T_NATIVE_UINT32, crcs.data()), path + ": cannot read the checksums of " + name);
  return crcs[row];
}

void verify_checksum(std::optional<std::uint32_t> stored, std::uint32_t computed, hsize_t row, const std::string& name,
                     const std::string& path) {
  if (stored && *stored != computed) {
    char text[96];
    std::snprintf(text, sizeof text, " (stored %08x, computed %08x)", *stored, computed);
    throw Error(path + ": dataset " + name + " row " + std::to_string(row) +
                " fails its checksum: the file is damaged" + text);
  }
}

// Model and optimizer state must be finite: a NaN row would only show later as a diverged run.
void require_finite(const float* v, hsize_t n, hsize_t row, const std::string& name, const std::string& path) {
  for (hsize_t i = 0; i < n; ++i)
    if (!std::isfinite(v[i]))
      throw Error(path + ": dataset " + name + " row " + std::to_string(row) + " holds a non-finite value (at " +
                  std::to_string(i) + ")");
}

// Datasets are written in full right after creation: writing HDF5's fill values first (its
// default with parallel early allocation) would double the I/O.
Handle no_fill_dcpl() {
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "H5Pcreate(dataset create) failed");
  check(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), "H5Pset_fill_time failed");
  return dcpl;
}

Handle transfer_plist(bool collective) {
  Handle dxpl(H5Pcreate(H5P_DATASET_XFER), H5Pclose, "H5Pcreate(transfer) failed");
  check(H5Pset_dxpl_mpio(dxpl.get(), collective ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT),
        "H5Pset_dxpl_mpio failed");
  return dxpl;
}

// ---- attributes (collective: every rank writes the same value) ----

void write_attr(hid_t obj, const char* name, hid_t type, const void* value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose, "H5Screate failed");
  Handle attr(H5Acreate2(obj, name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
              std::string("cannot create attribute ") + name);
  check(H5Awrite(attr.get(), type, value), std::string("cannot write attribute ") + name);
}

void write_attr(hid_t obj, const char* name, std::int64_t v) {
  write_attr(obj, name, H5T_NATIVE_INT64, &v);
}
void write_attr(hid_t obj, const char* name, std::uint64_t v) {
  write_attr(obj, name, H5T_NATIVE_UINT64, &v);
}
void write_attr(hid_t obj, const char* name, const std::string& v) {
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose, "H5Tcopy failed");
  check(H5Tset_size(type.get(), std::max<std::size_t>(v.size(), 1)), "H5Tset_size failed");
  const std::string padded = v.empty() ? std::string(1, '\0') : v;
  write_attr(obj, name, type.get(), padded.data());
}

bool has_attr(hid_t obj, const char* name) {
  return H5Aexists(obj, name) > 0;
}

// The writer stores 64-bit integers of one signedness per attribute; anything else (a float
// "step", a 32-bit or unsigned "world_size") is refused rather than converted.
template <class T>
T read_int_attr(hid_t obj, const char* name, hid_t type, const std::string& file) {
  static_assert(sizeof(T) == 8);
  if (!has_attr(obj, name)) throw Error(file + ": attribute \"" + name + "\" is missing");
  Handle attr(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose, file + ": cannot open attribute " + name);
  Handle stored(H5Aget_type(attr.get()), H5Tclose, file + ": cannot read the type of attribute " + name);
  Handle space(H5Aget_space(attr.get()), H5Sclose, file + ": cannot read the shape of attribute " + name);
  const bool want_signed = std::is_signed_v<T>;
  if (H5Tget_class(stored.get()) != H5T_INTEGER || H5Tget_size(stored.get()) != 8 ||
      (H5Tget_sign(stored.get()) == H5T_SGN_2) != want_signed)
    throw Error(file + ": attribute \"" + name + "\" is not stored as " + (want_signed ? "int64" : "uint64"));
  if (H5Sget_simple_extent_type(space.get()) != H5S_SCALAR)
    throw Error(file + ": attribute \"" + name + "\" is not a single value");
  T v{};
  check(H5Aread(attr.get(), type, &v), file + ": cannot read attribute " + name);
  return v;
}

std::string read_string_attr(hid_t obj, const char* name, const std::string& file) {
  if (!has_attr(obj, name)) throw Error(file + ": attribute \"" + name + "\" is missing");
  Handle attr(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose, file + ": cannot open attribute " + name);
  Handle type(H5Aget_type(attr.get()), H5Tclose, file + ": cannot read the type of attribute " + name);
  if (H5Tget_class(type.get()) != H5T_STRING || H5Tis_variable_str(type.get()) > 0)
    throw Error(file + ": attribute \"" + name + "\" is not a fixed-length string");
  std::string v(H5Tget_size(type.get()), '\0');
  check(H5Aread(attr.get(), type.get(), v.data()), file + ": cannot read attribute " + name);
  v.erase(std::find(v.begin(), v.end(), '\0'), v.end());
  return v;
}

// ---- datasets ----

Handle create_group(hid_t file, const char* name) {
  return Handle(H5Gcreate2(file, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
                std::string("cannot create group ") + name);
}

// [p, n] float32; every rank writes its row.
void write_rows(hid_t file, const std::string& name, const HostFloats& row, int p, int rank, hid_t dxpl,
                const std::vector<std::uint32_t>& crcs) {
  const hsize_t n = row.extent(0);
  const hsize_t dims[2] = {static_cast<hsize_t>(p), n};
  Handle space(H5Screate_simple(2, dims, nullptr), H5Sclose, "H5Screate_simple failed");
  Handle dcpl = no_fill_dcpl();
  Handle dset(H5Dcreate2(file, name.c_str(), H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
              H5Dclose, "cannot create dataset " + name);
  for (hsize_t off = 0; off < n; off += max_transfer) {
    const hsize_t len = std::min(max_transfer, n - off);
    const hsize_t start[2] = {static_cast<hsize_t>(rank), off}, count[2] = {1, len};
    check(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr), "hyperslab failed");
    Handle mem(H5Screate_simple(1, &len, nullptr), H5Sclose, "H5Screate_simple failed");
    check(H5Dwrite(dset.get(), H5T_NATIVE_FLOAT, mem.get(), space.get(), dxpl, row.data() + off),
          "cannot write dataset " + name);
  }
  write_checksums(dset.get(), crcs, name);
}

// [n] float32 written by rank 0 (the others take part in the collective with an empty selection).
void write_vector(hid_t file, const std::string& name, const HostFloats& v, hsize_t n, int rank, hid_t dxpl,
                  std::uint32_t crc) {
  Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose, "H5Screate_simple failed");
  Handle dcpl = no_fill_dcpl();
  Handle dset(H5Dcreate2(file, name.c_str(), H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
              H5Dclose, "cannot create dataset " + name);
  float dummy = 0.0f;
  for (hsize_t off = 0; off < n; off += max_transfer) {
    // Every rank takes part with the same extents; ranks other than 0 select nothing (a
    // zero-sized dataspace would make HDF5 skip the collective call on those ranks).
    const hsize_t len = std::min(max_transfer, n - off);
    Handle mem(H5Screate_simple(1, &len, nullptr), H5Sclose, "H5Screate_simple failed");
    if (rank == 0) {
      check(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, &off, nullptr, &len, nullptr), "hyperslab failed");
    } else {
      check(H5Sselect_none(space.get()), "H5Sselect_none failed");
      check(H5Sselect_none(mem.get()), "H5Sselect_none failed");
    }
    check(H5Dwrite(dset.get(), H5T_NATIVE_FLOAT, mem.get(), space.get(), dxpl, rank == 0 ? v.data() + off : &dummy),
          "cannot write dataset " + name);
  }
  write_checksums(dset.get(), {crc}, name);
}

std::vector<hsize_t> dataset_shape(hid_t file, const std::string& name, const std::string& path) {
  if (H5Lexists(file, name.c_str(), H5P_DEFAULT) <= 0) throw Error(path + ": dataset " + name + " is missing");
  Handle dset(H5Dopen2(file, name.c_str(), H5P_DEFAULT), H5Dclose, path + ": cannot open dataset " + name);
  Handle space(H5Dget_space(dset.get()), H5Sclose, path + ": cannot read the shape of " + name);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) throw Error(path + ": cannot read the shape of " + name);
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return dims;
}

void require_shape(hid_t file, const std::string& name, const std::vector<hsize_t>& want, const std::string& path) {
  const auto got = dataset_shape(file, name, path);
  if (got != want) {
    auto str = [](const std::vector<hsize_t>& d) {
      std::string s = "[";
      for (std::size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
      return s + "]";
    };
    throw Error(path + ": dataset " + name + " has shape " + str(got) + ", expected " + str(want));
  }
}

// Reads row `row` of an [p, n] dataset (or the whole of an [n] one when `vector`) into `out`,
// which must then pass the stored checksum (when the file has them) and hold finite values only.
void read_row(hid_t file, const std::string& name, hsize_t row, bool vector, float* out, hsize_t n, hid_t dxpl,
              bool require_checksum, const std::string& path) {
  Handle dset(H5Dopen2(file, name.c_str(), H5P_DEFAULT), H5Dclose, path + ": cannot open dataset " + name);
  Handle type(H5Dget_type(dset.get()), H5Tclose, path + ": cannot read the type of " + name);
  if (H5Tequal(type.get(), H5T_IEEE_F32LE) <= 0) throw Error(path + ": dataset " + name + " is not float32");
  Handle space(H5Dget_space(dset.get()), H5Sclose, path + ": cannot read dataset " + name);
  hsize_t dims[2] = {1, 1};
  H5Sget_simple_extent_dims(space.get(), dims, nullptr);
  const auto stored = stored_checksum(dset.get(), vector ? 0 : row, vector ? 1 : dims[0], require_checksum, name, path);
  std::uint32_t crc = 0;
  for (hsize_t off = 0; off < n; off += max_transfer) {
    const hsize_t len = std::min(max_transfer, n - off);
    if (vector) {
      check(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, &off, nullptr, &len, nullptr), "hyperslab failed");
    } else {
      const hsize_t start[2] = {row, off}, count[2] = {1, len};
      check(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr), "hyperslab failed");
    }
    Handle mem(H5Screate_simple(1, &len, nullptr), H5Sclose, "H5Screate_simple failed");
    check(H5Dread(dset.get(), H5T_NATIVE_FLOAT, mem.get(), space.get(), dxpl, out + off),
          path + ": cannot read dataset " + name + " (truncated or corrupt file?)");
    crc = crc32_of(out + off, len * sizeof(float), crc);
  }
  verify_checksum(stored, crc, row, name, path);
  require_finite(out, n, row, name, path);
}

// Per-rank named values: [p, k] float64 with their names as an attribute. A row holds at least
// one value (zero when there are none).
std::vector<double> named_row(const std::vector<std::pair<std::string, double>>& values) {
  std::vector<double> row(std::max<std::size_t>(values.size(), 1), 0.0);
  for (std::size_t i = 0; i < values.size(); ++i) row[i] = values[i].second;
  return row;
}

void write_named_values(hid_t f, const char* name, const std::vector<std::pair<std::string, double>>& values, int p,
                        int rank, hid_t dxpl, const std::vector<std::uint32_t>& crcs) {
  const std::vector<double> row = named_row(values);
  const hsize_t dims[2] = {static_cast<hsize_t>(p), row.size()};
  Handle space(H5Screate_simple(2, dims, nullptr), H5Sclose, "H5Screate_simple failed");
  Handle dset(H5Dcreate2(f, name, H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose,
              std::string("cannot create dataset ") + name);
  std::string names;
  for (std::size_t i = 0; i < values.size(); ++i) names += (i ? "\n" : "") + values[i].first;
  const hsize_t start[2] = {static_cast<hsize_t>(rank), 0}, count[2] = {1, dims[1]};
  check(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr), "hyperslab failed");
  Handle mem(H5Screate_simple(1, &dims[1], nullptr), H5Sclose, "H5Screate_simple failed");
  check(H5Dwrite(dset.get(), H5T_NATIVE_DOUBLE, mem.get(), space.get(), dxpl, row.data()),
        std::string("cannot write dataset ") + name);
  write_attr(dset.get(), "names", names);
  write_checksums(dset.get(), crcs, name);
}

// Restores named per-rank values: this rank's row (same world size) or the mean over the old
// ranks (elastic restart). Every requested name must be present but those in `optional` (values
// newer than some files), which keep the caller's value when absent.
void read_named_values(hid_t f, const char* name, std::vector<std::pair<std::string, double>>& values, hsize_t p_old,
                       bool same, int rank, hid_t dxpl, bool require_checksum, const std::string& path,
                       const std::vector<std::string>& optional = {}) {
  const auto dims = dataset_shape(f, name, path);
  if (dims.size() != 2 || dims[0] != p_old) throw Error(path + ": dataset " + name + " has the wrong shape");
  Handle dset(H5Dopen2(f, name, H5P_DEFAULT), H5Dclose, path + ": cannot open " + name);
  Handle type(H5Dget_type(dset.get()), H5Tclose, path + ": cannot read the type of " + name);
  if (H5Tequal(type.get(), H5T_IEEE_F64LE) <= 0)
    throw Error(path + ": dataset " + std::string(name) + " is not float64");
  std::vector<std::string> names;
  const std::string all_names = read_string_attr(dset.get(), "names", path);
  for (std::size_t start = 0; !all_names.empty() && start <= all_names.size();) {
    const std::size_t end = std::min(all_names.find('\n', start), all_names.size());
    names.push_back(all_names.substr(start, end - start));
    start = end + 1;
  }
  // No values are written as one unused column (named_row), since HDF5 rows need a width.
  if (names.size() != dims[1] && !(names.empty() && dims[1] == 1))
    throw Error(path + ": dataset " + name + " has " + std::to_string(dims[1]) + " columns but names " +
                std::to_string(names.size()) + " values");
  std::vector<double> all(dims[0] * dims[1]);
  if (!all.empty())
    check(H5Dread(dset.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, dxpl, all.data()), path + ": cannot read " + name);
  for (hsize_t r = 0; r < dims[0]; ++r) {
    const double* row = all.data() + r * dims[1];
    // Not required finite: some counters start at infinity (a schedule's best loss so far).
    verify_checksum(stored_checksum(dset.get(), r, dims[0], require_checksum, name, path),
                    crc32_of(row, dims[1] * sizeof(double)), r, name, path);
  }
  for (auto& [key, value] : values) {
    const auto it = std::find(names.begin(), names.end(), key);
    if (it == names.end() && std::find(optional.begin(), optional.end(), key) != optional.end()) continue;
    if (it == names.end()) throw Error(path + ": per-rank value \"" + key + "\" is missing from " + name);
    const auto col = static_cast<std::size_t>(it - names.begin());
    if (same) {
      value = all[static_cast<std::size_t>(rank) * dims[1] + col];
    } else {
      double sum = 0.0;
      for (hsize_t r = 0; r < p_old; ++r) sum += all[r * dims[1] + col];
      value = sum / static_cast<double>(p_old);
    }
  }
}

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string exchange_dataset(const std::string& name) {
  return "/replicas/" + name;
}
std::string optimizer_dataset(const std::string& name) {
  return "/replicas/optimizer/" + name;
}

std::string model_state_dataset(const std::string& name) {
  return "/replicas/model_state/" + name;
}

Handle open_read_only(const Communicator& comm, const std::string& path) {
  impl::silence_hdf5_errors();
  std::error_code ec;
  comm.raise_if_any(!fs::is_regular_file(path, ec), "checkpoint " + path + " does not exist or is not a file");
  Handle file;
  comm.all_or_throw([&] {
    Handle fapl = mpio_fapl(comm);
    file = Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose,
                  "cannot open checkpoint " + path + ": not an HDF5 file, or truncated");
  });
  return file;
}

// HDF5 metadata (superblock, object headers, attributes) beyond the data: a few KiB per dataset;
// the allowance is generous because it is only claimed while the file is written.
std::uint64_t metadata_allowance(std::size_t datasets) {
  return (std::uint64_t(1) << 20) + std::uint64_t(datasets) * (std::uint64_t(16) << 10);
}

std::string megabytes(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MB", static_cast<double>(bytes) / 1e6);
  return text;
}

// Creates the empty temporary file with `bytes` of disk space allocated past its end
// (FALLOC_FL_KEEP_SIZE: the size stays 0, so HDF5's create does not truncate the claim away).
// Where the file system cannot allocate ahead, its free space is checked instead.
void reserve_space(const std::string& tmp, const std::string& path, std::uint64_t bytes) {
  // Test hook (FaultInjection.hpp): skip the claim, so that a full disk fails inside HDF5.
  if (const char* skip = std::getenv("A2SGD_FAULT_NO_RESERVE"); skip && std::string(skip) == "1") return;
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    throw Error("cannot create checkpoint file " + tmp + ": " + std::strerror(err));
  }
  int err = 0;
#ifdef __linux__
  if (::fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(bytes)) != 0) err = errno;
#else
  err = EOPNOTSUPP;
#endif
  ::close(fd);
  if (err == EOPNOTSUPP || err == ENOSYS) {
    struct statvfs fs_info {};
    if (::statvfs(tmp.c_str(), &fs_info) == 0 &&
        std::uint64_t(fs_info.f_bavail) * std::uint64_t(fs_info.f_frsize) < bytes)
      err = ENOSPC;
    else
      err = 0;
  }
  if (err != 0) {
    ::unlink(tmp.c_str());
    throw Error("cannot write checkpoint " + path + ": " + std::strerror(err) + " (it needs about " + megabytes(bytes) +
                "; the previous checkpoints are kept)");
  }
}

bool finalize_unsafe = false;

}  // namespace

std::string checkpoint_path(const std::string& dir, std::uint64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "ckpt-%09llu.h5", static_cast<unsigned long long>(step));
  return (fs::path(dir) / name).string();
}

std::vector<std::pair<std::uint64_t, std::string>> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<std::uint64_t, std::string>> found;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return found;
  static const std::regex pattern("ckpt-([0-9]+)\\.h5");
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file(ec) && std::regex_match(name, m, pattern))
      found.emplace_back(std::stoull(m[1].str()), entry.path().string());
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return found;
}

namespace {

void check_state(const Communicator& comm, const CheckpointMetadata& meta, const CheckpointState& state) {
  const auto n = static_cast<std::size_t>(meta.num_params);
  comm.all_or_throw([&] {
    auto need = [&](const FloatView& v, const std::string& what) {
      if (v.extent(0) != n)
        throw InvalidArgument("write_checkpoint: " + what + " has " + std::to_string(v.extent(0)) + " values, not " +
                              std::to_string(n));
    };
    need(state.params, "params");
    need(state.averaged, "averaged model");
    for (const auto& s : state.optimizer_state) need(s.view, s.name);
    if (meta.world_size != comm.size())
      throw InvalidArgument("write_checkpoint: metadata world size differs from the communicator");
    if (meta.batch_size < 1) throw InvalidArgument("write_checkpoint: metadata batch size must be at least 1");
  });
}

// Identical attribute values on every rank (parallel HDF5 metadata writes are collective).
std::string agreed_creation_time(const Communicator& comm, const CheckpointMetadata& meta) {
  std::string created = meta.created.empty() ? now_utc() : meta.created;
  std::uint64_t created_len = created.size();
  comm.broadcast(&created_len, 1, 0);
  created.resize(created_len);
  comm.broadcast(created.data(), created.size(), 0);
  return created;
}

// This rank's rows on the host, and every row's CRC-32 on every rank, gathered in one collective
// before the file exists (a dataset's checksum attribute is written with the same value on every
// rank). Order: params, exchange state, optimizer state, model state, averaged model (rank 0's),
// scalars, timers.
struct HostRows {
  HostFloats params, averaged;
  std::vector<HostFloats> exchange, optimizer, model_state;
  std::vector<std::uint32_t> crcs;  // row j of rank r at [r * per_rank + j]
  std::size_t per_rank = 0;
  std::uint64_t data_bytes = 0;  // every rank's rows together

  HostRows(const Communicator& comm, const CheckpointState& state, std::size_t n)
      : params(to_host(state.params)), averaged(comm.rank() == 0 ? to_host(state.averaged) : HostFloats("empty", 0)) {
    for (const auto& s : state.exchange_state) exchange.push_back(to_host(s.view));
    for (const auto& s : state.optimizer_state) optimizer.push_back(to_host(s.view));
    for (const auto& s : state.model_state) model_state.push_back(to_host(s.view));
    const auto p = static_cast<std::uint64_t>(comm.size());
    std::vector<std::uint32_t> mine;
    auto add_row = [&](const HostFloats& v) {
      mine.push_back(crc32_of(v.data(), v.extent(0) * sizeof(float)));
      data_bytes += std::uint64_t(v.extent(0)) * sizeof(float) * p;
    };
    add_row(params);
    for (const auto* rows : {&exchange, &optimizer, &model_state})
      for (const auto& v : *rows) add_row(v);
    mine.push_back(comm.rank() == 0 ? crc32_of(averaged.data(), n * sizeof(float)) : 0);
    data_bytes += std::uint64_t(n) * sizeof(float);
    for (const auto* values : {&state.scalars, &state.timers}) {
      const std::vector<double> row = named_row(*values);
      mine.push_back(crc32_of(row.data(), row.size() * sizeof(double)));
      data_bytes += std::uint64_t(row.size()) * sizeof(double) * p;
    }
    per_rank = mine.size();
    crcs.resize(per_rank * static_cast<std::size_t>(p));
    comm.allgather(mine.data(), per_rank, crcs.data());
  }
  std::vector<std::uint32_t> crcs_of(std::size_t j) const {
    std::vector<std::uint32_t> column(crcs.size() / per_rank);
    for (std::size_t r = 0; r < column.size(); ++r) column[r] = crcs[r * per_rank + j];
    return column;
  }
};

void write_metadata(hid_t f, const CheckpointMetadata& meta, const CheckpointState& state, const std::string& created) {
  write_attr(f, "format_version", meta.format_version);
  write_attr(f, "library_version", meta.library_version);
  write_attr(f, "model", meta.model);
  write_attr(f, "layout", meta.layout);
  write_attr(f, "compressor", meta.compressor);
  write_attr(f, "compressor_options", meta.compressor_options);
  write_attr(f, "optimizer", meta.optimizer);
  write_attr(f, "optimizer_options", meta.optimizer_options);
  write_attr(f, "dataset", meta.dataset);
  write_attr(f, "world_size", meta.world_size);
  write_attr(f, "num_params", meta.num_params);
  write_attr(f, "batch_size", meta.batch_size);
  write_attr(f, "seed", meta.seed);
  write_attr(f, "step", meta.step);
  write_attr(f, "epoch", meta.epoch);
  write_attr(f, "samples_in_epoch", meta.samples_in_epoch);
  write_attr(f, "created", created);
  write_attr(f, "optimizer_steps", state.optimizer_steps);
  write_attr(f, "exchange_steps", state.exchange_steps);
}

// Attributes and datasets into the open file, each dataset between two agreements: a rank whose
// write failed must not leave the others inside HDF5's next collective call while it waits in
// the agreement. Marked complete last: a reader accepts only files that are.
void write_contents(const Communicator& comm, hid_t f, const std::string& tmp, const CheckpointMetadata& meta,
                    const CheckpointState& state, const HostRows& host, const std::string& created) {
  const int p = comm.size(), rank = comm.rank();
  // Closed before the file: a parallel file with open objects does not close.
  Handle dxpl, replicas, optimizer_group, model, model_state_group;
  comm.all_or_throw([&] {
    write_metadata(f, meta, state, created);
    dxpl = transfer_plist(false);
    replicas = create_group(f, "/replicas");
    optimizer_group = create_group(f, "/replicas/optimizer");
    model = create_group(f, "/model");
    if (!host.model_state.empty()) model_state_group = create_group(f, "/replicas/model_state");
  });
  std::size_t j = 0;
  auto rows = [&](const std::string& name, const HostFloats& row) {
    comm.all_or_throw([&] { write_rows(f, name, row, p, rank, dxpl.get(), host.crcs_of(j)); });
    ++j;
  };
  rows("/replicas/params", host.params);
  for (std::size_t i = 0; i < host.exchange.size(); ++i)
    rows(exchange_dataset(state.exchange_state[i].name), host.exchange[i]);
  for (std::size_t i = 0; i < host.optimizer.size(); ++i)
    rows(optimizer_dataset(state.optimizer_state[i].name), host.optimizer[i]);
  for (std::size_t i = 0; i < host.model_state.size(); ++i)
    rows(model_state_dataset(state.model_state[i].name), host.model_state[i]);
  comm.all_or_throw([&] {
    write_vector(f, "/model/params", host.averaged, static_cast<std::size_t>(meta.num_params), rank, dxpl.get(),
                 host.crcs_of(j)[0]);
    write_named_values(f, "/replicas/scalars", state.scalars, p, rank, dxpl.get(), host.crcs_of(j + 1));
    write_named_values(f, "/replicas/timers", state.timers, p, rank, dxpl.get(), host.crcs_of(j + 2));
  });
  comm.all_or_throw([&] {
    fault_point("checkpoint-write", meta.step, rank);
    write_attr(f, "complete", std::int64_t(1));
    check(H5Fflush(f, H5F_SCOPE_GLOBAL), "cannot flush " + tmp);
  });
}

// The file under its temporary name, its space claimed first: a full disk or an exhausted quota is
// then a clean error here, never a failed write in the middle of HDF5's collective state.
void write_temporary(const Communicator& comm, const std::string& tmp, const std::string& path,
                     const CheckpointMetadata& meta, const CheckpointState& state, const HostRows& host,
                     const std::string& created) {
  const int rank = comm.rank();
  comm.all_or_throw([&] {
    if (rank == 0) reserve_space(tmp, path, host.data_bytes + metadata_allowance(host.per_rank));
  });
  Handle file;
  comm.all_or_throw([&] {
    Handle fapl = create_fapl(comm);
    file = Handle(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose,
                  "cannot create checkpoint file " + tmp + " (missing directory, no permission or disk full?)");
  });
  bool written = false;
  try {
    write_contents(comm, file.get(), tmp, meta, state, host, created);
    written = true;
    comm.all_or_throw([&] { file.close("cannot close " + tmp + " (disk full?)"); });
  } catch (const CollectiveError&) {
    // A write that failed on some ranks leaves their views of the file different, and HDF5's
    // collective close would then wait forever in mismatched calls: the file is abandoned
    // instead (see can_finalize()) and its temporary name removed.
    if (!written) {
      file.release();
      finalize_unsafe = true;
    }
    if (rank == 0) ::unlink(tmp.c_str());
    throw;
  }
}

// Rank 0 publishes the file under its final name; rename() replaces atomically. Returns its size.
std::uint64_t publish(const Communicator& comm, const std::string& tmp, const std::string& path) {
  std::uint64_t bytes = 0;
  try {
    comm.all_or_throw([&] {
      if (comm.rank() != 0) return;
      // The data must be on disk before the new name is: whatever MPI-IO's flush did, sync here.
      // Truncating to the current size returns what the reservation claimed beyond the end.
      const int data_fd = ::open(tmp.c_str(), O_RDWR | O_CLOEXEC);
      struct stat st {};
      if (data_fd < 0 || ::fstat(data_fd, &st) != 0 || ::ftruncate(data_fd, st.st_size) != 0 || ::fsync(data_fd) != 0) {
        const int err = errno;
        if (data_fd >= 0) ::close(data_fd);
        ::unlink(tmp.c_str());
        throw Error("cannot sync " + tmp + ": " + std::strerror(err));
      }
      ::close(data_fd);
      if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        throw Error("cannot rename " + tmp + " to " + path + ": " + std::strerror(err));
      }
      const fs::path final_path(path);
      const std::string dir = final_path.parent_path().empty() ? "." : final_path.parent_path().string();
      const int fd = ::open(dir.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0) {
        ::fsync(fd);  // make the rename itself durable
        ::close(fd);
      }
      std::error_code ec;
      bytes = fs::file_size(path, ec);
    });
  } catch (const CollectiveError& e) {
    throw IoError(e.what(), e.origin_rank());
  }
  comm.broadcast(&bytes, 1, 0);
  return bytes;
}

// HDF5 does not pass on the system's reason for a failed write; a full file system is the usual one.
IoError write_error(const CollectiveError& e, const std::string& path, std::uint64_t data_bytes) {
  const fs::path final_path(path);
  struct statvfs fs_info {};
  const std::string dir = final_path.parent_path().empty() ? "." : final_path.parent_path().string();
  std::string reason;
  const std::string what = e.what();
  if (what.find(std::strerror(ENOSPC)) == std::string::npos && ::statvfs(dir.c_str(), &fs_info) == 0 &&
      std::uint64_t(fs_info.f_bavail) * std::uint64_t(fs_info.f_frsize) < data_bytes)
    reason = " (" + std::string(std::strerror(ENOSPC)) + ": " +
             megabytes(std::uint64_t(fs_info.f_bavail) * std::uint64_t(fs_info.f_frsize)) + " free)";
  return IoError(what.find(path) != std::string::npos ? what + reason : "checkpoint " + path + ": " + what + reason,
                 e.origin_rank());
}

}  // namespace

std::uint64_t write_checkpoint(const Communicator& comm, const std::string& path, const CheckpointMetadata& meta,
                               const CheckpointState& state) {
  impl::silence_hdf5_errors();
  check_state(comm, meta, state);
  const fs::path final_path(path);
  const std::string tmp = (final_path.parent_path() / ("." + final_path.filename().string() + ".tmp")).string();
  const std::string created = agreed_creation_time(comm, meta);
  Kokkos::fence();
  const HostRows host(comm, state, static_cast<std::size_t>(meta.num_params));
  try {
    write_temporary(comm, tmp, path, meta, state, host, created);
  } catch (const CollectiveError& e) {
    throw write_error(e, path, host.data_bytes);
  }
  return publish(comm, tmp, path);
}

bool can_finalize() noexcept {
  return !finalize_unsafe;
}

CheckpointMetadata read_checkpoint_metadata(const Communicator& comm, const std::string& path) {
  Handle file = open_read_only(comm, path);
  CheckpointMetadata m;
  comm.all_or_throw([&] {
    const hid_t f = file.get();
    if (!has_attr(f, "complete") || read_int_attr<std::int64_t>(f, "complete", H5T_NATIVE_INT64, path) != 1)
      throw Error("checkpoint " + path + " is incomplete (its write did not finish)");
    m.format_version = read_int_attr<std::int64_t>(f, "format_version", H5T_NATIVE_INT64, path);
    if (m.format_version < 1 || m.format_version > checkpoint_format_version)
      throw Error(path + ": checkpoint format version " + std::to_string(m.format_version) +
                  " is not supported (this build reads up to " + std::to_string(checkpoint_format_version) + ")");
    m.library_version = read_string_attr(f, "library_version", path);
    m.model = read_string_attr(f, "model", path);
    m.layout = read_string_attr(f, "layout", path);
    m.compressor = read_string_attr(f, "compressor", path);
    m.compressor_options = read_string_attr(f, "compressor_options", path);
    m.optimizer = read_string_attr(f, "optimizer", path);
    m.optimizer_options = read_string_attr(f, "optimizer_options", path);
    m.dataset = read_string_attr(f, "dataset", path);
    m.world_size = read_int_attr<std::int64_t>(f, "world_size", H5T_NATIVE_INT64, path);
    m.num_params = read_int_attr<std::int64_t>(f, "num_params", H5T_NATIVE_INT64, path);
    m.batch_size = read_int_attr<std::int64_t>(f, "batch_size", H5T_NATIVE_INT64, path);
    m.seed = read_int_attr<std::uint64_t>(f, "seed", H5T_NATIVE_UINT64, path);
    m.step = read_int_attr<std::uint64_t>(f, "step", H5T_NATIVE_UINT64, path);
    m.epoch = read_int_attr<std::uint64_t>(f, "epoch", H5T_NATIVE_UINT64, path);
    m.samples_in_epoch = read_int_attr<std::uint64_t>(f, "samples_in_epoch", H5T_NATIVE_UINT64, path);
    m.created = read_string_attr(f, "created", path);
    if (m.world_size < 1 || m.num_params < 1 || m.batch_size < 1)
      throw Error(path + ": world_size " + std::to_string(m.world_size) + ", num_params " +
                  std::to_string(m.num_params) + ", batch_size " + std::to_string(m.batch_size) +
                  ": each must be at least 1");
    // Counters stay below 2^53 so that they are exact in the double-precision metrics; an epoch
    // holds at least one step.
    for (const auto& [name, value] : {std::pair<const char*, std::uint64_t>{"step", m.step},
                                      {"epoch", m.epoch},
                                      {"samples_in_epoch", m.samples_in_epoch}})
      if (value > max_counter)
        throw Error(path + ": attribute \"" + name + "\" = " + std::to_string(value) +
                    " is out of range (at most 2^53)");
    if (m.epoch > m.step)
      throw Error(path + ": epoch " + std::to_string(m.epoch) + " is beyond step " + std::to_string(m.step));
    const auto p = static_cast<hsize_t>(m.world_size), n = static_cast<hsize_t>(m.num_params);
    require_shape(f, "/replicas/params", {p, n}, path);
    require_shape(f, "/model/params", {n}, path);
  });
  return m;
}

namespace {

// Checks that the file's datasets have the lengths this run's state expects and reads the
// exchange's and optimizer's step counters (on each rank; the caller makes errors collective).
void check_and_read_counters(hid_t f, const std::string& path, const CheckpointMetadata& meta, bool same,
                             CheckpointState& state) {
  const auto p_old = static_cast<hsize_t>(meta.world_size), n = static_cast<hsize_t>(meta.num_params);
  auto need = [&](const FloatView& v, const std::string& what) {
    if (v.extent(0) != n)
      throw InvalidArgument(path + ": holds " + std::to_string(n) + " parameters, this run's " + what + " has " +
                            std::to_string(v.extent(0)));
  };
  need(state.params, "model");
  if (state.averaged.extent(0) != 0) need(state.averaged, "averaged model");
  // Exchange state has the length the method chose (n for a residual); the file must agree.
  for (const auto& s : state.exchange_state)
    require_shape(f, exchange_dataset(s.name), {p_old, static_cast<hsize_t>(s.view.extent(0))}, path);
  for (const auto& s : state.optimizer_state) {
    need(s.view, s.name);
    require_shape(f, optimizer_dataset(s.name), {p_old, n}, path);
  }
  if (same)
    for (const auto& s : state.model_state)
      require_shape(f, model_state_dataset(s.name), {p_old, static_cast<hsize_t>(s.view.extent(0))}, path);
  state.optimizer_steps = read_int_attr<std::uint64_t>(f, "optimizer_steps", H5T_NATIVE_UINT64, path);
  state.exchange_steps = read_int_attr<std::uint64_t>(f, "exchange_steps", H5T_NATIVE_UINT64, path);
  // Not bounded by "step": an elastic restart continues at a step of the new world size.
  for (const auto& [name, value] : {std::pair<const char*, std::uint64_t>{"optimizer_steps", state.optimizer_steps},
                                    {"exchange_steps", state.exchange_steps}})
    if (value > max_counter)
      throw Error(path + ": attribute \"" + name + "\" = " + std::to_string(value) + " is out of range (at most 2^53)");
}

}  // namespace

void read_checkpoint(const Communicator& comm, const std::string& path, const CheckpointMetadata& meta,
                     CheckpointState& state) {
  Handle file = open_read_only(comm, path);
  const auto p_old = static_cast<hsize_t>(meta.world_size);
  const int p_new = comm.size(), rank = comm.rank();
  const bool same = static_cast<int>(p_old) == p_new;
  const bool checksums = meta.format_version >= 2;  // format 1 had none
  comm.all_or_throw([&] { check_and_read_counters(file.get(), path, meta, same, state); });

  comm.all_or_throw([&] {
    const hid_t f = file.get();
    // Straight into the destination where the host can write it; else through one host buffer.
    HostFloats buffer;
    auto load = [&](const std::string& name, hsize_t row, bool vector, const FloatView& out, hid_t dxpl) {
      const hsize_t len = out.extent(0);
      if constexpr (host_accessible_memory) {
        read_row(f, name, row, vector, out.data(), len, dxpl, checksums, path);
      } else {
        if (buffer.extent(0) < len)
          buffer = HostFloats(Kokkos::view_alloc(Kokkos::WithoutInitializing, "a2sgd::io::read"), len);
        read_row(f, name, row, vector, buffer.data(), len, dxpl, checksums, path);
        Kokkos::deep_copy(out, Kokkos::subview(buffer, std::make_pair(std::size_t(0), std::size_t(len))));
      }
    };
    Handle dxpl = transfer_plist(false);  // every rank reads its own contiguous rows
    // The averaged model: wanted by the caller (state.averaged non-empty), or needed as the
    // starting point of every replica in an elastic restart.
    if (state.averaged.extent(0) != 0) load("/model/params", 0, true, state.averaged, dxpl.get());
    read_named_values(f, "/replicas/scalars", state.scalars, p_old, same, rank, dxpl.get(), checksums, path,
                      state.optional_scalars);
    read_named_values(f, "/replicas/timers", state.timers, p_old, same, rank, dxpl.get(), checksums, path);
    if (same) {
      load("/replicas/params", static_cast<hsize_t>(rank), false, state.params, dxpl.get());
      for (const auto& s : state.exchange_state)
        load(exchange_dataset(s.name), static_cast<hsize_t>(rank), false, s.view, dxpl.get());
      for (const auto& s : state.optimizer_state)
        load(optimizer_dataset(s.name), static_cast<hsize_t>(rank), false, s.view, dxpl.get());
      for (const auto& s : state.model_state)
        load(model_state_dataset(s.name), static_cast<hsize_t>(rank), false, s.view, dxpl.get());
      return;
    }
    // Elastic restart: new rank r reads old rows r, r + p_new, ... (independent I/O), then the
    // rows are summed over all ranks.
    if (state.averaged.extent(0) != 0)
      Kokkos::deep_copy(state.params, state.averaged);
    else
      load("/model/params", 0, true, state.params, dxpl.get());
    Handle independent = transfer_plist(false);
    FloatView row;
    auto sum_rows = [&](const std::string& name, const FloatView& out, float factor) {
      const auto len = static_cast<Index>(out.extent(0));
      if (static_cast<Index>(row.extent(0)) != len) row = FloatView("a2sgd::io::row", static_cast<std::size_t>(len));
      Kokkos::deep_copy(out, 0.0f);
      for (hsize_t r = static_cast<hsize_t>(rank); r < p_old; r += static_cast<hsize_t>(p_new)) {
        load(name, r, false, row, independent.get());
        const FloatView o = out, x = row;
        Kokkos::parallel_for(
            A2SGD_LABEL("a2sgd::io::accumulate"), Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>(0, len),
            KOKKOS_LAMBDA(Index i) { o(i) += x(i); });
      }
      Kokkos::fence();
      allreduce_view(comm, out);
      const FloatView o = out;
      Kokkos::parallel_for(
          A2SGD_LABEL("a2sgd::io::scale"), Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>(0, len),
          KOKKOS_LAMBDA(Index i) { o(i) *= factor; });
      Kokkos::fence();
    };
    for (const auto& s : state.exchange_state)
      sum_rows(exchange_dataset(s.name), s.view,
               s.merge == StateMerge::mean ? 1.0f / float(p_old) : 1.0f / float(p_new));
    for (const auto& s : state.optimizer_state) sum_rows(optimizer_dataset(s.name), s.view, 1.0f / float(p_old));
  });
}

namespace {

herr_t collect_link(hid_t, const char* name, const H5L_info_t*, void* data) {
  static_cast<std::vector<std::string>*>(data)->push_back(name);
  return 0;
}

Handle open_serial(const std::string& path) {
  impl::silence_hdf5_errors();
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw Error(path + " does not exist or is not a file");
  return Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose,
                "cannot open " + path + ": not an HDF5 file, or truncated");
}

// Datasets of a file (paths without the leading '/').
std::vector<std::string> dataset_names(hid_t file) {
  std::vector<std::string> links;
  check(H5Lvisit(file, H5_INDEX_NAME, H5_ITER_INC, collect_link, &links), "cannot list the file's objects");
  std::vector<std::string> datasets;
  for (const auto& name : links) {
    const hid_t d = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
    if (d >= 0) {
      datasets.push_back(name);
      H5Dclose(d);
    }
  }
  return datasets;
}

// Raw bytes of a float32/float64 dataset, and its shape.
std::pair<std::vector<hsize_t>, std::vector<unsigned char>> dataset_bytes(hid_t file, const std::string& name,
                                                                          std::size_t& element_size) {
  Handle dset(H5Dopen2(file, name.c_str(), H5P_DEFAULT), H5Dclose, "cannot open " + name);
  Handle type(H5Dget_type(dset.get()), H5Tclose, "cannot read the type of " + name);
  element_size = H5Tget_size(type.get());
  const hid_t mem_type = element_size == 8 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_FLOAT;
  element_size = element_size == 8 ? 8 : 4;
  Handle space(H5Dget_space(dset.get()), H5Sclose, "cannot read the shape of " + name);
  std::vector<hsize_t> dims(static_cast<std::size_t>(H5Sget_simple_extent_ndims(space.get())));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  hsize_t count = 1;
  for (hsize_t d : dims) count *= d;
  std::vector<unsigned char> bytes(count * element_size);
  check(H5Dread(dset.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()), "cannot read " + name);
  return {dims, bytes};
}

std::vector<std::string> attribute_names(hid_t file) {
  Handle root(H5Gopen2(file, "/", H5P_DEFAULT), H5Gclose, "cannot open the root group");
  const hid_t obj = root.get();
  std::vector<std::string> names;
  const int count = H5Aget_num_attrs(obj);
  for (int i = 0; i < count; ++i) {
    Handle attr(H5Aopen_by_idx(obj, ".", H5_INDEX_NAME, H5_ITER_INC, static_cast<hsize_t>(i), H5P_DEFAULT, H5P_DEFAULT),
                H5Aclose, "cannot open an attribute");
    char name[256] = {};
    H5Aget_name(attr.get(), sizeof name, name);
    names.push_back(name);
  }
  return names;
}

// An attribute's value as text (strings, integers).
std::string attribute_text(hid_t obj, const std::string& name, const std::string& file) {
  Handle attr(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose, "cannot open attribute " + name);
  Handle type(H5Aget_type(attr.get()), H5Tclose, "cannot read attribute " + name);
  if (H5Tget_class(type.get()) == H5T_STRING) return read_string_attr(obj, name.c_str(), file);
  if (H5Tget_class(type.get()) == H5T_INTEGER) {
    // Any integer type (a damaged or foreign file is listed too), converted by HDF5.
    if (H5Tget_sign(type.get()) == H5T_SGN_NONE) {
      std::uint64_t v = 0;
      check(H5Aread(attr.get(), H5T_NATIVE_UINT64, &v), "cannot read attribute " + name);
      return std::to_string(v);
    }
    std::int64_t v = 0;
    check(H5Aread(attr.get(), H5T_NATIVE_INT64, &v), "cannot read attribute " + name);
    return std::to_string(v);
  }
  return "(binary)";
}

}  // namespace

std::vector<std::string> compare_checkpoints(const std::string& a, const std::string& b) {
  Handle fa = open_serial(a), fb = open_serial(b);
  std::vector<std::string> diffs;
  const auto attrs_a = attribute_names(fa.get()), attrs_b = attribute_names(fb.get());
  if (attrs_a != attrs_b) diffs.push_back("the files have different root attributes");
  for (const auto& name : attrs_a) {
    if (name == "created" || name == "library_version" || !has_attr(fb.get(), name.c_str())) continue;
    const auto va = attribute_text(fa.get(), name, a), vb = attribute_text(fb.get(), name, b);
    if (va != vb) diffs.push_back("attribute " + name + ": " + va + " vs " + vb);
  }
  const auto da = dataset_names(fa.get()), db = dataset_names(fb.get());
  if (da != db) diffs.push_back("the files hold different datasets");
  for (const auto& name : da) {
    if (name == "replicas/timers" || std::find(db.begin(), db.end(), name) == db.end()) continue;
    std::size_t ea = 0, eb = 0;
    const auto [shape_a, bytes_a] = dataset_bytes(fa.get(), name, ea);
    const auto [shape_b, bytes_b] = dataset_bytes(fb.get(), name, eb);
    if (shape_a != shape_b || ea != eb) {
      diffs.push_back("dataset /" + name + ": shapes or types differ");
      continue;
    }
    std::size_t differing = 0, first = 0;
    for (std::size_t i = 0; i < bytes_a.size(); i += ea)
      if (std::memcmp(&bytes_a[i], &bytes_b[i], ea) != 0 && differing++ == 0) first = i / ea;
    if (differing > 0)
      diffs.push_back("dataset /" + name + ": " + std::to_string(differing) + " of " +
                      std::to_string(bytes_a.size() / ea) + " values differ (first at flat index " +
                      std::to_string(first) + ")");
  }
  return diffs;
}

std::vector<std::string> verify_checkpoint(const std::string& path, std::string& summary) {
  std::vector<std::string> problems;
  std::int64_t version = 0;
  try {
    const Communicator self(MPI_COMM_SELF);
    version = read_checkpoint_metadata(self, path).format_version;
  } catch (const Error& e) {
    problems.push_back(e.what());
    return problems;  // no sound metadata: the rows cannot be interpreted
  }
  Handle f = open_serial(path);
  std::size_t datasets = 0, rows_checked = 0;
  for (const auto& entry : dataset_names(f.get())) {
    const std::string name = "/" + entry;
    try {
      Handle dset(H5Dopen2(f.get(), name.c_str(), H5P_DEFAULT), H5Dclose, path + ": cannot open dataset " + name);
      Handle type(H5Dget_type(dset.get()), H5Tclose, path + ": cannot read the type of " + name);
      Handle space(H5Dget_space(dset.get()), H5Sclose, path + ": cannot read the shape of " + name);
      const bool f32 = H5Tequal(type.get(), H5T_IEEE_F32LE) > 0, f64 = H5Tequal(type.get(), H5T_IEEE_F64LE) > 0;
      if (!f32 && !f64) throw Error(path + ": dataset " + name + " is neither float32 nor float64");
      const int ndims = H5Sget_simple_extent_ndims(space.get());
      if (ndims != 1 && ndims != 2) throw Error(path + ": dataset " + name + " is not a vector or a matrix");
      hsize_t dims[2] = {1, 1};
      H5Sget_simple_extent_dims(space.get(), dims, nullptr);
      const hsize_t rows = ndims == 2 ? dims[0] : 1, cols = ndims == 2 ? dims[1] : dims[0];
      const std::size_t elem = f32 ? sizeof(float) : sizeof(double);
      std::vector<unsigned char> row(static_cast<std::size_t>(cols) * elem);
      for (hsize_t r = 0; r < rows; ++r) {
        if (ndims == 2) {
          const hsize_t start[2] = {r, 0}, count[2] = {1, cols};
          check(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr), "hyperslab failed");
        } else {
          check(H5Sselect_all(space.get()), "H5Sselect_all failed");
        }
        Handle mem(H5Screate_simple(1, &cols, nullptr), H5Sclose, "H5Screate_simple failed");
        check(H5Dread(dset.get(), f32 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE, mem.get(), space.get(), H5P_DEFAULT,
                      row.data()),
              path + ": cannot read dataset " + name + " (truncated or corrupt file?)");
        verify_checksum(stored_checksum(dset.get(), r, rows, version >= 2, name, path),
                        crc32_of(row.data(), row.size()), r, name, path);
        if (f32) require_finite(reinterpret_cast<const float*>(row.data()), cols, r, name, path);
        ++rows_checked;
      }
      ++datasets;
    } catch (const Error& e) {
      problems.push_back(e.what());
    }
  }
  summary = path + ": format " + std::to_string(version) + ", " + std::to_string(datasets) + " datasets, " +
            std::to_string(rows_checked) + " rows" +
            (version >= 2 ? " with their checksums verified" : " (format 1: no checksums to verify)");
  return problems;
}

std::string describe_checkpoint(const std::string& path) {
  Handle f = open_serial(path);
  std::string out = path + "\n";
  for (const auto& name : attribute_names(f.get()))
    out += "  @" + name + " = " + attribute_text(f.get(), name, path) + "\n";
  for (const auto& name : dataset_names(f.get())) {
    std::size_t element = 0;
    Handle dset(H5Dopen2(f.get(), name.c_str(), H5P_DEFAULT), H5Dclose, "cannot open " + name);
    Handle space(H5Dget_space(dset.get()), H5Sclose, "cannot read " + name);
    Handle type(H5Dget_type(dset.get()), H5Tclose, "cannot read " + name);
    element = H5Tget_size(type.get());
    std::vector<hsize_t> dims(static_cast<std::size_t>(H5Sget_simple_extent_ndims(space.get())));
    H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
    out += "  /" + name + " [";
    for (std::size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
    out += "] float" + std::to_string(8 * element) + "\n";
  }
  return out;
}

}  // namespace a2sgd::io
