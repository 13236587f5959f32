#include "RoundingBounds.hpp"

#include <a2sgd/core/Error.hpp>
#include <a2sgd/data/Idx.hpp>
#include <a2sgd/data/ShardSampler.hpp>
#include <a2sgd/data/Synthetic.hpp>

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

using namespace a2sgd;
using namespace a2sgd::testing;
namespace fs = std::filesystem;

namespace {

std::vector<std::uint8_t> idx_bytes(std::uint32_t magic, const std::vector<std::uint32_t>& dims, std::size_t data_bytes,
                                    std::uint8_t fill = 7) {
  std::vector<std::uint8_t> b;
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(magic >> s));
  for (auto d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(d >> s));
  for (std::size_t i = 0; i < data_bytes; ++i) b.push_back(static_cast<std::uint8_t>((fill + i) % 10));
  return b;
}

void write_plain(const fs::path& p, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

void write_gz(const fs::path& p, const std::vector<std::uint8_t>& bytes) {
  gzFile f = gzopen(p.c_str(), "wb");
  REQUIRE(f != nullptr);
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

// A per-process scratch directory (tests run at several rank counts).
fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("a2sgd_test_data_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A valid 2-image, 3x2-pixel MNIST-layout directory (train and t10k), gzip or plain.
fs::path make_dir(const std::string& name, bool gz) {
  const fs::path dir = scratch(name);
  auto w = gz ? write_gz : write_plain;
  const std::string ext = gz ? ".gz" : "";
  w(dir / ("train-images-idx3-ubyte" + ext), idx_bytes(0x803, {4, 3, 2}, 24));
  w(dir / ("train-labels-idx1-ubyte" + ext), idx_bytes(0x801, {4}, 4));
  w(dir / ("t10k-images-idx3-ubyte" + ext), idx_bytes(0x803, {2, 3, 2}, 12));
  w(dir / ("t10k-labels-idx1-ubyte" + ext), idx_bytes(0x801, {2}, 2));
  return dir;
}

}  // namespace

TEST_CASE("IDX files are read plain and gzip-compressed", "[data][idx]") {
  for (bool gz : {false, true}) {
    const fs::path dir = make_dir(gz ? "gz" : "plain", gz);
    const auto a = data::read_idx((dir / (gz ? "train-images-idx3-ubyte.gz" : "train-images-idx3-ubyte")).string());
    CHECK(a.magic == 0x803);
    CHECK(a.dims == std::vector<std::uint32_t>{4, 3, 2});
    REQUIRE(a.data.size() == 24);
    CHECK(a.data[5] == (7 + 5) % 10);
    const auto pair = data::load_idx_dataset(dir.string(), "tiny");
    CHECK(pair.train.size() == 4);
    CHECK(pair.test.size() == 2);
    CHECK(pair.train.features() == 6);
    auto labels = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), pair.train.labels);
    CHECK(labels(3) == (7 + 3) % 10);
    // Normalised with the training set's mean and standard deviation: sum x = 0 and sum x^2 = 24 up
    // to rounding. The bound mirrors the library's float steps x = (v - fl(mean)) fl(1 / std), the
    // double moments within gamma64 of theirs (sums of 24 values; var = s2 / n - mean^2 adds a
    // product, a subtraction and two divisions).
    std::vector<float> v(24);
    double mean = 0, sq = 0, abs_sum = 0;
    for (int i = 0; i < 24; ++i) v[i] = static_cast<float>((7 + i) % 10) / 255.0f;
    for (float vi : v) mean += vi / 24.0, sq += double(vi) * vi / 24.0, abs_sum += vi;
    const double var = sq - mean * mean, inv_std = 1 / std::sqrt(var);
    const double var_tol = 2 * gamma64(24 + 4) * (sq + mean * mean);
    const Rounded shift = rounded(mean, 2 * gamma64(24) * abs_sum / 24);
    const Rounded scale = rounded(inv_std, (var_tol / (2 * var) + 2 * u64) * inv_std);
    auto x = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), pair.train.images);
    double s = 0, s2 = 0, s_tol = 0, s2_tol = 0, x_abs = 0;
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 6; ++j) {
        const Rounded want = (exact(v[i * 6 + j]) - shift) * scale;
        CHECK(within(x(i, j), want));
        s += x(i, j), s2 += double(x(i, j)) * x(i, j), x_abs += std::abs(want.v);
        s_tol += want.e, s2_tol += 2 * std::abs(want.v) * want.e + want.e * want.e;
      }
    CHECK(std::abs(s) <= s_tol + gamma64(24) * x_abs);
    CHECK(std::abs(s2 - 24.0) <= s2_tol + gamma64(48) * 24.0);
    fs::remove_all(dir);
  }
}

