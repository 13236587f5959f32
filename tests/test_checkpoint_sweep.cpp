// The checkpoint's checksums against every damaged byte: a serial sweep over one file, its own test
// (test_checkpoint_sweep_np1) because it is the suite's longest checkpoint test, so that it runs
// beside the others and has a timeout of its own.
#include "CheckpointTesting.hpp"
#include "TestingCatch.hpp"

#include <algorithm>

using namespace a2sgd;
using namespace a2sgd::testing;
using namespace a2sgd::testing::checkpoint;

TEST_CASE("checksums: no damaged byte anywhere in the file loads into a different state", "[checkpoint]") {
  Communicator comm;
  REQUIRE(comm.size() == 1);  // a serial sweep: one rank reads the whole file
  const fs::path dir = shared_dir(comm, "sweep");
  const std::string good = write_full(comm, dir);
  const Loaded reference = load(comm, good);
  const std::string bytes = file_bytes(good), bad = (dir / "bad.h5").string();
  // Every byte up to the first dataset's data (superblock, object headers, attributes), then
  // every 13th byte of the rest: about 3,000 loads. Under AddressSanitizer, where a load takes
  // about six times as long, a third of them: every third metadata byte and every 39th after.
  const std::size_t stride = address_sanitizer_build ? 3 : 1;
  std::size_t first_data = bytes.size();
  for (const auto& s : row_spans(good)) first_data = std::min(first_data, s.offset);
  std::size_t refused = 0, harmless = 0, different = 0;
  std::string different_at;
  for (std::size_t at = 0; at < bytes.size(); at += (at < first_data ? 1 : 13) * stride) {
    std::string damaged = bytes;
    damaged[at] = static_cast<char>(damaged[at] ^ 0x5a);
    write_bytes(bad, damaged);
    try {
      if (load(comm, bad) == reference) {
        ++harmless;
      } else {
        if (different++ == 0) different_at = std::to_string(at);
      }
    } catch (const CollectiveError&) {
      ++refused;
    }
  }
  INFO("file of " << bytes.size() << " bytes, metadata before byte " << first_data << ": " << refused << " refused, "
                  << harmless << " harmless, " << different << " different (first at byte " << different_at << ")");
  CHECK(different == 0);
  CHECK(refused > harmless);
  fs::remove_all(dir);
}
