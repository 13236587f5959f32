#pragma once
// a2sgd-train's TrainObserver: rank 0 writes every record to the JSON Lines metrics file and shows
// progress (a live bar on a terminal, plain lines otherwise); warnings go to standard error.

#include "Metrics.hpp"
#include "Progress.hpp"

#include <a2sgd/train/Observer.hpp>

#include <cstdio>
#include <memory>
#include <string>
#include <type_traits>

namespace a2sgd::train {

class Reporter final : public TrainObserver {
 public:
  Reporter(bool rank0, bool quiet, bool bar, std::uint64_t total_steps, std::uint64_t epochs)
      : m_rank0(rank0), m_quiet(quiet), m_progress(rank0 && !quiet, bar, total_steps, epochs) {}

  MetricsWriter& metrics() { return m_metrics; }

  void record(const Record& rec) override {
    if (!m_rank0) return;
    JsonRecord json;
    for (const auto& [key, value] : rec.fields()) std::visit([&, k = key](const auto& v) { json.add(k, v); }, value);
    m_metrics.write(json);
    if (const RecordValue* event = rec.find("event"); event && std::get<std::string>(*event) == "summary")
      print_summary(rec);
  }
  void status(const StepStatus& s) override {
    if (!s.logged && !m_progress.live()) return;
    m_progress.status(s.done, s.epoch, s.loss, s.rate, s.unit, s.eta_s, s.logged);
  }
  void message(const std::string& text) override { m_progress.line(text); }
  void warning(const std::string& text) override {
    if (!m_rank0) return;
    m_progress.line("");  // clears a live progress bar
    std::fprintf(stderr, "a2sgd-train: warning: %s\n", text.c_str());
    std::fflush(stderr);
  }
  void rank_warning(int rank, const std::string& text) override {
    if (m_rank0) m_progress.line("");
    // The library's text says whether the run stops; the option that makes it stop is ours.
    const bool stopping = text.size() >= 10 && text.compare(text.size() - 10, 10, "; stopping") == 0;
    std::fprintf(stderr, "a2sgd-train: rank %d: warning: %s%s\n", rank, text.c_str(),
                 stopping ? " (--stop-on-divergence)" : " (--stop-on-divergence stops such a run)");
    std::fflush(stderr);
  }
  void finish() override { m_progress.finish(); }

 private:
  static double number(const Record& rec, const std::string& key) {
    const RecordValue* v = rec.find(key);
    if (!v) return 0.0;
    return std::visit(
        [](const auto& x) -> double {
          if constexpr (std::is_arithmetic_v<std::decay_t<decltype(x)>>)
            return static_cast<double>(x);
          else
            return 0.0;
        },
        *v);
  }
  void print_summary(const Record& rec) {
    if (m_quiet) return;
    std::printf(
        "done: %.0f steps in %.1f s; %.3f ms per step (compute %.3f, compress %.3f, communication %.3f, "
        "optimizer %.3f)\n",
        number(rec, "steps"), number(rec, "wall_s"), 1e3 * number(rec, "step_time_s"),
        1e3 * number(rec, "compute_s_per_step"), 1e3 * number(rec, "compress_s_per_step"),
        1e3 * number(rec, "comm_s_per_step"), 1e3 * number(rec, "optimizer_s_per_step"));
    std::printf("      %.0f bytes per step per rank handed to MPI (dense all-reduce: %.0f, %.1fx less)\n",
                number(rec, "bytes_per_step"), number(rec, "dense_bytes_per_step"), number(rec, "reduction_factor"));
    if (rec.find("test_perplexity"))
      std::printf("      test perplexity %.2f (replica 0), %.2f (averaged model)\n", number(rec, "test_perplexity"),
                  number(rec, "test_perplexity_averaged"));
    else
      std::printf("      test accuracy %.4f (replica 0), %.4f (averaged model)\n", number(rec, "test_accuracy"),
                  number(rec, "test_accuracy_averaged"));
    if (number(rec, "final_average_bytes") > 0)
      std::printf(
          "      the model to deploy is the averaged model (one all-reduce of %.0f bytes at the end; the final "
          "checkpoint holds it next to the replicas)\n",
          number(rec, "final_average_bytes"));
    std::fflush(stdout);
  }

  bool m_rank0, m_quiet;
  MetricsWriter m_metrics;
  Progress m_progress;
};

}  // namespace a2sgd::train
