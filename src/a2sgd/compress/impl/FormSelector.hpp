#pragma once
// Choosing among interchangeable forms of a kernel by their speed relative to each other
// (internal).

#include <cstdint>

namespace a2sgd::compress::impl {

/// Picks, call by call, one of `forms` forms of a kernel that give the same results at different
/// speeds, from timings of the calls themselves. Which form is fastest can depend on more than
/// the CPU model (a VM's memory system, the other tenants of a node) and can change while a job
/// runs, so it is measured where the kernel runs rather than fixed at build time.
///
/// - Until every form has `window` timings, next() returns the form with the fewest, so a caller
///   that fills the selector in a loop times the forms alternately, round by round. Each form is
///   then compared with the preferred one round by round: its timing over the preferred form's
///   in the same round.
/// - Then next() runs the chosen form (at first the preferred one), except on every
///   `explore_period`-th call, which runs the other forms in turn. An exploring call's timing is
///   compared with the chosen form's timings of the calls just before it (their median, robust to
///   one that another process interrupted).
/// - A form replaces the chosen one when the median of its last `window` comparisons says it is
///   at least `switch_margin` faster.
///
/// Why comparisons rather than timings: the chosen form is timed at every call, the others once
/// in `forms - 1` exploring periods, so their latest timings can be many calls old. On a machine
/// whose speed drifts (a VM whose neighbours come and go), old timings of the other forms against
/// fresh ones of the chosen form measure the drift, not the forms. The margin keeps forms within
/// the comparisons' noise of each other from being chosen by that noise.
///
/// Timings are seconds per entry, so that calls of different sizes compare. Not thread-safe:
/// callers lock.
class FormSelector {
 public:
  static constexpr int forms = 3;
  static constexpr int window = 5;
  static constexpr int explore_period = 16;
  static constexpr double switch_margin = 0.05;

  /// `preferred`: the form chosen first, the others' reference in the first timings (0 when out
  /// of range).
  explicit FormSelector(int preferred = 0) noexcept
      : m_preferred(preferred >= 0 && preferred < forms ? preferred : 0) {}

  /// Whether every form has `window` timings.
  bool ready() const noexcept;

  /// The chosen form, which next() runs on a call that does not explore; -1 until ready().
  int fastest() const noexcept;

  /// The form to run now (see the class comment); counts the call once ready().
  int next() noexcept;

  /// Records a timing of `form`, in seconds per entry. Out-of-range forms and non-finite or
  /// negative timings are ignored.
  void record(int form, double seconds_per_entry) noexcept;

 private:
  void choose_fastest() noexcept;

  double m_timings[forms][window] = {};  // the first timings; then the chosen form's latest
  std::int64_t m_recorded[forms] = {};   // timings so far; the next one goes to m_recorded % window
  double m_ratios[forms][window] = {};   // each form's last comparisons with the chosen form
  std::int64_t m_compared[forms] = {};   // comparisons so far; the next one goes to m_compared % window
  std::int64_t m_chosen_since = 0;       // timings of the chosen form since it was chosen
  std::int64_t m_calls = 0;              // next() calls since ready()
  int m_explored = 0;                    // the form the last exploring call ran
  int m_preferred = 0;
  int m_chosen = -1;
};

}  // namespace a2sgd::compress::impl
