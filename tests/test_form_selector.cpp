#include "TestingCatch.hpp"

#include <a2sgd/compress/impl/FormSelector.hpp>

#include <array>
#include <cmath>
#include <limits>

using a2sgd::compress::impl::FormSelector;

namespace {

constexpr int forms = FormSelector::forms;

// Fills a selector as a caller does at its first timed call: next() until ready(), recording the
// given per-form timing each time. Returns the forms in the order next() gave them.
std::array<int, forms * FormSelector::window> fill(FormSelector& selector, const std::array<double, forms>& timing) {
  std::array<int, forms * FormSelector::window> order{};
  for (int& form : order) {
    REQUIRE_FALSE(selector.ready());
    form = selector.next();
    selector.record(form, timing[form]);
  }
  return order;
}

}  // namespace

TEST_CASE("FormSelector times the forms alternately until each has a full window", "[form_selector]") {
  FormSelector selector;
  CHECK(selector.fastest() == -1);
  const auto order = fill(selector, {3.0, 2.0, 1.0});
  // Round by round: 0, 1, 2, 0, 1, 2, ... so that a drift of the machine reaches every form alike.
  for (std::size_t i = 0; i < order.size(); ++i) CHECK(order[i] == static_cast<int>(i % forms));
  CHECK(selector.ready());
  CHECK(selector.fastest() == 2);
}

TEST_CASE("FormSelector runs the fastest form and explores the others in turn", "[form_selector]") {
  FormSelector selector;
  fill(selector, {2.0, 0.5, 1.0});
  const int calls = 10 * FormSelector::explore_period;
  std::array<int, forms> runs{};
  int last_explored = -1;
  for (int call = 1; call <= calls; ++call) {
    const int form = selector.next();
    INFO("call " << call);
    if (call % FormSelector::explore_period == 0) {
      CHECK(form != 1);              // exploring: another form than the fastest,
      CHECK(form != last_explored);  // and not the same one twice in a row
      last_explored = form;
    } else {
      CHECK(form == 1);
    }
    ++runs[form];
    selector.record(form, form == 0 ? 2.0 : form == 1 ? 0.5 : 1.0);
  }
  CHECK(runs[0] == 5);
  CHECK(runs[2] == 5);
  CHECK(runs[1] == calls - 10);
}

TEST_CASE("FormSelector keeps its preferred form unless another is clearly faster", "[form_selector]") {
  static_assert(FormSelector::switch_margin > 0.0 && FormSelector::switch_margin < 0.5);
  const double within = 1.0 - 0.5 * FormSelector::switch_margin;  // faster, but within the margin
  const double beyond = 1.0 - 2.0 * FormSelector::switch_margin;  // faster by more than the margin
  SECTION("another form faster within the margin: the preferred one runs") {
    FormSelector selector(2);
    fill(selector, {1.0, within, 1.0});
    CHECK(selector.fastest() == 2);
    CHECK(selector.next() == 2);
  }
  SECTION("another form faster by more than the margin: the fastest runs") {
    FormSelector selector(2);
    fill(selector, {1.0, beyond, 1.0});
    CHECK(selector.fastest() == 1);
    CHECK(selector.next() == 1);
  }
  SECTION("the preferred form is the fastest") {
    FormSelector selector(1);
    fill(selector, {beyond, 0.5 * beyond, within});
    CHECK(selector.fastest() == 1);
  }
  SECTION("a preferred form out of range stands for form 0") {
    for (const int preferred : {-1, FormSelector::forms}) {
      FormSelector selector(preferred);
      fill(selector, {1.0, within, within});
      CHECK(selector.fastest() == 0);
    }
  }
}

TEST_CASE("FormSelector keeps its choice through a few interrupted timings", "[form_selector]") {
  FormSelector selector;
  fill(selector, {1.0, 2.0, 3.0});
  // Two of the chosen form's five latest timings slowed down 10x (another process took the core):
  // an exploring call is compared with their median and still found slower.
  for (const double t : {1.0, 1.0, 1.0, 10.0, 10.0}) selector.record(0, t);
  selector.record(1, 2.0);
  CHECK(selector.fastest() == 0);
  // The chosen form stays 10x slower: once most of form 1's last comparisons say so, it takes over.
  for (int i = 0; i < FormSelector::window; ++i) selector.record(0, 10.0);
  selector.record(1, 2.0);
  selector.record(1, 2.0);
  CHECK(selector.fastest() == 0);
  selector.record(1, 2.0);
  CHECK(selector.fastest() == 1);
}

TEST_CASE("FormSelector is not moved by a drift of the machine's speed", "[form_selector]") {
  // Every form slows down by 1% per call, form 0 staying the fastest by more than the margin. The
  // other forms run once in many calls: their timings against the chosen form's latest would
  // measure the drift; their comparisons with the chosen form's timings of the same moment do not.
  FormSelector selector;
  const double slower = 1.0 + 2.0 * FormSelector::switch_margin;
  fill(selector, {1.0, slower, slower});
  for (int call = 1; call <= 40 * FormSelector::explore_period; ++call) {
    const double drift = 1.0 + 0.01 * call;
    const int form = selector.next();
    selector.record(form, (form == 0 ? 1.0 : slower) * drift);
    INFO("call " << call);
    REQUIRE(selector.fastest() == 0);
  }
}

TEST_CASE("FormSelector follows a change of the fastest form within a few exploring calls", "[form_selector]") {
  FormSelector selector;
  fill(selector, {1.0, 2.0, 3.0});
  // From now on form 2 is the fastest and form 0 the slowest (the machine changed).
  const std::array<double, forms> changed{4.0, 2.0, 0.5};
  int switched_after = -1;
  for (int call = 1; call <= 20 * FormSelector::explore_period; ++call) {
    const int form = selector.next();
    selector.record(form, changed[form]);
    if (selector.fastest() == 2) {
      switched_after = call;
      break;
    }
  }
  // Form 0 slows at once (it runs every call); each other form needs a majority of new
  // comparisons, 3 of 5, one per two exploring calls: form 1 takes over, then form 2.
  INFO("switched after " << switched_after << " calls");
  CHECK(switched_after > 0);
  CHECK(switched_after <= (FormSelector::window / 2 + 1) * forms * FormSelector::explore_period);
}

TEST_CASE("FormSelector ignores timings that cannot be", "[form_selector]") {
  FormSelector selector;
  for (int f = 0; f < forms; ++f)
    for (int i = 0; i < FormSelector::window; ++i) {
      selector.record(f, -1.0);
      selector.record(f, std::numeric_limits<double>::quiet_NaN());
      selector.record(f, std::numeric_limits<double>::infinity());
    }
  selector.record(-1, 1.0);
  selector.record(forms, 1.0);
  CHECK_FALSE(selector.ready());
  CHECK(selector.fastest() == -1);
  CHECK(selector.next() == 0);
}
