#include <a2sgd/core/FaultInjection.hpp>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>

#include <unistd.h>

namespace a2sgd {

void fault_point(const char* site, std::uint64_t step, int rank) {
  const char* spec = std::getenv("A2SGD_FAULT_INJECT");
  if (!spec || !*spec) return;
  const std::string s(spec);
  const auto at = s.find('@');
  if (at == std::string::npos || s.compare(0, at, site) != 0 || std::strlen(site) != at) return;
  const auto colon = s.find(':', at);
  const std::uint64_t want_step = std::strtoull(s.c_str() + at + 1, nullptr, 10);
  const int want_rank = colon == std::string::npos ? 1 : std::atoi(s.c_str() + colon + 1);
  if (want_step != step || want_rank != rank) return;
  ::kill(::getpid(), SIGKILL);
}

}  // namespace a2sgd
