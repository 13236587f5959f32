#include <a2sgd/core/Error.hpp>
#include <a2sgd/data/Idx.hpp>

#include <zlib.h>

#include <sys/stat.h>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
#include <vector>

namespace a2sgd::data {
namespace {

constexpr std::uint32_t idx_images_magic = 0x00000803;  // unsigned byte, 3 dimensions
constexpr std::uint32_t idx_labels_magic = 0x00000801;  // unsigned byte, 1 dimension

std::string hex(std::uint32_t v) {
  std::ostringstream out;
  out << "0x" << std::hex;
  out.width(8);
  out.fill('0');
  out << v;
  return out.str();
}

// The bytes of a data file, decompressed when it is gzip data (members in a row are one stream,
// as gzip reads them). Unlike zlib's gzread, bytes after the last member that do not start
// another member are an error, not silently dropped.
class ByteStream {
 public:
  explicit ByteStream(const std::string& path) : m_path(path) {
    errno = 0;
    m_file.reset(std::fopen(path.c_str(), "rb"));
    if (!m_file) {
      const int err = errno;
      throw InvalidArgument("cannot open " + path + ": " + (err ? std::strerror(err) : "unknown error"));
    }
    unsigned char magic[2] = {0, 0};
    m_gzip = std::fread(magic, 1, 2, m_file.get()) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    std::rewind(m_file.get());
    if (m_gzip) {
      // The compressed bytes are read whole: at most a fraction of the data they hold.
      unsigned char chunk[1 << 16];
      for (std::size_t got; (got = std::fread(chunk, 1, sizeof chunk, m_file.get())) > 0;)
        m_bytes.insert(m_bytes.end(), chunk, chunk + got);
      if (std::ferror(m_file.get())) throw InvalidArgument(path + ": unreadable (" + std::strerror(errno) + ")");
      if (inflateInit2(&m_z, 16 + MAX_WBITS) != Z_OK) throw InvalidArgument(path + ": cannot start gzip decoding");
      m_z.next_in = m_bytes.data();
      m_z.avail_in = static_cast<uInt>(std::min<std::size_t>(m_bytes.size(), std::numeric_limits<uInt>::max()));
    }
  }
  ~ByteStream() {
    if (m_gzip) inflateEnd(&m_z);
  }
  ByteStream(const ByteStream&) = delete;
  ByteStream& operator=(const ByteStream&) = delete;

  // Up to `size` bytes into `dst`; fewer only at the end of the data.
  std::size_t read(void* dst, std::size_t size) {
    auto* out = static_cast<unsigned char*>(dst);
    if (!m_gzip) {
      const std::size_t n = std::fread(out, 1, size, m_file.get());
      if (n < size && std::ferror(m_file.get()))
        throw InvalidArgument(m_path + ": unreadable (" + std::strerror(errno) + ")");
      return n;
    }
    std::size_t done = 0;
    while (done < size) {
      feed();
      if (m_member_done) {
        if (m_z.avail_in == 0) return done;
        if (m_z.avail_in < 2 || m_z.next_in[0] != 0x1f || m_z.next_in[1] != 0x8b)
          throw InvalidArgument(m_path + ": " + std::to_string(remaining()) +
                                " bytes after the end of the gzip data that are not gzip data");
        inflateReset(&m_z);
        m_member_done = false;
      }
      const auto want = static_cast<uInt>(std::min<std::size_t>(size - done, 1u << 30));
      m_z.next_out = out + done;
      m_z.avail_out = want;
      const int rc = inflate(&m_z, Z_NO_FLUSH);
      done += want - m_z.avail_out;
      if (rc == Z_STREAM_END) {
        m_member_done = true;
      } else if (rc == Z_BUF_ERROR && m_z.avail_in == 0) {
        throw InvalidArgument(m_path + ": unreadable (truncated gzip data)");
      } else if (rc != Z_OK) {
        throw InvalidArgument(
            m_path + ": unreadable (corrupt gzip data: " + std::string(m_z.msg ? m_z.msg : "inflate error") + ")");
      }
    }
    return done;
  }

 private:
  // Input beyond what one z_stream call takes (files over 4 GiB) is handed over as it is used.
  void feed() {
    if (m_z.avail_in > 0) return;
    const std::size_t used = static_cast<std::size_t>(m_z.next_in - m_bytes.data());
    m_z.avail_in = static_cast<uInt>(std::min<std::size_t>(m_bytes.size() - used, std::numeric_limits<uInt>::max()));
  }
  std::size_t remaining() const { return m_bytes.size() - static_cast<std::size_t>(m_z.next_in - m_bytes.data()); }

  std::string m_path;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> m_file{nullptr, std::fclose};
  std::vector<unsigned char> m_bytes;  // gzip: the compressed file
  bool m_gzip = false;
  bool m_member_done = false;
  z_stream m_z{};
};

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
  ByteStream f(path);
  unsigned char header[4];
  if (f.read(header, 4) < 4) throw InvalidArgument(path + ": truncated (no IDX header)");
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
    if (f.read(b, 4) < 4) throw InvalidArgument(path + ": truncated (incomplete IDX header)");
    const std::uint32_t extent =
        (std::uint32_t(b[0]) << 24) | (std::uint32_t(b[1]) << 16) | (std::uint32_t(b[2]) << 8) | b[3];
    a.dims.push_back(extent);
    if (extent != 0 && total > (std::size_t(1) << 36) / extent)
      throw InvalidArgument(path + ": dimensions are implausibly large");
    total *= extent;
  }
  // Grown as the data arrives (1 MiB, then doubling up to 64 MiB at a time), so that a header
  // claiming more than the file holds is reported as a truncated file instead of allocating
  // what it claims.
  std::size_t got = 0, chunk = std::size_t(1) << 20;
  while (got < total) {
    const std::size_t want = std::min(chunk, total - got);
    a.data.resize(got + want);
    const std::size_t n = f.read(a.data.data() + got, want);
    got += n;
    if (n < want) break;
    chunk = std::min(2 * chunk, std::size_t(64) << 20);
  }
  if (got < total)
    throw InvalidArgument(path + ": truncated: expected " + std::to_string(total) +
                          " data bytes after the header, found " + std::to_string(got));
  unsigned char extra[256];
  const std::size_t trailing = f.read(extra, sizeof extra);
  if (trailing > 0)
    throw InvalidArgument(path + ": unexpected bytes after the " + std::to_string(total) + " data bytes");
  return a;
}

DatasetPair load_idx_dataset(const std::string& directory, const std::string& name, int num_classes) {
  struct stat st {};
  if (::stat(directory.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw InvalidArgument("data directory " + directory +
                          " does not exist (for Fashion-MNIST: apt-get install "
                          "dataset-fashion-mnist, or give the directory that holds it)");
  DatasetPair pair{load_split(directory, "train", name + "-train", num_classes),
                   load_split(directory, "t10k", name + "-test", num_classes)};
  if (pair.train.features() != pair.test.features())
    throw InvalidArgument(directory + ": training images have " + std::to_string(pair.train.features()) +
                          " pixels, test images " + std::to_string(pair.test.features()));
  normalize(pair);
  return pair;
}

}  // namespace a2sgd::data
