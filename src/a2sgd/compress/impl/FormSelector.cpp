#include <a2sgd/compress/impl/FormSelector.hpp>

#include <algorithm>
#include <cmath>

namespace a2sgd::compress::impl {

bool FormSelector::ready() const noexcept {
  return std::all_of(m_recorded, m_recorded + forms, [](std::int64_t count) { return count >= window; });
}

int FormSelector::fastest() const noexcept {
  if (!ready()) return -1;
  double medians[forms];
  for (int f = 0; f < forms; ++f) {
    double timings[window];
    std::copy(m_timings[f], m_timings[f] + window, timings);
    std::nth_element(timings, timings + window / 2, timings + window);
    medians[f] = timings[window / 2];
  }
  const int best = static_cast<int>(std::min_element(medians, medians + forms) - medians);
  return medians[best] < (1.0 - switch_margin) * medians[m_preferred] ? best : m_preferred;
}

int FormSelector::next() noexcept {
  if (!ready()) return static_cast<int>(std::min_element(m_recorded, m_recorded + forms) - m_recorded);
  const int best = fastest();
  if (++m_calls % explore_period != 0) return best;
  m_explored = (m_explored + 1) % forms;
  if (m_explored == best) m_explored = (m_explored + 1) % forms;
  return m_explored;
}

void FormSelector::record(int form, double seconds_per_entry) noexcept {
  if (form < 0 || form >= forms || !std::isfinite(seconds_per_entry) || seconds_per_entry < 0.0) return;
  m_timings[form][m_recorded[form] % window] = seconds_per_entry;
  ++m_recorded[form];
}

}  // namespace a2sgd::compress::impl
