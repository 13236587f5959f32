#include <a2sgd/compress/Exchange.hpp>

#include <algorithm>
#include <stdexcept>

namespace a2sgd {
namespace {

std::uint64_t fnv1a(const std::string& text) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

void check_extent(const FloatView& v, Index n, const char* what) {
  if (static_cast<Index>(v.extent(0)) != n)
    throw InvalidArgument(std::string("exchange: ") + what + " buffer has " + std::to_string(v.extent(0)) +
                          " values, the exchange was built for n = " + std::to_string(n));
}

// A free function: nvcc rejects extended lambdas inside protected member functions.
void scale_in_place(const ExecutionSpace& exec, const FloatView& d, float factor) {
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::compress::scale"),
      Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>(exec, 0, static_cast<Index>(d.extent(0))),
      KOKKOS_LAMBDA(Index i) { d(i) *= factor; });
}

// The outer optimizer's step (ModelAveraging.hpp) in one pass, with x the replicas' sum on entry:
// xbar = x / p (as scale() computes it); delta = theta - xbar; v <- mu v + delta;
// theta <- theta - lr_o (nesterov ? delta + mu v : v); x <- theta. A free function: nvcc rejects
// extended lambdas inside private member functions.
void outer_step(const ExecutionSpace& exec, const FloatView& x, const FloatView& theta, const FloatView& v,
                float inverse_p, float lr, float mu, bool nesterov) {
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::compress::outer_step"),
      Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<Index>>(exec, 0, static_cast<Index>(x.extent(0))),
      KOKKOS_LAMBDA(Index i) {
        const float delta = theta(i) - x(i) * inverse_p;
        const float vi = mu * v(i) + delta;
        v(i) = vi;
        const float t = theta(i) - lr * (nesterov ? delta + mu * vi : vi);
        theta(i) = t;
        x(i) = t;
      });
}

std::string averaging_signature(const AveragingOptions& a) {
  std::string s;
  for (const auto& [key, value] : a.entries()) s += ";" + key + "=" + value;
  return s;
}

}  // namespace

Exchange::Exchange(const Communicator& comm, Index n, const ExecutionSpace& exec, const CommonExchangeOptions& common,
                   const std::string& signature, const std::string& problem)
    : m_comm(&comm), m_size(n), m_exec(exec), m_common(common), m_non_finite("a2sgd::compress::non_finite") {
  // One collective for every local verdict, the same on every method: ranks that build different
  // methods still meet in the same collectives, and all fail together.
  std::string why = problem;
  if (why.empty() && n < 0) why = "exchange: negative parameter count " + std::to_string(n);
  if (why.empty()) {
    try {
      common.averaging.validate();
      common.buckets.validate();
    } catch (const InvalidArgument& e) {
      why = e.what();
    }
  }
  comm.raise_if_any(!why.empty(), why);
  comm.require_same(static_cast<std::uint64_t>(n), "the number of parameters n");
  // The bucket sizes are the collectives' sizes: ranks must agree on them as on the method.
  const std::string full = signature + averaging_signature(common.averaging) + ";" + common.buckets.signature();
  comm.require_same(fnv1a(full), "the exchange method and its options (this rank: " + full + ")");
  if (common.averaging.has_outer_state()) {
    // Two model-sized buffers: theta, the model of the last synchronisation, and the momentum.
    m_anchor = FloatView("a2sgd::compress::outer_anchor", static_cast<std::size_t>(n));
    m_velocity = FloatView("a2sgd::compress::outer_velocity", static_cast<std::size_t>(n));
  }
  m_buckets = {GradientRange{0, n}};
  m_reported.assign(1, 0);
  m_requests.resize(1);
}

void Exchange::plan_buckets(const std::vector<GradientRange>& order) {
  if (m_armed) throw InvalidArgument("exchange: buckets planned between begin_step() and step()");
  for (Request& r : m_requests) r.wait();
  // MPI must read the buckets where they are: staged copies would serialise them again.
  const bool can = bucketed() && (host_accessible_memory || m_common.gpu_aware_mpi);
  m_buckets = can ? a2sgd::plan_buckets(order, m_size, m_common.buckets) : std::vector<GradientRange>{{0, m_size}};
  m_reported.assign(m_buckets.size(), 0);
  m_requests.clear();
  m_requests.resize(m_buckets.size());
  m_next_bucket = 0;
  buckets_planned();
}

