// a2sgd-bench-lstm: speed of the LSTM language model on one rank. A whole training step
// (forward, backward, gradient clipping, exchange and SGD update, as a2sgd-train runs it) in
// tokens per second, and the decoder's three GEMMs (forward, weight gradient, input gradient, with
// bias and bias gradient) against a plain GEMM of the same size measured in the same run. Then
// what the GEMMs allow: the step's GEMMs replayed alone (the shortest step this BLAS allows), and
// the core's FMA peak, which bounds any GEMM (with the step's GEMM work, the shortest step any
// implementation of this model could reach on one thread).
// benchmarks/torch/lstm_vs_pytorch.py compares the step with PyTorch's.
//
// Exit codes: 0 success, 2 invalid options, 1 other errors.
#include "common/AppMain.hpp"
#include "common/OptionErrors.hpp"
#include "common/Statistics.hpp"
#include "FmaPeak.hpp"

#include <a2sgd/a2sgd.hpp>
#include <a2sgd/core/impl/Gemm.hpp>

#include <boost/program_options.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <vector>

namespace po = boost::program_options;
using namespace a2sgd;

namespace {

using a2sgd::apps::median;

// Median seconds of `repeats` calls of f after `warmup` untimed ones, each fenced.
template <class F>
double time_median(const ExecutionSpace& exec, int warmup, int repeats, F&& f) {
  std::vector<double> t;
  for (int i = 0; i < warmup + repeats; ++i) {
    Stopwatch clock;
    f();
    exec.fence();
    if (i >= warmup) t.push_back(clock.seconds());
  }
  return median(t);
}

Matrix random_matrix(Index rows, Index cols, std::uint64_t seed) {
  Matrix m("bench::m", static_cast<std::size_t>(rows), static_cast<std::size_t>(cols));
  auto h = Kokkos::create_mirror_view(m);
  Rng rng(seed);
  for (std::size_t i = 0; i < h.size(); ++i) h.data()[i] = static_cast<float>(0.1 * rng.normal());
  Kokkos::deep_copy(m, h);
  return m;
}

struct Options {
  long long vocab = 10000, hidden = 200, layers = 2, bptt = 35, batch = 20, repeats = 20, warmup = 3;
  bool json = false;
};

// Parses the command line into `o`; returns -1 to go on, else the exit code (0 after --help).
int parse_options(int argc, char** argv, const Communicator& comm, Options& o) {
  po::options_description desc("a2sgd-bench-lstm options");
  desc.add_options()("help,h", "show this help and exit")("vocab", po::value(&o.vocab)->default_value(o.vocab),
                                                          "vocabulary size")(
      "hidden", po::value(&o.hidden)->default_value(o.hidden), "embedding and hidden width")(
      "layers", po::value(&o.layers)->default_value(o.layers), "LSTM layers")(
      "bptt", po::value(&o.bptt)->default_value(o.bptt), "time steps per batch")(
      "batch-size", po::value(&o.batch)->default_value(o.batch), "columns per batch")(
      "repeats", po::value(&o.repeats)->default_value(o.repeats), "timed repetitions (medians)")(
      "warmup", po::value(&o.warmup)->default_value(o.warmup), "untimed repetitions before them")(
      "json", po::bool_switch(&o.json), "one JSON object instead of text");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (po::error& e) {
    if (comm.rank() == 0)
      std::fprintf(stderr, "a2sgd-bench-lstm: error: %s (see --help)\n", apps::option_error_message(e).c_str());
    return 2;
  }
  if (vm.count("help")) {
    if (comm.rank() == 0) std::cout << desc << '\n';
    return 0;
  }
  if (o.vocab < 2 || o.hidden < 1 || o.layers < 1 || o.bptt < 1 || o.batch < 1 || o.repeats < 1 || o.warmup < 0) {
    if (comm.rank() == 0) std::fprintf(stderr, "a2sgd-bench-lstm: error: sizes must be positive\n");
    return 2;
  }
  return -1;
}

struct Results {
  long long parameters = 0;
  double step_s = 0, decoder_s = 0, gemm_s = 0, decoder_flops = 0, step_gemm_s = 0, step_flops = 0, softmax_s = 0;
  std::vector<apps::FmaPeak> peaks;
};

// The whole step, as a2sgd-train runs it (dense exchange, SGD, clipping at 0.25).
void measure_step(const ExecutionSpace& exec, const Communicator& comm, const Options& o, Results& r) {
  ParameterStore store;
  nn::LstmConfig config;
  config.vocab = o.vocab;
  config.embedding = config.hidden = o.hidden;
  config.layers = o.layers;
  nn::LstmLanguageModel model(config, store);
  store.allocate();
  model.reserve({o.batch, o.bptt}, {o.batch, o.bptt});
  model.initialize(store.params(), 1);
  Kokkos::View<std::int32_t**, Kokkos::LayoutLeft, MemorySpace> tokens(
      "bench::tokens", static_cast<std::size_t>(o.bptt + 1), static_cast<std::size_t>(o.batch));
  {
    auto h = Kokkos::create_mirror_view(tokens);
    Rng rng(7);
    for (std::size_t i = 0; i < h.size(); ++i)
      h.data()[i] = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(o.vocab)));
    Kokkos::deep_copy(tokens, h);
  }
  nn::Batch b;
  b.tokens = tokens;
  ExchangeConfig xc;
  xc.method = "dense";
  auto exchange = make_exchange(xc, comm, store.size(), exec);
  Optimizer sgd(OptimizerConfig{}, store.size());
  GradientClipper clip(0.25);
  std::uint64_t step = 0;
  r.parameters = static_cast<long long>(store.size());
  r.step_s = time_median(exec, static_cast<int>(o.warmup), static_cast<int>(o.repeats), [&] {
    model.forward_backward(exec, store.params(), store.grads(), b, nn::StepContext{1, step++, 0});
    clip.apply(exec, store.grads());
    exchange->step(store.params(), store.grads(), sgd, 1.0);  // lr 1 keeps the weights moving slowly
  });
}