TEST_CASE("malformed IDX data is rejected with the file named", "[data][idx]") {
  const fs::path dir = make_dir("bad", false);
  const std::string img = (dir / "train-images-idx3-ubyte").string();
  const std::string lab = (dir / "train-labels-idx1-ubyte").string();

  SECTION("missing file") {
    fs::remove(img);
    CHECK_THROWS_WITH(data::load_idx_dataset(dir.string(), "x"),
                      A2SGD_CONTAINS("missing data file") && A2SGD_CONTAINS("train-images-idx3-ubyte"));
    CHECK_THROWS_WITH(data::read_idx(img), A2SGD_CONTAINS("cannot open " + img));
  }
  SECTION("missing directory") {
    CHECK_THROWS_WITH(data::load_idx_dataset((dir / "nope").string(), "x"), A2SGD_CONTAINS("does not exist"));
  }
  SECTION("wrong magic number") {
    write_plain(img, idx_bytes(0x801, {4}, 4));  // a label file where images belong
    CHECK_THROWS_WITH(data::load_idx_dataset(dir.string(), "x"),
                      A2SGD_CONTAINS(img) && A2SGD_CONTAINS("not that of an IDX image file"));
    write_plain(img, {'P', 'K', 3, 4, 0, 0, 0, 0});
    CHECK_THROWS_WITH(data::read_idx(img), A2SGD_CONTAINS(img) && A2SGD_CONTAINS("not IDX data"));
  }
  SECTION("unsupported element type") {
    write_plain(img, idx_bytes(0x0D03, {4, 3, 2}, 96));
    CHECK_THROWS_WITH(data::read_idx(img), A2SGD_CONTAINS(img) && A2SGD_CONTAINS("not supported"));
  }
  SECTION("truncated header and data") {
    write_plain(img, {0, 0, 8});
    CHECK_THROWS_WITH(data::read_idx(img), A2SGD_CONTAINS(img) && A2SGD_CONTAINS("truncated"));
    write_plain(img, idx_bytes(0x803, {4, 3, 2}, 23));
    CHECK_THROWS_WITH(data::read_idx(img),
                      A2SGD_CONTAINS(img) && A2SGD_CONTAINS("expected 24 data bytes") && A2SGD_CONTAINS("found 23"));
  }
  SECTION("a header that claims more than the file holds") {
    // 60000 x 1000 x 1000 bytes (60 GB) claimed, 100 present: truncated, nothing of 60 GB allocated.
    write_plain(img, idx_bytes(0x803, {60000, 1000, 1000}, 100));
    CHECK_THROWS_WITH(data::read_idx(img), A2SGD_CONTAINS(img) && A2SGD_CONTAINS("expected 60000000000 data bytes") &&
                                               A2SGD_CONTAINS("found 100"));
  }
  SECTION("trailing bytes") {
    write_plain(img, idx_bytes(0x803, {4, 3, 2}, 25));
    CHECK_THROWS_WITH(data::read_idx(img), A2SGD_CONTAINS("unexpected bytes after"));
  }
  SECTION("gzip data followed by other bytes; two gzip members in a row are one stream") {
    const auto bytes = idx_bytes(0x803, {4, 3, 2}, 24);
    write_gz(img, bytes);
    std::string gz = std::string(std::istreambuf_iterator<char>(std::ifstream(img, std::ios::binary).rdbuf()), {});
    std::ofstream(img, std::ios::binary).write((gz + "garbage").data(), static_cast<std::streamsize>(gz.size() + 7));
    CHECK_THROWS_WITH(data::read_idx(img),
                      A2SGD_CONTAINS(img) && A2SGD_CONTAINS("7 bytes after the end of the gzip data"));
    // The same data split into two members (what `cat a.gz b.gz` makes) reads as one file.
    const std::vector<std::uint8_t> head(bytes.begin(), bytes.begin() + 10), tail(bytes.begin() + 10, bytes.end());
    write_gz(img, head);
    const std::string first =
        std::string(std::istreambuf_iterator<char>(std::ifstream(img, std::ios::binary).rdbuf()), {});
    write_gz(img, tail);
    const std::string second =
        std::string(std::istreambuf_iterator<char>(std::ifstream(img, std::ios::binary).rdbuf()), {});
    std::ofstream(img, std::ios::binary)
        .write((first + second).data(), static_cast<std::streamsize>(first.size() + second.size()));
    CHECK(data::read_idx(img).data.size() == 24);
  }
  SECTION("corrupt gzip stream") {
    auto bytes = idx_bytes(0x803, {4, 3, 2}, 24);
    write_gz(img, bytes);
    std::vector<char> gz((std::istreambuf_iterator<char>(std::ifstream(img, std::ios::binary).rdbuf())),
                         std::istreambuf_iterator<char>());
    gz.resize(gz.size() - 12);  // cut the deflate stream and its trailer
    std::ofstream(img, std::ios::binary).write(gz.data(), static_cast<std::streamsize>(gz.size()));
    CHECK_THROWS_WITH(data::read_idx(img), A2SGD_CONTAINS(img));
  }
  SECTION("label and image counts differ") {
    write_plain(lab, idx_bytes(0x801, {3}, 3));
    CHECK_THROWS_WITH(data::load_idx_dataset(dir.string(), "x"),
                      A2SGD_CONTAINS("has 4 images but") && A2SGD_CONTAINS("has 3 labels"));
  }
  SECTION("label out of range") {
    auto bytes = idx_bytes(0x801, {4}, 4);
    bytes.back() = 12;
    write_plain(lab, bytes);
    CHECK_THROWS_WITH(data::load_idx_dataset(dir.string(), "x"),
                      A2SGD_CONTAINS(lab) && A2SGD_CONTAINS("label 12 of sample 3"));
  }
  fs::remove_all(dir);
}