GradientListener* Exchange::begin_step(const FloatView& grad, Optimizer& opt) {
  check_extent(grad, m_size, "gradient");
  if (opt.size() != m_size)
    throw InvalidArgument("exchange: optimizer was built for " + std::to_string(opt.size()) +
                          " parameters, the exchange for n = " + std::to_string(m_size));
  for (Request& r : m_requests) r.wait();  // a step that an exception abandoned
  m_pending = StepStats();
  std::fill(m_reported.begin(), m_reported.end(), Index(0));
  m_next_bucket = 0;
  m_armed = m_buckets.size() > 1 && m_common.buckets.overlap;
  m_armed_grad = m_armed ? grad : FloatView();
  m_step_optimizer = m_armed ? &opt : nullptr;
  return m_armed ? this : nullptr;
}

Optimizer& Exchange::step_optimizer() const {
  if (m_step_optimizer == nullptr) throw std::logic_error(name() + ": start_bucket() outside a step");
  return *m_step_optimizer;
}

void Exchange::gradient_ready(const ExecutionSpace& exec, GradientRange range) {
  if (!m_armed) return;
  std::size_t b = 0;
  while (b < m_buckets.size() && !(range.begin >= m_buckets[b].begin && range.end <= m_buckets[b].end)) ++b;
  if (range.begin >= range.end || b == m_buckets.size())
    throw InvalidArgument("exchange: gradient range [" + std::to_string(range.begin) + ", " +
                          std::to_string(range.end) + ") is empty or in no bucket of the planned order");
  m_reported[b] += range.size();
  if (m_reported[b] > m_buckets[b].size())
    throw InvalidArgument("exchange: bucket [" + std::to_string(m_buckets[b].begin) + ", " +
                          std::to_string(m_buckets[b].end) + ") reported more than once in a step");
  bool fenced = false;
  while (m_next_bucket + 1 < m_buckets.size() && m_reported[m_next_bucket] == m_buckets[m_next_bucket].size()) {
    if (!fenced) exec.fence();  // MPI reads what the reported kernels wrote
    fenced = true;
    start_next_bucket(m_armed_grad, m_pending);
    ++m_pending.overlapped;
  }
  // Open MPI's non-blocking collectives advance only inside MPI calls: each report is one.
  for (Request& r : m_requests)
    if (r.active()) r.test();
}

void Exchange::start_next_bucket(const FloatView& grad, StepStats& stats) {
  m_requests[m_next_bucket] = start_bucket(grad, m_next_bucket, m_buckets[m_next_bucket], stats);
  ++m_next_bucket;
}

Request Exchange::start_bucket(const FloatView&, std::size_t, GradientRange, StepStats&) {
  throw std::logic_error(name() + ": start_bucket() of a method that does not bucket");
}

void Exchange::finish_buckets(const FloatView& grad, StepStats& stats) {
  if (m_next_bucket < m_buckets.size()) m_exec.fence();  // the gradient's kernels are done
  while (m_next_bucket < m_buckets.size()) start_next_bucket(grad, stats);
  for (Request& r : m_requests) r.wait();
}

std::vector<std::pair<std::string, std::string>> Exchange::options() const {
  auto o = own_options();
  for (auto& entry : m_common.averaging.entries()) o.push_back(std::move(entry));
  return o;
}

std::vector<NamedView> Exchange::state() const {
  auto s = own_state();
  if (m_common.averaging.has_outer_state()) {
    // Identical on every rank: an elastic restart gives each new rank the old ranks' mean.
    s.push_back({"outer_anchor", m_anchor, StateMerge::mean});
    s.push_back({"outer_velocity", m_velocity, StateMerge::mean});
  }
  return s;
}

std::vector<PlannedCollective> Exchange::step_traffic() const {
  auto t = own_traffic();
  const AveragingOptions& a = m_common.averaging;
  if (a.every > 0) {
    PlannedCollective average{CollectiveKind::allreduce, 4u * static_cast<std::uint64_t>(m_size)};
    average.every = a.every;
    t.push_back(average);
    // The first moment's average: the same all-reduce again.
    if (a.state_at_average == StateAtAverage::average) t.push_back(average);
  }
  return t;
}

