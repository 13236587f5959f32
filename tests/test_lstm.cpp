#include "GradientRecorder.hpp"
#include "RoundingBounds.hpp"

#include <a2sgd/compress/GradientBuckets.hpp>
#include <a2sgd/core/Random.hpp>
#include <a2sgd/nn/Dropout.hpp>
#include <a2sgd/nn/LstmLanguageModel.hpp>

#include <cmath>

using namespace a2sgd;
using namespace a2sgd::testing;

namespace {

// fl(tanh(a)) in float32: tanh is 1-Lipschitz, so the operand's error propagates at most as is,
// plus 2 ulps for the implementation (4 u32 relative; the library's detail::tanh is within 1 ulp,
// tests/test_nn.cpp).
Rounded tanh32(Rounded a) {
  const double y = std::tanh(a.v);
  return {y, a.e + 4 * u32 * (std::abs(y) + a.e) + 4 * u64 * std::abs(y)};
}
// 1 / (1 + exp(-x)) as float operations with a 2-ulp exp: a bound that also holds for the library's
// detail::sigmoid, which evaluates the same expression in double and rounds once.
Rounded sigmoid32(Rounded a) {
  return exact(1.0) / (exact(1.0) + exp32(Rounded{-a.v, a.e}));
}

using Grid = std::vector<std::vector<Rounded>>;  // [rows][cols]

Grid grid(std::size_t rows, std::size_t cols) {
  return Grid(rows, std::vector<Rounded>(cols));
}

// A double reference of LstmLanguageModel that performs the library's float operations in the
// library's order (GEMM entries as dot products in any order), carrying their rounding bound.
struct LmReference {
  std::vector<Rounded> grads;
  double loss = 0.0;       // mean loss, exact arithmetic
  double loss_err = 0.0;   // bound on |library's mean loss - loss|
  std::vector<Grid> h, c;  // final state per layer [columns][H]
};

struct LmProblem {
  nn::LstmConfig config;
  const ParameterStore* store;
  std::vector<std::vector<int>> tokens;      // [T + 1][C]
  std::vector<Grid> h0, c0;                  // initial state per layer
  const nn::StepContext* context = nullptr;  // dropout masks when set
};

LmReference lm_reference(const LmProblem& pb, const std::vector<double>& params, bool grads) {
  const nn::LstmConfig& cf = pb.config;
  const ParameterStore& st = *pb.store;
  const std::size_t T = pb.tokens.size() - 1, C = pb.tokens[0].size(), N = T * C;
  const std::size_t H = cf.hidden, E = cf.embedding, V = cf.vocab, L = cf.layers;
  auto p = [&](const std::string& name, std::size_t row, std::size_t col) {
    const TensorInfo& t = st.info(name);
    const std::size_t cols = t.shape.size() > 1 ? t.shape[1] : 1;
    return exact(params[t.offset + row * cols + col]);
  };
  const bool drop = pb.context != nullptr && cf.dropout > 0.0f;
  const Rounded scale = exact(double(1.0f / (1.0f - cf.dropout)));
  auto mask = [&](Grid& g, unsigned site) {
    if (!drop) return;
    const std::uint64_t key = nn::dropout_key(*pb.context, site);
    for (std::size_t r = 0; r < g.size(); ++r)
      for (std::size_t k = 0; k < g[r].size(); ++k)
        g[r][k] = nn::dropout_keep(key, r * g[r].size() + k, cf.dropout) ? g[r][k] * scale : exact(0.0);
  };
  auto tok = [&](std::size_t t, std::size_t b) { return static_cast<std::size_t>(pb.tokens[t][b]); };
  const std::string dec = cf.tie_weights ? "embedding.weight" : "decoder.weight";

  // Forward.
  std::vector<Grid> ins(L + 1), gates(L), hs(L), cs(L);  // hs/cs: [(T + 1) C][H], block 0 initial
  ins[0] = grid(N, E);
  for (std::size_t r = 0; r < N; ++r)
    for (std::size_t e = 0; e < E; ++e) ins[0][r][e] = p("embedding.weight", tok(r / C, r % C), e);
  mask(ins[0], 0);
  LmReference ref;
  for (std::size_t l = 0; l < L; ++l) {
    const std::string name = "lstm" + std::to_string(l);
    const std::size_t in_w = l == 0 ? E : H;
    gates[l] = grid(N, 4 * H);
    hs[l] = grid(N + C, H), cs[l] = grid(N + C, H);
    for (std::size_t b = 0; b < C; ++b) hs[l][b] = pb.h0[l][b], cs[l][b] = pb.c0[l][b];
    for (std::size_t t = 0; t < T; ++t)
      for (std::size_t b = 0; b < C; ++b) {
        const std::size_t r = t * C + b;
        std::vector<Rounded> act(4 * H);
        for (std::size_t k = 0; k < 4 * H; ++k) {
          const Rounded x_part = dot([&](std::size_t i) { return ins[l][r][i]; },
                                     [&](std::size_t i) { return p(name + ".weight_ih", k, i); }, in_w);
          // beta = 1 GEMM: the recurrent products and the stored input part as one H + 1 term sum.
          const Rounded pre =
              dot([&](std::size_t j) { return j < H ? hs[l][r][j] : x_part; },
                  [&](std::size_t j) { return j < H ? p(name + ".weight_hh", k, j) : exact(1.0); }, H + 1) +
              p(name + ".bias", k, 0);
          act[k] = k / H == 2 ? tanh32(pre) : sigmoid32(pre);
        }
        for (std::size_t j = 0; j < H; ++j) {
          const Rounded i = act[j], f = act[H + j], g = act[2 * H + j], o = act[3 * H + j];
          const Rounded cell = f * cs[l][r][j] + i * g;
          cs[l][r + C][j] = cell;
          hs[l][r + C][j] = o * tanh32(cell);
        }
        gates[l][r] = act;
      }
    ins[l + 1] = Grid(hs[l].begin() + static_cast<std::ptrdiff_t>(C), hs[l].end());
    mask(ins[l + 1], static_cast<unsigned>(l + 1));
    ref.h.push_back(Grid(hs[l].begin() + static_cast<std::ptrdiff_t>(N), hs[l].end()));
    ref.c.push_back(Grid(cs[l].begin() + static_cast<std::ptrdiff_t>(N), cs[l].end()));
  }
  // Decoder and softmax cross-entropy (as test_nn's MLP reference).
  const Grid& top = ins[L];
  Grid dz = grid(N, V);
  const Rounded inv_n = rounded(1.0 / double(N), 0.0);
  for (std::size_t r = 0; r < N; ++r) {
    std::vector<Rounded> z(V);
    for (std::size_t v = 0; v < V; ++v)
      z[v] = dot([&](std::size_t j) { return top[r][j]; }, [&](std::size_t j) { return p(dec, v, j); }, H) +
             p("decoder.bias", v, 0);
    std::size_t arg = 0;
    for (std::size_t v = 1; v < V; ++v)
      if (z[v].v > z[arg].v) arg = v;
    std::vector<Rounded> ex;
    for (std::size_t v = 0; v < V; ++v) ex.push_back(exp32(z[v] - z[arg]));
    Rounded sum{0.0, 0.0};
    for (const auto& e : ex) sum.v += e.v, sum.e += e.e + gamma64(double(V)) * e.v;
    const Rounded inv = rounded(1.0 / sum.v, sum.e / (sum.v * (sum.v - sum.e)));
    const std::size_t target = tok(r / C + 1, r % C);
    const Rounded shifted = z[target] - z[arg];
    ref.loss += (std::log(sum.v) - shifted.v) / double(N);
    ref.loss_err +=
        (sum.e / (sum.v - sum.e) + shifted.e + gamma64(4) * (std::abs(std::log(sum.v)) + std::abs(shifted.v))) /
        double(N);
    for (std::size_t v = 0; v < V; ++v) dz[r][v] = (ex[v] * inv - exact(v == target ? 1.0 : 0.0)) * inv_n;
  }
  if (!grads) return ref;

  // Backward.
  ref.grads.assign(params.size(), Rounded{});
  auto g = [&](const std::string& name, std::size_t row, std::size_t col) -> Rounded& {
    const TensorInfo& t = st.info(name);
    const std::size_t cols = t.shape.size() > 1 ? t.shape[1] : 1;
    return ref.grads[t.offset + row * cols + col];
  };
  for (std::size_t v = 0; v < V; ++v) {
    for (std::size_t j = 0; j < H; ++j)
      g(dec, v, j) = dot([&](std::size_t r) { return dz[r][v]; }, [&](std::size_t r) { return top[r][j]; }, N);
    g("decoder.bias", v, 0) = double_sum_to_float([&](std::size_t r) { return dz[r][v]; }, N);
  }
  Grid dy = grid(N, H);
  for (std::size_t r = 0; r < N; ++r)
    for (std::size_t j = 0; j < H; ++j)
      dy[r][j] = dot([&](std::size_t v) { return dz[r][v]; }, [&](std::size_t v) { return p(dec, v, j); }, V);
  mask(dy, static_cast<unsigned>(L));
  for (std::size_t l = L; l-- > 0;) {
    const std::string name = "lstm" + std::to_string(l);
    const std::size_t in_w = l == 0 ? E : H;
    Grid dg = grid(N, 4 * H), dh_next = grid(C, H), dc = grid(C, H);
    for (std::size_t t = T; t-- > 0;) {
      for (std::size_t b = 0; b < C; ++b)
        for (std::size_t j = 0; j < H; ++j) {
          const std::size_t r = t * C + b;
          const Rounded i = gates[l][r][j], f = gates[l][r][H + j], gg = gates[l][r][2 * H + j],
                        o = gates[l][r][3 * H + j], one = exact(1.0);
          const Rounded d_h = dy[r][j] + dh_next[b][j];
          const Rounded tc = tanh32(cs[l][r + C][j]);
          const Rounded d_o = d_h * tc;
          const Rounded d_c = d_h * o * (one - tc * tc) + dc[b][j];
          const Rounded d_i = d_c * gg, d_g = d_c * i, d_f = d_c * cs[l][r][j];
          dc[b][j] = d_c * f;
          dg[r][j] = d_i * i * (one - i);
          dg[r][H + j] = d_f * f * (one - f);
          dg[r][2 * H + j] = d_g * (one - gg * gg);
          dg[r][3 * H + j] = d_o * o * (one - o);
        }
      if (t > 0)
        for (std::size_t b = 0; b < C; ++b)
          for (std::size_t j = 0; j < H; ++j)
            dh_next[b][j] = dot([&](std::size_t k) { return dg[t * C + b][k]; },
                                [&](std::size_t k) { return p(name + ".weight_hh", k, j); }, 4 * H);
    }
    for (std::size_t k = 0; k < 4 * H; ++k) {
      for (std::size_t i = 0; i < in_w; ++i)
        g(name + ".weight_ih", k, i) =
            dot([&](std::size_t r) { return dg[r][k]; }, [&](std::size_t r) { return ins[l][r][i]; }, N);
      for (std::size_t j = 0; j < H; ++j)
        g(name + ".weight_hh", k, j) =
            dot([&](std::size_t r) { return dg[r][k]; }, [&](std::size_t r) { return hs[l][r][j]; }, N);
      g(name + ".bias", k, 0) = double_sum_to_float([&](std::size_t r) { return dg[r][k]; }, N);
    }
    Grid dx = grid(N, in_w);
    for (std::size_t r = 0; r < N; ++r)
      for (std::size_t i = 0; i < in_w; ++i)
        dx[r][i] = dot([&](std::size_t k) { return dg[r][k]; },
                       [&](std::size_t k) { return p(name + ".weight_ih", k, i); }, 4 * H);
    mask(dx, static_cast<unsigned>(l));
    dy = dx;
  }
  // Embedding rows in row order, added to the decoder's gradient when tied.
  for (std::size_t r = 0; r < N; ++r)
    for (std::size_t e = 0; e < E; ++e) {
      Rounded& target = g("embedding.weight", tok(r / C, r % C), e);
      target = target + dy[r][e];
    }
  return ref;
}

// Tokens [T + 1, C] on the device, indexed (t, c).
Kokkos::View<std::int32_t**, Kokkos::LayoutLeft, MemorySpace> device_tokens(const std::vector<std::vector<int>>& t) {
  Kokkos::View<std::int32_t**, Kokkos::LayoutLeft, MemorySpace> v("tokens", t.size(), t[0].size());
  auto h = Kokkos::create_mirror_view(v);
  for (std::size_t i = 0; i < t.size(); ++i)
    for (std::size_t j = 0; j < t[0].size(); ++j) h(i, j) = t[i][j];
  Kokkos::deep_copy(v, h);
  return v;
}

// The library's carried state as reference grids; each value exact (it is what the library holds).
void state_from(const nn::LstmLanguageModel& model, std::vector<Grid>& h, std::vector<Grid>& c, std::size_t columns) {
  const auto s = to_host(model.state()[0].view);
  const std::size_t H = model.config().hidden;
  h.assign(model.config().layers, grid(columns, H));
  c = h;
  for (std::size_t l = 0; l < h.size(); ++l)
    for (std::size_t b = 0; b < columns; ++b)
      for (std::size_t j = 0; j < H; ++j) {
        h[l][b][j] = exact(s[((2 * l) * columns + b) * H + j]);
        c[l][b][j] = exact(s[((2 * l + 1) * columns + b) * H + j]);
      }
}

void check_lm_gradients(const nn::LstmConfig& config) {
  const ExecutionSpace exec;
  ParameterStore store;
  nn::LstmLanguageModel model(config, store);
  store.allocate();
  const std::size_t T = 3, C = 2;
  model.reserve({static_cast<Index>(C), static_cast<Index>(T)}, {static_cast<Index>(C), static_cast<Index>(T)});
  model.initialize(store.params(), 11);
  // Larger weights than the initialisation's, so that every gate and the recurrence matter.
  {
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), store.params());
    Rng rng(5);
    for (Index i = 0; i < store.size(); ++i) h(i) = static_cast<float>(0.6 * (2 * rng.uniform() - 1));
    Kokkos::deep_copy(store.params(), h);
  }
  const std::vector<std::vector<std::vector<int>>> batches = {{{0, 3}, {4, 1}, {2, 6}, {5, 0}},
                                                              {{5, 0}, {1, 1}, {6, 2}, {3, 4}}};
  LmProblem pb{config, &store, {}, {}, {}, nullptr};
  pb.h0.assign(config.layers, grid(C, config.hidden));
  pb.c0 = pb.h0;
  const auto params_f = to_host(store.params());
  const std::vector<double> params(params_f.begin(), params_f.end());
  for (std::size_t step = 0; step < batches.size(); ++step) {
    INFO("batch " << step);
    GradientRecorder recorder(store.grads());
    nn::StepContext context{7, step, 1};
    context.gradient = &recorder;
    const auto tokens = device_tokens(batches[step]);
    nn::Batch batch;
    batch.tokens = tokens;
    const nn::LossResult r = model.forward_backward(exec, store.params(), store.grads(), batch, context);
    CHECK(r.count == static_cast<std::int64_t>(T * C));
    // 0. The backward pass reports its gradient order, each group once it is final (no value of a
    // reported group changes after its report), and the groups cover the gradient (plan_buckets).
    CHECK(recorder.ranges == model.gradient_order());
    CHECK(recorder.changed_after_report(to_host(store.grads())) == 0);
    CHECK_NOTHROW(plan_buckets(recorder.ranges, store.size(), BucketOptions{}));
    pb.tokens = batches[step];
    pb.context = &context;
    const LmReference ref = lm_reference(pb, params, true);
    // 1. The library's float gradient, loss and carried state within the reference's bounds.
    const auto got = to_host(store.grads());
    int bad = 0;
    for (Index i = 0; i < store.size(); ++i)
      if (!within(got[i], ref.grads[i])) {
        ++bad;
        UNSCOPED_INFO("parameter " << i << ": library " << got[i] << ", reference " << ref.grads[i].v << " +- "
                                   << ref.grads[i].e);
      }
    CHECK(bad == 0);
    CHECK_THAT(r.loss_sum / double(T * C), WithinAbs(ref.loss, ref.loss_err + gamma64(T * C) * ref.loss));
    const auto state = to_host(model.state()[0].view);
    int bad_state = 0;
    for (std::size_t l = 0; l < std::size_t(config.layers); ++l)
      for (std::size_t b = 0; b < C; ++b)
        for (std::size_t j = 0; j < std::size_t(config.hidden); ++j) {
          bad_state += !within(state[((2 * l) * C + b) * config.hidden + j], ref.h[l][b][j]);
          bad_state += !within(state[((2 * l + 1) * C + b) * config.hidden + j], ref.c[l][b][j]);
        }
    CHECK(bad_state == 0);

    // 2. The reference's gradient against central differences of its own double loss.
    // The initial state is held fixed: truncated BPTT differentiates the batch's loss only.
    CHECK(finite_difference_mismatches(ref.grads, ref.loss, 1e-4, [&](std::size_t i, double delta) {
            auto moved = params;
            moved[i] += delta;
            return lm_reference(pb, moved, false).loss;
          }) == 0);
    // The next batch starts from the state this one left (the library's float values).
    state_from(model, pb.h0, pb.c0, C);
  }
}

}  // namespace

TEST_CASE("LSTM language model gradients through carried state: reference bounds and finite differences",
          "[nn][lstm]") {
  nn::LstmConfig config;
  config.vocab = 7;
  config.embedding = 4;
  config.hidden = 3;
  config.layers = 2;
  SECTION("untied, no dropout") {
    check_lm_gradients(config);
  }
  SECTION("tied weights and dropout") {
    config.embedding = config.hidden;
    config.tie_weights = true;
    config.dropout = 0.3f;
    check_lm_gradients(config);
  }
}
