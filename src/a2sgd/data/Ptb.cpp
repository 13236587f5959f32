#include <a2sgd/core/Error.hpp>
#include <a2sgd/data/DataHome.hpp>
#include <a2sgd/data/Ptb.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace a2sgd::data {

Token Vocabulary::add(const std::string& word) {
  const auto [it, inserted] = index.emplace(word, static_cast<Token>(words.size()));
  if (inserted) words.push_back(word);
  return it->second;
}

namespace {

// Text bytes: printable ASCII, tab, CR, and the bytes of UTF-8 multi-byte sequences. A NUL or
// another control byte means the file is not the text the reader expects.
bool text_byte(unsigned char c) {
  return c >= 0x20 || c == '\t' || c == '\r';
}

// Calls on_word(word, line) for every word and on_line_end(line) after every line.
template <class OnWord, class OnLineEnd>
void scan_text(const std::string& path, OnWord&& on_word, OnLineEnd&& on_line_end) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw InvalidArgument(path + ": file does not exist");
  if (std::filesystem::is_directory(path, ec)) throw InvalidArgument(path + ": is a directory, not a text file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InvalidArgument(path + ": cannot open (" + std::strerror(errno) + ")");
  std::string line, word;
  std::uint64_t number = 0, words = 0;
  while (std::getline(in, line)) {
    ++number;
    for (const char ch : line)
      if (!text_byte(static_cast<unsigned char>(ch))) {
        char byte[8];
        std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned>(static_cast<unsigned char>(ch)));
        throw InvalidArgument(path + " line " + std::to_string(number) + ": byte " + byte +
                              ": not a text file (expected words separated by spaces)");
      }
    std::size_t pos = 0;
    while (pos < line.size()) {
      while (pos < line.size() && (line[pos] == ' ' || line[pos] == '\t' || line[pos] == '\r')) ++pos;
      std::size_t end = pos;
      while (end < line.size() && line[end] != ' ' && line[end] != '\t' && line[end] != '\r') ++end;
      if (end > pos) {
        word.assign(line, pos, end - pos);
        on_word(word, number);
        ++words;
      }
      pos = end;
    }
    on_line_end(number);
  }
  if (in.bad()) throw InvalidArgument(path + ": read error after line " + std::to_string(number));
  if (words == 0) throw InvalidArgument(path + ": holds no words (empty file?)");
}

std::vector<Token> read_known(const std::string& path, const Vocabulary& vocab) {
  std::vector<Token> tokens;
  scan_text(
      path,
      [&](const std::string& word, std::uint64_t line) {
        const auto it = vocab.index.find(word);
        if (it == vocab.index.end())
          throw InvalidArgument(path + " line " + std::to_string(line) + ": word '" + word +
                                "' is not in the vocabulary of the training text");
        tokens.push_back(it->second);
      },
      [&](std::uint64_t) { tokens.push_back(vocab.eos); });
  return tokens;
}

}  // namespace

TokenCorpus load_ptb(const std::string& directory) {
  if (directory.empty()) throw InvalidArgument("no Penn Treebank directory given");
  const std::filesystem::path dir(directory);
  TokenCorpus corpus;
  Vocabulary& vocab = corpus.vocab;
  const std::string train = (dir / "ptb.train.txt").string();
  // "<eos>" takes the id of its first use, the end of the first line, as the other words do.
  scan_text(
      train, [&](const std::string& word, std::uint64_t) { corpus.train.push_back(vocab.add(word)); },
      [&](std::uint64_t) { corpus.train.push_back(vocab.eos = vocab.add("<eos>")); });
  corpus.valid = read_known((dir / "ptb.valid.txt").string(), vocab);
  corpus.test = read_known((dir / "ptb.test.txt").string(), vocab);
  return corpus;
}

std::string ptb_directory(const std::string& option) {
  return find_dataset(option, "ptb", "ptb.train.txt");
}

Kokkos::View<Token**, Kokkos::LayoutLeft, Kokkos::HostSpace> batchify(const std::vector<Token>& stream, int rank,
                                                                      int world, Index batch) {
  if (world < 1 || rank < 0 || rank >= world)
    throw InvalidArgument("batchify: rank " + std::to_string(rank) + " of " + std::to_string(world));
  if (batch < 1) throw InvalidArgument("batchify: batch size " + std::to_string(batch) + " must be positive");
  const auto n = static_cast<Index>(stream.size());
  const Index part = n / world;
  const Index length = part / batch;
  if (length < 2)
    throw InvalidArgument("a stream of " + std::to_string(n) + " tokens over " + std::to_string(world) + " ranks x " +
                          std::to_string(batch) + " batch columns leaves columns of " + std::to_string(length) +
                          " tokens (at least 2 needed)");
  Kokkos::View<Token**, Kokkos::LayoutLeft, Kokkos::HostSpace> columns(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, "a2sgd::data::batch_columns"), static_cast<std::size_t>(length),
      static_cast<std::size_t>(batch));
  const Index begin = part * rank;
  for (Index j = 0; j < batch; ++j)
    for (Index t = 0; t < length; ++t) columns(t, j) = stream[static_cast<std::size_t>(begin + j * length + t)];
  return columns;
}

}  // namespace a2sgd::data
