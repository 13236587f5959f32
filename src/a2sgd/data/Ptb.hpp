#pragma once
/// @file Ptb.hpp
/// Word-level language-model corpora in the Penn Treebank layout (ptb.train.txt, ptb.valid.txt,
/// ptb.test.txt: one sentence per line, words separated by spaces), and their split into
/// per-rank batch columns for truncated back-propagation through time.

#include <a2sgd/core/Types.hpp>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace a2sgd::data {

using Token = std::int32_t;

/// Words in order of first appearance in the training text, "<eos>" included.
struct Vocabulary {
  std::vector<std::string> words;
  std::unordered_map<std::string, Token> index;
  Token eos = -1;  ///< id of "<eos>", appended at the end of every line

  Index size() const noexcept { return static_cast<Index>(words.size()); }
  /// Adds `word` if it is new; returns its id.
  Token add(const std::string& word);
};

/// The three token streams of a corpus; every id is < vocab.size().
struct TokenCorpus {
  Vocabulary vocab;
  std::vector<Token> train, valid, test;
};

/// Reads <directory>/ptb.{train,valid,test}.txt. The vocabulary comes from the training text (in
/// order of first appearance, so ids are the same on every machine); every line ends with "<eos>".
/// A word of the validation or test text that the training text does not have is an error naming
/// the file, the line and the word. A missing, unreadable, empty or binary file (a NUL byte, or
/// bytes that are not printable ASCII or UTF-8 continuation) throws InvalidArgument naming the
/// file (and the line).
TokenCorpus load_ptb(const std::string& directory);

/// Where the PTB files are: `option` when not empty, else the first of <data home>/ptb and
/// $A2SGD_DATA_DIR that holds ptb.train.txt (DataHome.hpp: the data home is $A2SGD_DATA_DIR, else
/// ${XDG_DATA_HOME:-$HOME/.local/share}/a2sgd, where `a2sgd-fetch-data ptb` puts the files).
std::string ptb_directory(const std::string& option);

/// This rank's batch columns of a token stream: the stream is cut into `world` contiguous parts of
/// floor(n / world) tokens (rank r takes part r), and the part into `batch` contiguous columns of
/// floor(part / batch) tokens; column j of the result holds tokens [j L, (j + 1) L) of the part.
/// Tokens that do not fill a column are dropped (the standard "batchify"). Throws InvalidArgument
/// when a column would be shorter than 2 tokens (a target needs a next token).
Kokkos::View<Token**, Kokkos::LayoutLeft, Kokkos::HostSpace> batchify(const std::vector<Token>& stream, int rank,
                                                                      int world, Index batch);

}  // namespace a2sgd::data
