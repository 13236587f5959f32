#pragma once
// Rank 0's progress output: a live bar on a terminal, plain lines otherwise.

#include <cstdint>
#include <cstdio>
#include <string>

#include <unistd.h>

namespace a2sgd::train {

inline std::string format_duration(double seconds) {
  if (!(seconds >= 0.0) || seconds > 1e7) return "--:--";
  const auto s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

class Progress {
 public:
  Progress(bool enabled, bool bar_allowed, std::uint64_t total_steps, std::uint64_t epochs)
      : m_enabled(enabled),
        m_bar(enabled && bar_allowed && ::isatty(STDOUT_FILENO)),
        m_total(total_steps),
        m_epochs(epochs) {}

  bool live() const { return m_bar; }

  /// Status after `done` steps (the live bar redraws; plain mode prints when `log` is set).
  void status(std::uint64_t done, std::uint64_t epoch, double loss, double rate, const std::string& unit, double eta_s,
              bool log) {
    if (!m_enabled) return;
    char text[256];
    std::snprintf(text, sizeof text, "epoch %llu/%llu  step %llu/%llu  loss %.4f  %.0f %s/s  ETA %s",
                  static_cast<unsigned long long>(epoch), static_cast<unsigned long long>(m_epochs),
                  static_cast<unsigned long long>(done), static_cast<unsigned long long>(m_total), loss, rate,
                  unit.c_str(), format_duration(eta_s).c_str());
    if (m_bar) {
      constexpr int width = 24;
      const int filled = m_total ? static_cast<int>(width * done / m_total) : width;
      std::string bar(static_cast<std::size_t>(filled), '=');
      if (filled < width) bar += '>' + std::string(static_cast<std::size_t>(width - filled - 1), ' ');
      std::printf("\r[%s] %s\033[K", bar.c_str(), text);
      std::fflush(stdout);
      m_dirty = true;
    } else if (log) {
      std::printf("%s\n", text);
      std::fflush(stdout);
    }
  }

  /// A full line (an evaluation result, a warning) above the bar.
  void line(const std::string& text) {
    if (!m_enabled) return;
    if (m_dirty) std::printf("\r\033[K");
    if (!text.empty()) std::printf("%s\n", text.c_str());
    std::fflush(stdout);
    m_dirty = false;
  }

  void finish() {
    if (m_dirty) std::printf("\n");
    m_dirty = false;
  }

 private:
  bool m_enabled;
  bool m_bar;
  bool m_dirty = false;
  std::uint64_t m_total;
  std::uint64_t m_epochs;
};

}  // namespace a2sgd::train
