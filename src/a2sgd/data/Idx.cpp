#include <a2sgd/core/Error.hpp>
#include <a2sgd/data/Idx.hpp>

#include <zlib.h>

#include <sys/stat.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>

namespace a2sgd::data {
namespace {

constexpr std::uint32_t idx_images_magic = 0x00000803;  // unsigned byte, 3 dimensions
constexpr std::uint32_t idx_labels_magic = 0x00000801;  // unsigned byte, 1 dimension

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};

std::string hex(std::uint32_t v) {
  std::ostringstream out;
  out << "0x" << std::hex;
  out.width(8);
  out.fill('0');
  out << v;
  return out.str();
}

// Reads up to `size` bytes; returns how many were read. Throws on a corrupt stream.
std::size_t read_some(gzFile f, void* dst, std::size_t size, const std::string& path) {
  std::size_t done = 0;
  auto* bytes = static_cast<unsigned char*>(dst);
  while (done < size) {
    const auto want = static_cast<unsigned>(std::min<std::size_t>(size - done, 1u << 30));
    const int got = gzread(f, bytes + done, want);
    if (got < 0) {
      int code = 0;
      const char* msg = gzerror(f, &code);
      throw InvalidArgument(path + ": unreadable (" + std::string(msg ? msg : "gzip error") + ")");
    }
    if (got == 0) break;
    done += static_cast<std::size_t>(got);
  }
  return done;
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string find_file(const std::string& dir, const std::string& stem) {
  for (const std::string& candidate : {dir + "/" + stem + ".gz", dir + "/" + stem})
    if (file_exists(candidate)) return candidate;
  throw InvalidArgument("missing data file: " + dir + "/" + stem + ".gz (or " + stem + " without .gz) not found");
}

Dataset to_dataset(const std::string& name, const IdxArray& images, const std::string& images_path,
                   const IdxArray& labels, const std::string& labels_path, int num_classes) {
  if (images.magic != idx_images_magic)
    throw InvalidArgument(images_path + ": magic number " + hex(images.magic) + " is not that of an IDX image file (" +
                          hex(idx_images_magic) + ")");
  if (labels.magic != idx_labels_magic)
    throw InvalidArgument(labels_path + ": magic number " + hex(labels.magic) + " is not that of an IDX label file (" +
                          hex(idx_labels_magic) + ")");
  if (images.dims[0] != labels.dims[0])
    throw InvalidArgument(images_path + " has " + std::to_string(images.dims[0]) + " images but " + labels_path +
                          " has " + std::to_string(labels.dims[0]) + " labels");
  if (images.dims[0] == 0) throw InvalidArgument(images_path + ": contains no images");
  const std::size_t count = images.dims[0];
  const std::size_t features = static_cast<std::size_t>(images.dims[1]) * images.dims[2];
  for (std::size_t i = 0; i < count; ++i)
    if (labels.data[i] >= num_classes)
      throw InvalidArgument(labels_path + ": label " + std::to_string(labels.data[i]) + " of sample " +
                            std::to_string(i) + " is outside 0.." + std::to_string(num_classes - 1));
  Dataset d;
  d.name = name;
  d.num_classes = num_classes;
  d.images = Matrix(Kokkos::view_alloc(Kokkos::WithoutInitializing, "a2sgd::data::" + name), count, features);
  d.labels = LabelView(Kokkos::view_alloc(Kokkos::WithoutInitializing, "a2sgd::data::" + name + "_labels"), count);
  auto hx = Kokkos::create_mirror_view(d.images);
  auto hy = Kokkos::create_mirror_view(d.labels);
  for (std::size_t i = 0; i < count; ++i) {
    hy(i) = labels.data[i];
    for (std::size_t j = 0; j < features; ++j) hx(i, j) = static_cast<float>(images.data[i * features + j]) / 255.0f;
  }
  Kokkos::deep_copy(d.images, hx);
  Kokkos::deep_copy(d.labels, hy);
  return d;
}

Dataset load_split(const std::string& dir, const std::string& prefix, const std::string& name, int num_classes) {
  const std::string images_path = find_file(dir, prefix + "-images-idx3-ubyte");
  const std::string labels_path = find_file(dir, prefix + "-labels-idx1-ubyte");
  const IdxArray images = read_idx(images_path);  // images first: errors come in a fixed order
  const IdxArray labels = read_idx(labels_path);
  return to_dataset(name, images, images_path, labels, labels_path, num_classes);
}

}  // namespace

IdxArray read_idx(const std::string& path) {
  errno = 0;
  std::unique_ptr<gzFile_s, GzCloser> f(gzopen(path.c_str(), "rb"));
  if (!f) {
    const int err = errno;
    throw InvalidArgument("cannot open " + path + ": " + (err ? std::strerror(err) : "out of memory"));
  }
  unsigned char header[4];
  if (read_some(f.get(), header, 4, path) < 4) throw InvalidArgument(path + ": truncated (no IDX header)");
  IdxArray a;
  a.magic =
      (std::uint32_t(header[0]) << 24) | (std::uint32_t(header[1]) << 16) | (std::uint32_t(header[2]) << 8) | header[3];
  if (header[0] != 0 || header[1] != 0)
    throw InvalidArgument(path + ": magic number " + hex(a.magic) + " is not that of an IDX file (not IDX data?)");
  if (header[2] != 0x08)
    throw InvalidArgument(path + ": IDX data type " + hex(header[2]) + " is not supported (only unsigned bytes, 0x08)");
  const int ndims = header[3];
  if (ndims < 1 || ndims > 4)
    throw InvalidArgument(path + ": " + std::to_string(ndims) + " dimensions is not supported");
  std::size_t total = 1;
  for (int d = 0; d < ndims; ++d) {
    unsigned char b[4];
    if (read_some(f.get(), b, 4, path) < 4) throw InvalidArgument(path + ": truncated (incomplete IDX header)");
    const std::uint32_t extent =
        (std::uint32_t(b[0]) << 24) | (std::uint32_t(b[1]) << 16) | (std::uint32_t(b[2]) << 8) | b[3];
    a.dims.push_back(extent);
    if (extent != 0 && total > (std::size_t(1) << 36) / extent)
      throw InvalidArgument(path + ": dimensions are implausibly large");
    total *= extent;
  }
  // Grown as the data arrives, so that a header claiming more than the file holds is reported
  // as a truncated file instead of allocating what it claims.
  constexpr std::size_t chunk = std::size_t(64) << 20;
  std::size_t got = 0;
  while (got < total) {
    const std::size_t want = std::min(chunk, total - got);
    a.data.resize(got + want);
    const std::size_t n = read_some(f.get(), a.data.data() + got, want, path);
    got += n;
    if (n < want) break;
  }
  if (got < total)
    throw InvalidArgument(path + ": truncated: expected " + std::to_string(total) +
                          " data bytes after the header, found " + std::to_string(got));
  unsigned char extra[256];
  const std::size_t trailing = read_some(f.get(), extra, sizeof extra, path);
  if (trailing > 0)
    throw InvalidArgument(path + ": unexpected bytes after the " + std::to_string(total) + " data bytes");
  return a;
}

DatasetPair load_idx_dataset(const std::string& directory, const std::string& name, int num_classes) {
  struct stat st {};
  if (::stat(directory.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw InvalidArgument("data directory " + directory +
                          " does not exist (for Fashion-MNIST: apt-get install "
                          "dataset-fashion-mnist, or pass --data-dir)");
  DatasetPair pair{load_split(directory, "train", name + "-train", num_classes),
                   load_split(directory, "t10k", name + "-test", num_classes)};
  if (pair.train.features() != pair.test.features())
    throw InvalidArgument(directory + ": training images have " + std::to_string(pair.train.features()) +
                          " pixels, test images " + std::to_string(pair.test.features()));
  normalize(pair);
  return pair;
}

}  // namespace a2sgd::data