// The decoder alone: Z = Y W^T + b, then dW = dZ^T Y, db = column sums, dY = dZ W; the same-run
// BLAS reference (the three products as plain GEMMs, no bias work); the softmax on its output.
void measure_decoder(const ExecutionSpace& exec, const Options& o, Results& r) {
  const Index rows = o.bptt * o.batch;
  const Matrix y = random_matrix(rows, o.hidden, 1), dz = random_matrix(rows, o.vocab, 2);
  const Matrix z("bench::z", static_cast<std::size_t>(rows), static_cast<std::size_t>(o.vocab));
  const Matrix dy("bench::dy", static_cast<std::size_t>(rows), static_cast<std::size_t>(o.hidden));
  const Matrix w = random_matrix(o.vocab, o.hidden, 3);
  const Matrix dw("bench::dw", static_cast<std::size_t>(o.vocab), static_cast<std::size_t>(o.hidden));
  const FloatView bias("bench::bias", static_cast<std::size_t>(o.vocab)),
      dbias("bench::dbias", static_cast<std::size_t>(o.vocab));
  const int warmup = static_cast<int>(o.warmup), repeats = static_cast<int>(o.repeats);
  r.decoder_s = time_median(exec, warmup, repeats, [&] {
    nn::linear_forward(exec, y, w, bias, z, nn::Activation::none);
    nn::linear_backward(exec, y, dz, w, dw, dbias, dy, nn::Activation::none);
  });
  r.gemm_s = time_median(exec, warmup, repeats, [&] {
    detail::gemm(exec, "N", "T", 1.0f, y, w, 0.0f, z);
    detail::gemm(exec, "T", "N", 1.0f, dz, y, 0.0f, dw);
    detail::gemm(exec, "N", "N", 1.0f, dz, w, 0.0f, dy);
  });
  r.decoder_flops =
      3.0 * 2.0 * static_cast<double>(rows) * static_cast<double>(o.hidden) * static_cast<double>(o.vocab);
  const LabelView labels("bench::labels", static_cast<std::size_t>(rows));
  r.softmax_s = time_median(exec, warmup, repeats,
                            [&] { nn::softmax_cross_entropy(exec, z, labels, dz, 1.0f / static_cast<float>(rows)); });
}

