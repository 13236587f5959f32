#include "TestingCatch.hpp"

#include <a2sgd/core/Error.hpp>
#include <a2sgd/data/Ptb.hpp>
#include <a2sgd/train/TokenStreamSource.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>

using namespace a2sgd;
using namespace a2sgd::data;
namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("a2sgd_test_ptb_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

fs::path corpus_dir(const std::string& name, const std::string& train, const std::string& valid,
                    const std::string& test) {
  const fs::path dir = scratch(name);
  write(dir / "ptb.train.txt", train);
  write(dir / "ptb.valid.txt", valid);
  write(dir / "ptb.test.txt", test);
  return dir;
}

std::string message_of(const std::string& dir) {
  try {
    load_ptb(dir);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("PTB text: vocabulary in order of first appearance, <eos> ending every line", "[data][ptb]") {
  const fs::path dir = corpus_dir("ok", " the cat sat \n the dog\n", "the cat\n", " dog sat the \n");
  const TokenCorpus c = load_ptb(dir.string());
  REQUIRE(c.vocab.words == std::vector<std::string>{"the", "cat", "sat", "<eos>", "dog"});
  CHECK(c.vocab.eos == 3);
  CHECK(c.train == std::vector<Token>{0, 1, 2, 3, 0, 4, 3});
  CHECK(c.valid == std::vector<Token>{0, 1, 3});
  CHECK(c.test == std::vector<Token>{4, 2, 0, 3});
  for (const auto& [word, id] : c.vocab.index) CHECK(c.vocab.words[static_cast<std::size_t>(id)] == word);
  fs::remove_all(dir);
}

TEST_CASE("bad PTB files are rejected with the file, the line and the problem named", "[data][ptb]") {
  const std::string good = "a b\nc\n";
  struct Case {
    const char* name;
    std::string train, valid, test;
    std::string wanted;
  };
  const std::vector<Case> cases = {
      {"oov_valid", good, "a\nb zebra\n", good, "ptb.valid.txt line 2: word 'zebra' is not in the vocabulary"},
      {"oov_test", good, good, "q\n", "ptb.test.txt line 1: word 'q' is not in the vocabulary"},
      {"empty_train", "", good, good, "ptb.train.txt: holds no words"},
      {"blank_valid", good, "\n \n", good, "ptb.valid.txt: holds no words"},
      {"binary_train", std::string("a b\nc\0d\n", 8), good, good, "ptb.train.txt line 2: byte 0x00: not a text file"},
      {"control_test", good, good, "a \x01 b\n", "ptb.test.txt line 1: byte 0x01: not a text file"},
  };
  for (const Case& k : cases) {
    const fs::path dir = corpus_dir(k.name, k.train, k.valid, k.test);
    INFO(k.name);
    CHECK_THAT(message_of(dir.string()), A2SGD_CONTAINS(k.wanted));
    fs::remove_all(dir);
  }
  const fs::path missing = corpus_dir("missing", good, good, good);
  fs::remove(missing / "ptb.test.txt");
  CHECK_THAT(message_of(missing.string()), A2SGD_CONTAINS("ptb.test.txt: file does not exist"));
  fs::create_directory(missing / "ptb.test.txt");
  CHECK_THAT(message_of(missing.string()), A2SGD_CONTAINS("ptb.test.txt: is a directory"));
  fs::remove_all(missing);
  CHECK_THAT(message_of(""), A2SGD_CONTAINS("no Penn Treebank directory given"));
}

TEST_CASE("batchify: contiguous rank parts, contiguous columns, the remainder dropped", "[data][ptb]") {
  std::vector<Token> stream(103);
  std::iota(stream.begin(), stream.end(), 0);
  for (const int world : {1, 2, 3, 4}) {
    for (const Index batch : {1, 2, 5}) {
      const Index part = 103 / world, length = part / batch;
      std::vector<int> seen(stream.size(), 0);
      for (int rank = 0; rank < world; ++rank) {
        const auto columns = batchify(stream, rank, world, batch);
        REQUIRE(static_cast<Index>(columns.extent(0)) == length);
        REQUIRE(static_cast<Index>(columns.extent(1)) == batch);
        for (Index j = 0; j < batch; ++j)
          for (Index t = 0; t < length; ++t) {
            // Column j of rank r starts at r * part + j * length and runs on without a gap.
            CHECK(columns(t, j) == rank * part + j * length + t);
            ++seen[static_cast<std::size_t>(columns(t, j))];
          }
      }
      // Every token at most once; exactly world * batch * length of them.
      CHECK(std::count(seen.begin(), seen.end(), 1) == world * batch * length);
      CHECK(std::count_if(seen.begin(), seen.end(), [](int s) { return s > 1; }) == 0);
    }
  }
  CHECK_THROWS_AS(batchify(stream, 0, 4, 20), InvalidArgument);  // columns of 1 token
  CHECK_THROWS_AS(batchify(stream, 4, 4, 2), InvalidArgument);
  CHECK_THROWS_AS(batchify(stream, 0, 1, 0), InvalidArgument);
}

TEST_CASE("the Penn Treebank corpus: the standard sizes", "[data][ptb]") {
  const std::string dir = ptb_directory("");
  if (dir.empty() || !fs::exists(fs::path(dir) / "ptb.train.txt")) {
    WARN("PTB test skipped: no ptb.train.txt in A2SGD_DATA_DIR ('" + dir + "')");
    return;
  }
  const TokenCorpus c = load_ptb(dir);
  // The sizes every PTB language-model paper reports (words + one <eos> per line).
  CHECK(c.vocab.size() == 10000);
  CHECK(c.train.size() == 929589);
  CHECK(c.valid.size() == 73760);
  CHECK(c.test.size() == 82430);
  CHECK(c.vocab.words[static_cast<std::size_t>(c.vocab.eos)] == "<eos>");
  CHECK(c.vocab.index.count("<unk>") == 1);
  // Per rank and column at the standard batch of 20: 929589 / 2 / 20 = 23239 tokens.
  CHECK(batchify(c.train, 1, 2, 20).extent(0) == 23239);
}

TEST_CASE("token stream source: full bptt windows per epoch, targets one token ahead, short last eval window",
          "[data][ptb][train]") {
  data::TokenCorpus corpus;
  corpus.train.resize(2 * 3 * 41);  // 2 ranks x 3 columns x 41 tokens
  std::iota(corpus.train.begin(), corpus.train.end(), 0);
  corpus.valid.resize(2 * 2 * 12);  // 2 ranks x 2 evaluation columns x 12 tokens
  std::iota(corpus.valid.begin(), corpus.valid.end(), 0);
  corpus.test = corpus.valid;
  const ExecutionSpace exec;
  train::TokenStreamSource source(corpus, "toy", 1, 2, 3, 2, 10);
  CHECK(source.steps_per_epoch() == 4);  // (41 - 1) / 10 full windows of 10 + 1 tokens
  CHECK(source.unit() == "tokens");
  CHECK(source.perplexity());
  for (std::uint64_t step : {0u, 3u, 4u, 9u}) {
    INFO("step " << step);
    const nn::Batch b = source.train_batch(exec, step);
    REQUIRE(b.tokens.extent(0) == 11);
    REQUIRE(b.tokens.extent(1) == 3);
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), b.tokens);
    const int start = static_cast<int>(step % 4) * 10;
    // Rank 1's part starts at token 123; column j at 123 + 41 j.
    for (int t = 0; t < 11; ++t)
      for (int j = 0; j < 3; ++j) CHECK(h(t, j) == 123 + 41 * j + start + t);
  }
  CHECK(source.eval_batches("valid") == 2);  // 11 targets per column: a window of 10, then 1
  const nn::Batch last = source.eval_batch(exec, "valid", 1);
  CHECK(last.tokens.extent(0) == 2);
  CHECK(source.eval_splits() == std::vector<std::string>{"valid", "test"});
  CHECK_THROWS_WITH(source.eval_batches("train"), A2SGD_CONTAINS("no evaluation split"));
  CHECK_THROWS_WITH(train::TokenStreamSource(corpus, "toy", 0, 2, 3, 2, 41), A2SGD_CONTAINS("41 time steps per batch"));
}
