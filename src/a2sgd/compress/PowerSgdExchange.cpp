#include <a2sgd/compress/ExchangeRegistry.hpp>
#include <a2sgd/compress/PowerSgdExchange.hpp>
#include <a2sgd/compress/impl/ErrorFeedback.hpp>
#include <a2sgd/compress/impl/LowRank.hpp>
#include <a2sgd/compress/impl/Orthonormalise.hpp>
#include <a2sgd/core/Math.hpp>
#include <a2sgd/core/Random.hpp>

#include <a2sgd/core/impl/Gemm.hpp>

#include <algorithm>

namespace a2sgd {
namespace {

// n of a layout that covers [0, n) in order without gaps (what ParameterStore produces).
Index layout_size(const std::vector<TensorInfo>& layout) {
  if (layout.empty()) throw InvalidArgument("powersgd: needs the model's tensor layout (ExchangeConfig::layout)");
  Index n = 0;
  for (const auto& t : layout) {
    Index size = 1;
    for (Index d : t.shape) size *= d;
    if (t.shape.empty() || size != t.size || t.offset != n || size < 1)
      throw InvalidArgument("powersgd: tensor \"" + t.name + "\" does not continue the flat layout at offset " +
                            std::to_string(n));
    n += size;
  }
  return n;
}

// Device backends only (host backends run impl/LowRank.hpp).
[[maybe_unused]] MatrixView matrix(const FloatView& flat, Index offset, Index rows, Index cols) {
  return MatrixView(flat.data() + offset, static_cast<std::size_t>(rows), static_cast<std::size_t>(cols));
}

}  // namespace

std::string PowerSgdExchange::signature(const std::vector<TensorInfo>& layout, const PowerSgdOptions& options) {
  std::string s = "powersgd;rank=" + std::to_string(options.rank) + ";seed=" + std::to_string(options.seed) + ";";
  for (const auto& t : layout) {
    s += t.name + "[";
    for (std::size_t d = 0; d < t.shape.size(); ++d) s += (d ? "," : "") + std::to_string(t.shape[d]);
    s += "]";
  }
  return s;
}

PowerSgdExchange::PowerSgdExchange(const Communicator& comm, const std::vector<TensorInfo>& layout,
                                   const PowerSgdOptions& options, const CommonExchangeOptions& common,
                                   const ExecutionSpace& exec)
    : Exchange(comm, layout_size(layout), exec, common, signature(layout, options)),
      m_options(options),
      m_residual("a2sgd::compress::residual", static_cast<std::size_t>(size())),
      m_update("a2sgd::compress::powersgd_update", static_cast<std::size_t>(size())) {
  if (options.rank < 1) throw InvalidArgument("powersgd: rank " + std::to_string(options.rank) + " is not >= 1");
  const Index r = options.rank;
  Index p_len = 0, q_len = 0;
  for (const auto& t : layout) {
    const Index rows = t.shape[0], cols = t.size / rows;
    if (t.shape.size() >= 2 && r * (rows + cols) < rows * cols) {
      m_blocks.push_back({t.offset, rows, cols, p_len, q_len});
      p_len += rows * r;
      q_len += cols * r;
    }
  }
  // A rank that compresses none of the model's matrices would be a dense all-reduce in disguise.
  Index max_rank = 0;
  for (const auto& t : layout)
    if (t.shape.size() >= 2 && t.shape[0] > 0) {
      const Index rows = t.shape[0], cols = t.size / rows;
      max_rank = std::max(max_rank, (rows * cols - 1) / (rows + cols));  // largest r with r (rows + cols) < rows cols
    }
  if (m_blocks.empty() && max_rank > 0)
    throw InvalidArgument("powersgd: rank " + std::to_string(r) +
                          " compresses none of the model's weight matrices (a rows x cols matrix is compressed when "
                          "rank (rows + cols) < rows cols); the valid range for this model is [1, " +
                          std::to_string(max_rank) + "]");
  for (const auto& t : layout) {
    const Index rows = t.shape[0], cols = t.size / rows;
    if (!(t.shape.size() >= 2 && r * (rows + cols) < rows * cols)) {
      m_dense.push_back({t.offset, t.size, p_len});
      p_len += t.size;
    }
  }
  m_p = FloatView("a2sgd::compress::powersgd_p", static_cast<std::size_t>(p_len));
  m_p_columns.r = static_cast<int>(r);
  m_p_columns.offset = Kokkos::View<Index*, MemorySpace>("a2sgd::compress::powersgd_p_offset", m_blocks.size());
  m_p_columns.rows = Kokkos::View<Index*, MemorySpace>("a2sgd::compress::powersgd_p_rows", m_blocks.size());
  auto host_offset = Kokkos::create_mirror_view(m_p_columns.offset);
  auto host_rows = Kokkos::create_mirror_view(m_p_columns.rows);
  for (std::size_t b = 0; b < m_blocks.size(); ++b) {
    host_offset(b) = m_blocks[b].p_offset;
    host_rows(b) = m_blocks[b].rows;
  }
  Kokkos::deep_copy(m_p_columns.offset, host_offset);
  Kokkos::deep_copy(m_p_columns.rows, host_rows);
  m_q = FloatView("a2sgd::compress::powersgd_q", static_cast<std::size_t>(q_len));
  if (host_backend) m_qt = FloatView("a2sgd::compress::powersgd_qt", static_cast<std::size_t>(q_len));
  // The same standard-normal start on every rank, one stream per matrix.
  auto host_q = Kokkos::create_mirror_view(m_q);
  for (std::size_t b = 0; b < m_blocks.size(); ++b) {
    Rng rng(derive_seed(options.seed, b));
    const Index begin = m_blocks[b].q_offset, end = begin + m_blocks[b].cols * r;
    for (Index i = begin; i < end; ++i) host_q(static_cast<std::size_t>(i)) = static_cast<float>(rng.normal());
  }
  Kokkos::deep_copy(m_q, host_q);
}

std::vector<std::pair<std::string, std::string>> PowerSgdExchange::own_options() const {
  return {{"rank", std::to_string(m_options.rank)},
          {"seed", std::to_string(m_options.seed)},
          {"compressed_tensors", std::to_string(m_blocks.size())},
          {"dense_tensors", std::to_string(m_dense.size())}};
}

std::vector<PlannedCollective> PowerSgdExchange::own_traffic() const {
  std::vector<PlannedCollective> t = {{CollectiveKind::allreduce, 4u * static_cast<std::uint64_t>(p_payload())}};
  if (q_payload() > 0) t.push_back({CollectiveKind::allreduce, 4u * static_cast<std::uint64_t>(q_payload())});
  return t;
}

std::vector<NamedView> PowerSgdExchange::own_state() const {
  std::vector<NamedView> s = {{"residual", m_residual, StateMerge::conserve_sum}};
  if (m_q.extent(0) > 0) s.push_back({"powersgd_q", m_q, StateMerge::mean});
  return s;
}

void PowerSgdExchange::do_step(StepKey, const FloatView& params, const FloatView& grad, Optimizer& opt, double lr,
                               StepStats& stats) {
  Stopwatch clock;
  const Index r = m_options.rank;
  const FloatView e = m_residual, u = m_update, pbuf = m_p;
  const auto bad = non_finite_count();
  compress::impl::fold_into_residual(exec(), grad, e, bad);
  // P = M Q. Host backends: the thin products as memory passes (impl/LowRank.hpp); device
  // backends: the vendor BLAS.
  for (const auto& b : m_blocks) {
    if constexpr (host_backend) {
      compress::impl::transpose_thin(exec(), m_q.data() + b.q_offset, b.cols, static_cast<int>(r),
                                     m_qt.data() + b.q_offset);
      compress::impl::low_rank_project(exec(), e.data() + b.offset, b.rows, b.cols, m_qt.data() + b.q_offset,
                                       static_cast<int>(r), m_p.data() + b.p_offset);
    } else {
      detail::gemm(exec(), "N", "N", 1.0f, matrix(e, b.offset, b.rows, b.cols), matrix(m_q, b.q_offset, b.cols, r),
                   0.0f, matrix(m_p, b.p_offset, b.rows, r));
    }
  }
  for (const auto& d : m_dense) {
    const Index from = d.offset, to = d.p_offset;
    Kokkos::parallel_for(
        A2SGD_LABEL("a2sgd::compress::powersgd_dense_pack"), Policy(exec(), 0, d.size), KOKKOS_LAMBDA(Index i) {
          pbuf(to + i) = e(from + i);
          e(from + i) = 0.0f;
        });
  }
  // A non-finite entry anywhere poisons the payload, so every rank's update is non-finite and
  // every rank stops in apply_dense.
  if (pbuf.extent(0) > 0)
    Kokkos::parallel_for(
        A2SGD_LABEL("a2sgd::compress::powersgd_poison"), Policy(exec(), 0, 1), KOKKOS_LAMBDA(Index) {
          if (bad() > 0) pbuf(0) = a2sgd::detail::quiet_nan();
        });
  exec().fence();
  stats.compress_s += clock.seconds();

  allreduce_sum(m_p, stats);

  clock.restart();
  compress::impl::orthonormalise_columns(exec(), m_p, m_p_columns);
  for (const auto& b : m_blocks) {  // Q = M^T P
    if constexpr (host_backend) {
      compress::impl::low_rank_back_project(exec(), e.data() + b.offset, b.rows, b.cols, m_p.data() + b.p_offset,
                                            static_cast<int>(r), m_qt.data() + b.q_offset);
      compress::impl::untranspose_thin(exec(), m_qt.data() + b.q_offset, b.cols, static_cast<int>(r),
                                       m_q.data() + b.q_offset);
    } else {
      detail::gemm(exec(), "T", "N", 1.0f, matrix(e, b.offset, b.rows, b.cols), matrix(m_p, b.p_offset, b.rows, r),
                   0.0f, matrix(m_q, b.q_offset, b.cols, r));
    }
  }
  exec().fence();
  stats.compress_s += clock.seconds();

  if (q_payload() > 0) allreduce_sum(m_q, stats);

  clock.restart();
  const float inv_p = 1.0f / static_cast<float>(comm().size());
  scale(m_q, inv_p);
  for (const auto& b : m_blocks) {
    if constexpr (host_backend) {  // u = P Q^T
      compress::impl::transpose_thin(exec(), m_q.data() + b.q_offset, b.cols, static_cast<int>(r),
                                     m_qt.data() + b.q_offset);
      compress::impl::low_rank_expand(exec(), m_p.data() + b.p_offset, m_qt.data() + b.q_offset, b.rows, b.cols,
                                      static_cast<int>(r), u.data() + b.offset);
    } else {
      detail::gemm(exec(), "N", "T", 1.0f, matrix(m_p, b.p_offset, b.rows, r), matrix(m_q, b.q_offset, b.cols, r), 0.0f,
                   matrix(u, b.offset, b.rows, b.cols));
    }
    const Index from = b.offset;
    Kokkos::parallel_for(
        A2SGD_LABEL("a2sgd::compress::powersgd_residual"), Policy(exec(), 0, b.rows * b.cols),
        KOKKOS_LAMBDA(Index i) { e(from + i) -= u(from + i); });
  }
  for (const auto& d : m_dense) {
    const Index from = d.p_offset, to = d.offset;
    Kokkos::parallel_for(
        A2SGD_LABEL("a2sgd::compress::powersgd_dense_unpack"), Policy(exec(), 0, d.size),
        KOKKOS_LAMBDA(Index i) { u(to + i) = pbuf(from + i) * inv_p; });
  }
  exec().fence();
  stats.optimizer_s += clock.seconds();
  apply_dense(params, m_update, opt, lr, 1.0f, stats);
}

}  // namespace a2sgd

