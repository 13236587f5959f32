#include <a2sgd/compress/impl/FormSelector.hpp>

#include <algorithm>
#include <cmath>

namespace a2sgd::compress::impl {
namespace {

template <int N>
double median_of(const double (&values)[N]) {
  double v[N];
  std::copy(values, values + N, v);
  std::nth_element(v, v + N / 2, v + N);
  return v[N / 2];
}

}  // namespace

bool FormSelector::ready() const noexcept {
  return m_chosen >= 0;
}

int FormSelector::fastest() const noexcept {
  return m_chosen;
}

int FormSelector::next() noexcept {
  if (!ready()) return static_cast<int>(std::min_element(m_recorded, m_recorded + forms) - m_recorded);
  if (++m_calls % explore_period != 0) return m_chosen;
  m_explored = (m_explored + 1) % forms;
  if (m_explored == m_chosen) m_explored = (m_explored + 1) % forms;
  return m_explored;
}

// Switches to the form whose comparisons say it is fastest, if that is by the margin, and
// re-expresses every comparison relative to it (a ratio to the old choice over the new one's).
void FormSelector::choose_fastest() noexcept {
  int best = m_chosen;
  double best_ratio = 1.0;
  for (int f = 0; f < forms; ++f) {
    if (f == m_chosen) continue;
    const double r = median_of(m_ratios[f]);
    if (r < best_ratio) {
      best = f;
      best_ratio = r;
    }
  }
  if (best == m_chosen || best_ratio >= 1.0 - switch_margin) return;
  for (int f = 0; f < forms; ++f)
    for (double& r : m_ratios[f]) r = f == m_chosen ? 1.0 / best_ratio : r / best_ratio;
  m_chosen = best;
  m_chosen_since = 0;
}

void FormSelector::record(int form, double seconds_per_entry) noexcept {
  if (form < 0 || form >= forms || !std::isfinite(seconds_per_entry) || seconds_per_entry < 0.0) return;
  if (!ready()) {
    m_timings[form][m_recorded[form] % window] = seconds_per_entry;
    ++m_recorded[form];
    if (!std::all_of(m_recorded, m_recorded + forms, [](std::int64_t count) { return count >= window; })) return;
    // Round i of the first timings holds every form's i-th timing: compare them there.
    for (int f = 0; f < forms; ++f)
      for (int i = 0; i < window; ++i) {
        const double reference = m_timings[m_preferred][i];
        m_ratios[f][i] = reference > 0.0 ? m_timings[f][i] / reference : 1.0;
      }
    std::fill(m_compared, m_compared + forms, std::int64_t(window));
    m_chosen = m_preferred;
    m_chosen_since = window;  // its first timings were taken next to the others'
    choose_fastest();
    return;
  }
  if (form == m_chosen) {
    m_timings[form][m_recorded[form] % window] = seconds_per_entry;
    ++m_recorded[form];
    ++m_chosen_since;
    return;
  }
  // An exploring call: compared with the chosen form's latest timings, once it has a full window
  // of them since it was chosen (before that the window still holds older ones).
  if (m_chosen_since < window) return;
  const double reference = median_of(m_timings[m_chosen]);
  if (!(reference > 0.0)) return;
  m_ratios[form][m_compared[form] % window] = seconds_per_entry / reference;
  ++m_compared[form];
  choose_fastest();
}

}  // namespace a2sgd::compress::impl
