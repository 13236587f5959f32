#include <a2sgd/data/DataHome.hpp>

#include <cstdlib>
#include <filesystem>

namespace a2sgd::data {

namespace {

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::string(value) : std::string();
}

}  // namespace

std::string data_home() {
  if (const std::string dir = environment("A2SGD_DATA_DIR"); !dir.empty()) return dir;
  if (const std::string xdg = environment("XDG_DATA_HOME"); !xdg.empty())
    return (std::filesystem::path(xdg) / "a2sgd").string();
  if (const std::string home = environment("HOME"); !home.empty())
    return (std::filesystem::path(home) / ".local" / "share" / "a2sgd").string();
  return {};
}

std::vector<std::string> dataset_search_path(const std::string& option, const std::string& dataset) {
  if (!option.empty()) return {option};
  std::vector<std::string> path;
  if (const std::string home = data_home(); !home.empty())
    path.push_back((std::filesystem::path(home) / dataset).string());
  if (const std::string dir = environment("A2SGD_DATA_DIR"); !dir.empty() && dataset == "ptb") path.push_back(dir);
  if (dataset == "fashion-mnist") path.emplace_back("/usr/share/datasets/fashion-mnist");
  return path;
}

std::string find_dataset(const std::string& option, const std::string& dataset, const std::string& marker) {
  const auto path = dataset_search_path(option, dataset);
  std::error_code ec;
  for (const auto& dir : path)
    if (std::filesystem::exists(std::filesystem::path(dir) / marker, ec) ||
        std::filesystem::exists(std::filesystem::path(dir) / (marker + ".gz"), ec))
      return dir;
  return path.empty() ? std::string() : path.front();
}

std::string dataset_hint(const std::string& dataset) {
  std::string where;
  for (const auto& dir : dataset_search_path("", dataset)) where += (where.empty() ? "" : ", ") + dir;
  return "looked in " +
         (where.empty() ? std::string("no place (A2SGD_DATA_DIR, XDG_DATA_HOME and HOME unset)") : where) +
         "; fetch it with `a2sgd-fetch-data " + dataset + "` (scripts/fetch_data.sh in a source tree), or name its " +
         "directory with --data-dir";
}

}  // namespace a2sgd::data
