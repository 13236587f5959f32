#pragma once
// Choosing among interchangeable forms of a kernel by their recent speed (internal).

#include <cstdint>

namespace a2sgd::compress::impl {

/// Picks, call by call, one of `forms` forms of a kernel that give the same results at different
/// speeds, from timings of the calls themselves. Which form is fastest can depend on more than
/// the CPU model (a VM's memory system, the other tenants of a node) and can change while a job
/// runs, so it is measured where the kernel runs rather than fixed at build time.
///
/// - Until every form has `window` timings, next() returns the form with the fewest, so a caller
///   that fills the selector in a loop times the forms alternately, round by round.
/// - Then next() returns the preferred form unless another's last `window` timings have a median
///   (robust to a timing that another process interrupted) at least `switch_margin` below the
///   preferred form's, in which case it returns the form with the smallest median; except on
///   every `explore_period`-th call, which runs the other forms in turn so that their timings
///   follow the machine: a change of the fastest form is noticed after a few of these calls.
///   Without the margin, forms within the timings' noise of each other would be chosen by that
///   noise, and a form that is usually faster would lose to one that is only sometimes.
///
/// Timings are seconds per entry, so that calls of different sizes compare. Not thread-safe:
/// callers lock.
class FormSelector {
 public:
  static constexpr int forms = 3;
  static constexpr int window = 5;
  static constexpr int explore_period = 16;
  static constexpr double switch_margin = 0.05;

  /// `preferred`: the form to run while no other is clearly faster (0 when out of range).
  explicit FormSelector(int preferred = 0) noexcept
      : m_preferred(preferred >= 0 && preferred < forms ? preferred : 0) {}

  /// Whether every form has `window` timings.
  bool ready() const noexcept;

  /// The form next() runs on a call that does not explore (see the class comment); -1 until
  /// ready().
  int fastest() const noexcept;

  /// The form to run now (see the class comment); counts the call once ready().
  int next() noexcept;

  /// Records a timing of `form`, in seconds per entry. Out-of-range forms and non-finite or
  /// negative timings are ignored.
  void record(int form, double seconds_per_entry) noexcept;

 private:
  double m_timings[forms][window] = {};
  std::int64_t m_recorded[forms] = {};  // timings so far; the next one goes to m_recorded % window
  std::int64_t m_calls = 0;             // next() calls since ready()
  int m_explored = 0;                   // the form the last exploring call ran
  int m_preferred = 0;
};

}  // namespace a2sgd::compress::impl