void Exchange::step(const FloatView& params, const FloatView& grad, Optimizer& opt, double lr) {
  check_extent(params, m_size, "parameter");
  check_extent(grad, m_size, "gradient");
  if (opt.size() != m_size)
    throw InvalidArgument("exchange: optimizer was built for " + std::to_string(opt.size()) +
                          " parameters, the exchange for n = " + std::to_string(m_size));
  if (m_armed && grad.data() != m_armed_grad.data())
    throw InvalidArgument("exchange: step() got another gradient buffer than begin_step()");
  if (m_armed && &opt != m_step_optimizer)
    throw InvalidArgument("exchange: step() got another optimizer than begin_step()");
  m_step_optimizer = &opt;
  // The caller's kernels on this instance may still run: finish them outside our clocks.
  m_exec.fence();
  // An armed step's early collectives have accounted into m_pending already.
  if (!m_armed) {
    m_pending = StepStats();
    m_next_bucket = 0;
  }
  m_armed = false;
  m_armed_grad = FloatView();
  StepStats& stats = m_pending;
  const AveragingOptions& a = m_common.averaging;
  // The outer optimizer starts from the model at which the replicas begin to differ. A resumed
  // run past that step has it from the checkpoint.
  if (a.has_outer_state() && steps() == synchronous_steps()) {
    Kokkos::deep_copy(m_exec, m_anchor, params);
    Kokkos::deep_copy(m_exec, m_velocity, 0.0f);
  }
  do_step(StepKey(), params, grad, opt, lr, stats);
  m_step_optimizer = nullptr;
  if (a.every > 0 && (steps() + 1) % a.every == 0) synchronise(params, opt, stats);
  m_stats.last_step = stats;
  m_stats.total += stats;
  ++m_stats.steps;
}

void Exchange::average_replicas(const FloatView& params, const FloatView& out) {
  check_extent(params, m_size, "parameter");
  check_extent(out, m_size, "output");
  m_exec.fence();
  StepStats stats;
  if (out.data() != params.data()) Kokkos::deep_copy(m_exec, out, params);
  allreduce_sum(out, stats);
  scale(out, 1.0f / static_cast<float>(m_comm->size()));
  m_exec.fence();
  m_stats.averaging += stats;
}

void Exchange::synchronise(const FloatView& params, Optimizer& opt, StepStats& stats) {
  const AveragingOptions& a = m_common.averaging;
  const float inverse_p = static_cast<float>(1.0 / static_cast<double>(m_comm->size()));
  allreduce_sum(params, stats);
  // Averages inside a dense warm-up change nothing (the replicas are equal) and come before the
  // anchor exists: they stay plain. The outer step divides by p in its own pass.
  if (a.has_outer_state() && steps() + 1 > synchronous_steps()) {
    Stopwatch clock;
    outer_step(m_exec, params, m_anchor, m_velocity, inverse_p, static_cast<float>(a.outer_lr),
               static_cast<float>(a.outer_momentum), a.outer == OuterOptimizer::nesterov);
    m_exec.fence();
    stats.optimizer_s += clock.seconds();
  } else {
    scale(params, inverse_p);
  }
  if (a.state_at_average != StateAtAverage::keep) {
    // The first moment is the optimizer's first state tensor (momentum buffer, Adam's m).
    const std::vector<NamedView> state = opt.state();
    if (state.empty())
      throw InvalidArgument(name() + ": state at average " + to_string(a.state_at_average) +
                            " needs an optimizer with a first moment (momentum or Adam)");
    const FloatView& first = state.front().view;
    if (a.state_at_average == StateAtAverage::average) {
      allreduce_sum(first, stats);
      scale(first, inverse_p);
    } else {
      Kokkos::deep_copy(m_exec, first, 0.0f);
    }
  }
  m_exec.fence();
}

void Exchange::allreduce_sum(const FloatView& data, StepStats& stats) {
  const auto count = static_cast<std::size_t>(data.extent(0));
  if (host_accessible_memory || m_common.gpu_aware_mpi) {
    m_exec.fence();
    m_comm->allreduce(data.data(), count, MPI_SUM, &stats);
    return;
  }
  const double comm_before = stats.comm_s;
  Stopwatch clock;
  const auto host = staging<float>(m_host_send, count);
  Kokkos::deep_copy(m_exec, host, data);
  m_exec.fence();
  m_comm->allreduce(host.data(), count, MPI_SUM, &stats);
  Kokkos::deep_copy(m_exec, data, host);
  stats.comm_s = comm_before + clock.seconds();  // the copies are part of communicating
}

void Exchange::apply_dense(const FloatView& params, const ConstFloatView& grad, Optimizer& opt, double lr, float factor,
                           StepStats& stats) {
  Stopwatch clock;
  const std::int64_t non_finite = opt.apply(m_exec, params, grad, lr, factor);
  stats.optimizer_s += clock.seconds();
  // Every rank applied the same all-reduced gradient, so every rank reaches the same verdict.
  if (non_finite > 0)
    throw NonFiniteError(name() + " step " + std::to_string(steps()) + ": the averaged gradient has " +
                             std::to_string(non_finite) +
                             " non-finite (NaN/Inf) values; the parameters are no longer finite",
                         -1);
}

void Exchange::scale(const FloatView& data, float factor) const {
  scale_in_place(m_exec, data, factor);
}

}  // namespace a2sgd