namespace {
a2sgd::PowerSgdOptions powersgd_options(const a2sgd::OptionValues& o, std::uint64_t seed) {
  a2sgd::PowerSgdOptions ps;
  const std::int64_t rank = o.integer("rank");
  o.require(rank >= 1 && rank <= 1024, "rank", "must be in [1, 1024]");
  ps.rank = static_cast<int>(rank);
  ps.seed = seed;
  return ps;
}
}  // namespace

A2SGD_REGISTER_EXCHANGE(powersgd) {
  using namespace a2sgd;
  ExchangeMethod m;
  m.summary = "error feedback, a rank-r approximation P Q^T of every weight matrix, two all-reduces";
  m.options = {{"rank", "2", "rank r of each weight matrix's approximation, in [1, 1024]"}};
  m.check_options = [](const OptionValues& o) { powersgd_options(o, 0); };
  m.make = [](const ExchangeContext& c, const OptionValues& o) -> std::unique_ptr<Exchange> {
    const PowerSgdOptions ps = powersgd_options(o, c.seed);
    Index covered = 0;
    for (const auto& t : c.layout) covered += t.size;
    if (covered != c.n)
      throw InvalidArgument("powersgd: the tensor layout covers " + std::to_string(covered) +
                            " values, not n = " + std::to_string(c.n));
    return std::make_unique<PowerSgdExchange>(c.comm, c.layout, ps, c.common, c.exec);
  };
  // Fold, M Q and M^T P read M; u = P Q^T written, e -= u (read e, u; write e), optimizer.
  m.kernel_traffic = [](double n, double, int) {
    const double f = traffic::buffer(n);
    return KernelTraffic{{{traffic::fold(n), traffic::read(f), traffic::read(f)}},
                         {{traffic::written(0.0, f), {Access::axpy, 3.0 * f}, traffic::sgd(n)}}};
  };
  return m;
}
