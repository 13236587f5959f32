#pragma once
// A GradientListener for model tests: records each reported range and a copy of the gradient's
// values in it at the time of the report, so that a test can check that a model reports its
// gradient_order() and that nothing writes a range after reporting it final.

#include <a2sgd/core/GradientListener.hpp>

#include <Kokkos_Core.hpp>

#include <vector>

namespace a2sgd::testing {

struct GradientRecorder : GradientListener {
  explicit GradientRecorder(FloatView grads) : grads(std::move(grads)) {}
  void gradient_ready(const ExecutionSpace& exec, GradientRange range) override {
    exec.fence();
    ranges.push_back(range);
    const auto part = Kokkos::subview(grads, std::make_pair(range.begin, range.end));
    auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), part);
    snapshots.emplace_back(host.data(), host.data() + host.extent(0));
  }
  /// The ranges whose reported values differ from `final_grads` (the gradient after the pass).
  std::size_t changed_after_report(const std::vector<float>& final_grads) const {
    std::size_t changed = 0;
    for (std::size_t k = 0; k < ranges.size(); ++k)
      for (Index i = ranges[k].begin; i < ranges[k].end; ++i)
        if (!(snapshots[k][static_cast<std::size_t>(i - ranges[k].begin)] ==
              final_grads[static_cast<std::size_t>(i)])) {
          ++changed;
          break;
        }
    return changed;
  }

  FloatView grads;
  std::vector<GradientRange> ranges;
  std::vector<std::vector<float>> snapshots;
};

}  // namespace a2sgd::testing