TEST_CASE("per-rank shards cover the data exactly once per epoch and are reshuffled", "[data][shard]") {
  const int p = world_size(), rank = world_rank();
  for (Index n : {Index(1000), Index(1003)}) {
    data::ShardSampler sampler(n, rank, p, 99);
    CHECK(sampler.shard_size() == n / p);
    std::vector<std::set<Index>> epochs;
    for (std::uint64_t epoch = 0; epoch < 2; ++epoch) {
      const auto mine = sampler.epoch_indices(epoch);
      std::vector<float> as_float(mine.begin(), mine.end());
      const auto all = allgather(as_float);  // every rank's shard, in rank order
      std::set<Index> seen;
      int duplicates = 0;
      for (float v : all) duplicates += !seen.insert(static_cast<Index>(v)).second;
      CHECK(duplicates == 0);  // disjoint shards
      CHECK(static_cast<Index>(seen.size()) == p * (n / p));
      CHECK(*seen.rbegin() < n);
      epochs.push_back(seen);
      if (n % p == 0) CHECK(static_cast<Index>(seen.size()) == n);  // every sample exactly once
      CHECK(sampler.epoch_indices(epoch) == mine);                  // deterministic
    }
    CHECK(sampler.epoch_indices(0) != sampler.epoch_indices(1));  // reshuffled every epoch
  }
  CHECK_THROWS_AS(data::ShardSampler(3, 0, 4, 1), InvalidArgument);
}

TEST_CASE("synthetic data is deterministic and balanced", "[data]") {
  data::SyntheticConfig c;
  c.train_samples = 200;
  c.test_samples = 50;
  c.features = 8;
  c.classes = 4;
  const auto a = data::make_synthetic(c), b = data::make_synthetic(c);
  auto xa = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), a.train.images);
  auto xb = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), b.train.images);
  CHECK(std::equal(xa.data(), xa.data() + xa.size(), xb.data()));
  auto y = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), a.train.labels);
  std::vector<int> count(4, 0);
  for (int i = 0; i < 200; ++i) ++count[static_cast<std::size_t>(y(i))];
  CHECK(count == std::vector<int>{50, 50, 50, 50});
  c.separation = -1;
  CHECK_THROWS_AS(data::make_synthetic(c), InvalidArgument);
}
