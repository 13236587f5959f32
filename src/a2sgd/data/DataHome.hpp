#pragma once
/// @file DataHome.hpp
/// Where a2sgd looks for a data set when no directory is named: the same places
/// `scripts/fetch_data.sh` (installed as `a2sgd-fetch-data`) puts the files in.

#include <string>
#include <vector>

namespace a2sgd::data {

/// The data home: $A2SGD_DATA_DIR when set and not empty, else $XDG_DATA_HOME/a2sgd, else
/// $HOME/.local/share/a2sgd. Empty when none of A2SGD_DATA_DIR, XDG_DATA_HOME and HOME is set.
std::string data_home();

/// The directories searched, in order, for `dataset` (ptb, fashion-mnist, ...) when `option` (a
/// --data-dir) is empty: <data home>/<dataset>; for ptb also $A2SGD_DATA_DIR itself (a directory
/// holding the PTB files directly, as older releases read it); for fashion-mnist also Debian's
/// package location /usr/share/datasets/fashion-mnist. `option` alone when it is not empty.
std::vector<std::string> dataset_search_path(const std::string& option, const std::string& dataset);

/// The first directory of dataset_search_path() that holds `marker` (a file name of the data
/// set, e.g. ptb.train.txt); the first entry of the path when none does (so that the loader names
/// the file it misses there). Empty when the path is empty.
std::string find_dataset(const std::string& option, const std::string& dataset, const std::string& marker);

/// The sentence a2sgd's errors end with when a data set is missing: where it was looked for and
/// the command that fetches it.
std::string dataset_hint(const std::string& dataset);

}  // namespace a2sgd::data
