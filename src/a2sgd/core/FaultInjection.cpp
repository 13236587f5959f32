#include <a2sgd/core/FaultInjection.hpp>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>

#include <unistd.h>

namespace a2sgd {
namespace {

int signal_from_name(const std::string& name) {
  if (name.empty() || name == "KILL") return SIGKILL;
  if (name == "USR1") return SIGUSR1;
  if (name == "USR2") return SIGUSR2;
  if (name == "TERM") return SIGTERM;
  if (name == "INT") return SIGINT;
  return SIGKILL;  // a test hook: an unknown name must not make the fault silently disappear
}

}  // namespace

void fault_point(const char* site, std::uint64_t step, int rank) {
  const char* spec = std::getenv("A2SGD_FAULT_INJECT");
  if (!spec || !*spec) return;
  const std::string all(spec);
  for (std::size_t begin = 0; begin <= all.size();) {
    std::size_t end = all.find(',', begin);
    if (end == std::string::npos) end = all.size();
    const std::string s = all.substr(begin, end - begin);
    begin = end + 1;
    const auto at = s.find('@');
    if (at == std::string::npos || s.compare(0, at, site) != 0 || std::strlen(site) != at) continue;
    const auto colon = s.find(':', at);
    const auto equals = s.find('=', at);
    const std::uint64_t want_step = std::strtoull(s.c_str() + at + 1, nullptr, 10);
    const int want_rank = colon == std::string::npos ? 1 : std::atoi(s.c_str() + colon + 1);
    if (want_step != step || want_rank != rank) continue;
    // raise() delivers before it returns: the handler has run when the caller continues.
    ::raise(signal_from_name(equals == std::string::npos ? std::string() : s.substr(equals + 1)));
  }
}

}  // namespace a2sgd