// The step's GEMMs alone: every product the model issues in a step (lstm_forward,
// lstm_backward, the decoder), same shapes, transposes and order, on buffers of their own. Per
// layer (input width `in`, gates 4H): forward, the input projection of all rows and the
// recurrent product of every step; backward, the recurrent product of every step but the first,
// both weight gradients and the input gradient (the embedding's, for layer 0). Its time is the
// shortest step this BLAS allows; the step's time minus it is everything else.
void measure_step_gemms(const ExecutionSpace& exec, const Options& o, Results& r) {
  const Index rows = o.bptt * o.batch, gates = 4 * o.hidden, batch = o.batch;
  const Matrix y = random_matrix(rows, o.hidden, 1), dz = random_matrix(rows, o.vocab, 2);
  const Matrix w = random_matrix(o.vocab, o.hidden, 3);
  const Matrix z("bench::z", static_cast<std::size_t>(rows), static_cast<std::size_t>(o.vocab));
  const Matrix dy("bench::dy", static_cast<std::size_t>(rows), static_cast<std::size_t>(o.hidden));
  const Matrix dw("bench::dw", static_cast<std::size_t>(o.vocab), static_cast<std::size_t>(o.hidden));
  const Matrix x_all = random_matrix(rows, o.hidden, 4), g_all = random_matrix(rows, gates, 5);
  const Matrix w_ih = random_matrix(gates, o.hidden, 6), w_hh = random_matrix(gates, o.hidden, 7);
  const Matrix dw_ih("bench::dw_ih", static_cast<std::size_t>(gates), static_cast<std::size_t>(o.hidden));
  const Matrix dw_hh("bench::dw_hh", static_cast<std::size_t>(gates), static_cast<std::size_t>(o.hidden));
  const Matrix dx_all("bench::dx", static_cast<std::size_t>(rows), static_cast<std::size_t>(o.hidden));
  const Matrix gates_all("bench::gates", static_cast<std::size_t>(rows), static_cast<std::size_t>(gates));
  double step_flops = 0.0;
  auto step_gemms = [&](bool count) {
    auto gemm = [&](const char* ta, const char* tb, const auto& a, const auto& b, float beta, const auto& c) {
      detail::gemm(exec, ta, tb, 1.0f, a, b, beta, c);
      if (count)
        step_flops += 2.0 * static_cast<double>(c.extent(0)) * static_cast<double>(c.extent(1)) *
                      static_cast<double>(ta[0] == 'N' ? a.extent(1) : a.extent(0));
    };
    auto step_rows = [&](const Matrix& m, Index t) {
      return Kokkos::subview(m, Kokkos::make_pair(t * batch, (t + 1) * batch), Kokkos::ALL);
    };
    for (long long l = 0; l < o.layers; ++l) {
      gemm("N", "T", x_all, w_ih, 0.0f, gates_all);
      for (Index t = 0; t < o.bptt; ++t) gemm("N", "T", step_rows(x_all, t), w_hh, 1.0f, step_rows(gates_all, t));
    }
    gemm("N", "T", y, w, 0.0f, z);
    gemm("T", "N", dz, y, 0.0f, dw);
    gemm("N", "N", dz, w, 0.0f, dy);
    for (long long l = 0; l < o.layers; ++l) {
      for (Index t = o.bptt; t-- > 1;) gemm("N", "N", step_rows(g_all, t), w_hh, 0.0f, step_rows(dx_all, t));
      gemm("T", "N", g_all, x_all, 0.0f, dw_ih);
      gemm("T", "N", g_all, x_all, 0.0f, dw_hh);
      gemm("N", "N", g_all, w_ih, 0.0f, dx_all);
    }
  };
  step_gemms(true);
  r.step_flops = step_flops;
  r.step_gemm_s =
      time_median(exec, static_cast<int>(o.warmup), static_cast<int>(o.repeats), [&] { step_gemms(false); });
}

void print_json(const Options& o, const Results& r) {
  std::printf(
      "{\"exec_space\": \"%s\", \"vocab\": %lld, \"hidden\": %lld, \"layers\": %lld, \"bptt\": %lld, \"batch\": "
      "%lld, \"parameters\": %lld, \"step_s\": %.6g, \"tokens_per_s\": %.6g, \"decoder_s\": %.6g, "
      "\"decoder_gflops\": %.6g, \"gemm_s\": %.6g, \"gemm_gflops\": %.6g, \"decoder_fraction_of_gemm\": %.4f, "
      "\"softmax_s\": %.6g, \"step_gemm_flops\": %.0f, \"step_gemm_s\": %.6g, \"heap_policy\": \"%s\"",
      ExecutionSpace::name(), o.vocab, o.hidden, o.layers, o.bptt, o.batch, r.parameters, r.step_s,
      static_cast<double>(o.bptt * o.batch) / r.step_s, r.decoder_s, r.decoder_flops / r.decoder_s * 1e-9, r.gemm_s,
      r.decoder_flops / r.gemm_s * 1e-9, r.gemm_s / r.decoder_s, r.softmax_s, r.step_flops, r.step_gemm_s,
      to_string(heap_policy_in_effect()));
  for (const auto& peak : r.peaks) std::printf(", \"fma_peak_%s_gflops\": %.6g", peak.isa, peak.gflops);
  std::printf("}\n");
}

void print_text(const Options& o, const Results& r) {
  const double flops = r.decoder_flops;
  std::printf("LSTM LM %lld-%lldx%lld, bptt %lld, batch %lld (%s, one rank, heap policy %s)\n", o.vocab, o.hidden,
              o.layers, o.bptt, o.batch, ExecutionSpace::name(), to_string(heap_policy_in_effect()));
  std::printf("  training step      %8.2f ms   %10.0f tokens/s\n", 1e3 * r.step_s,
              static_cast<double>(o.bptt * o.batch) / r.step_s);
  std::printf("  decoder (3 GEMMs + bias)  %8.2f ms   %7.1f GFLOP/s\n", 1e3 * r.decoder_s, flops / r.decoder_s * 1e-9);
  std::printf("  plain GEMMs, same shapes  %8.2f ms   %7.1f GFLOP/s   decoder at %.0f%% of it\n", 1e3 * r.gemm_s,
              flops / r.gemm_s * 1e-9, 100.0 * r.gemm_s / r.decoder_s);
  std::printf("  softmax cross-entropy     %8.2f ms\n", 1e3 * r.softmax_s);
  std::printf("  the step's GEMMs alone  %8.2f ms   %7.1f GFLOP/s   (%.2f GFLOP; the rest of the step %.2f ms)\n",
              1e3 * r.step_gemm_s, r.step_flops / r.step_gemm_s * 1e-9, r.step_flops * 1e-9,
              1e3 * (r.step_s - r.step_gemm_s));
  if (r.peaks.empty()) return;
  // Widest first: the peak that a BLAS built for this CPU's widest vectors can approach.
  std::printf("  FMA peak, fp32 ");
  for (std::size_t i = 0; i < r.peaks.size(); ++i)
    std::printf("%s%s %.1f GFLOP/s", i == 0 ? " " : ", ", r.peaks[i].isa, r.peaks[i].gflops);
  const double peak = r.peaks[0].gflops;
  std::printf(
      "\n  the step's GEMMs at the %s peak  %.2f ms (alone they ran at %.0f%% of it, the decoder's plain GEMMs "
      "at %.0f%%)\n",
      r.peaks[0].isa, 1e3 * r.step_flops * 1e-9 / peak, 100.0 * r.step_flops / r.step_gemm_s * 1e-9 / peak,
      100.0 * flops / r.gemm_s * 1e-9 / peak);
}

int run(int argc, char** argv, const Communicator& comm) {
  Options o;
  if (const int rc = parse_options(argc, argv, comm, o); rc >= 0) return rc;
  const ExecutionSpace exec;
  Results r;
  measure_step(exec, comm, o, r);
  measure_decoder(exec, o, r);
  measure_step_gemms(exec, o, r);
  r.peaks = apps::measure_fma_peaks(static_cast<int>(o.repeats));
  if (comm.rank() != 0) return 0;
  if (o.json)
    print_json(o, r);
  else
    print_text(o, r);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return a2sgd::apps::app_main(argc, argv, "a2sgd-bench-lstm", run);
}
