#include <a2sgd/compress/ExchangeRegistry.hpp>
#include <a2sgd/compress/PowerSgdExchange.hpp>
#include <a2sgd/compress/impl/ErrorFeedback.hpp>
#include <a2sgd/compress/impl/LowRank.hpp>
#include <a2sgd/compress/impl/Orthonormalise.hpp>
#include <a2sgd/core/Math.hpp>
#include <a2sgd/core/Random.hpp>

#include <a2sgd/core/impl/Gemm.hpp>
#include <a2sgd/core/impl/HostClones.hpp>

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
  m_p_columns = columns_of(m_blocks, r);
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
  if (m_parts.empty()) {
    std::vector<PlannedCollective> t = {{CollectiveKind::allreduce, 4u * static_cast<std::uint64_t>(p_payload())}};
    if (q_payload() > 0) t.push_back({CollectiveKind::allreduce, 4u * static_cast<std::uint64_t>(q_payload())});
    return t;
  }
  std::vector<PlannedCollective> t;  // per bucket: its P and dense tensors, then its Q
  for (const Part& part : m_parts) {
    t.push_back({CollectiveKind::allreduce, 4u * static_cast<std::uint64_t>(part.p_len)});
    if (!part.blocks.empty()) t.push_back({CollectiveKind::allreduce, 4u * static_cast<std::uint64_t>(part.q_len)});
  }
  return t;
}

std::vector<NamedView> PowerSgdExchange::own_state() const {
  std::vector<NamedView> s = {{"residual", m_residual, StateMerge::conserve_sum}};
  if (m_q.extent(0) > 0) s.push_back({"powersgd_q", m_q, StateMerge::mean});
  return s;
}

// The P payload's layout: every block's P, then the dense tensors (one bucket); or bucket after
// bucket, each its blocks' P then its dense tensors, so that each bucket's all-reduce is one range.
// Q keeps the layout's order (it is checkpointed state): a bucket's blocks are adjacent there.
void PowerSgdExchange::assign_p_offsets() {
  const Index r = m_options.rank;
  Index cursor = 0;
  const auto place = [&](const std::vector<std::size_t>& blocks, const std::vector<std::size_t>& dense) {
    for (std::size_t i : blocks) {
      m_blocks[i].p_offset = cursor;
      cursor += m_blocks[i].rows * r;
    }
    for (std::size_t i : dense) {
      m_dense[i].p_offset = cursor;
      cursor += m_dense[i].size;
    }
  };
  if (m_parts.empty()) {
    std::vector<std::size_t> blocks(m_blocks.size()), dense(m_dense.size());
    for (std::size_t i = 0; i < blocks.size(); ++i) blocks[i] = i;
    for (std::size_t i = 0; i < dense.size(); ++i) dense[i] = i;
    place(blocks, dense);
  } else {
    for (Part& part : m_parts) {
      part.p_begin = cursor;
      place(part.blocks, part.dense);
      part.p_len = cursor - part.p_begin;
    }
  }
  m_p_columns = columns_of(m_blocks, r);
  for (Part& part : m_parts) {
    std::vector<Block> blocks;
    for (std::size_t i : part.blocks) blocks.push_back(m_blocks[i]);
    part.columns = columns_of(blocks, r);
  }
}

compress::impl::ColumnBlocks PowerSgdExchange::columns_of(const std::vector<Block>& blocks, Index r) {
  compress::impl::ColumnBlocks c;
  c.r = static_cast<int>(r);
  c.offset = Kokkos::View<Index*, MemorySpace>("a2sgd::compress::powersgd_p_offset", blocks.size());
  c.rows = Kokkos::View<Index*, MemorySpace>("a2sgd::compress::powersgd_p_rows", blocks.size());
  auto host_offset = Kokkos::create_mirror_view(c.offset);
  auto host_rows = Kokkos::create_mirror_view(c.rows);
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    host_offset(b) = blocks[b].p_offset;
    host_rows(b) = blocks[b].rows;
  }
  Kokkos::deep_copy(c.offset, host_offset);
  Kokkos::deep_copy(c.rows, host_rows);
  return c;
}

void PowerSgdExchange::buckets_planned() {
  m_parts.clear();
  if (buckets().size() > 1) {
    const Index r = m_options.rank;
    for (const GradientRange& bucket : buckets()) {
      Part part;
      part.q_begin = -1;
      for (std::size_t i = 0; i < m_blocks.size(); ++i)
        if (m_blocks[i].offset >= bucket.begin && m_blocks[i].offset < bucket.end) {
          part.blocks.push_back(i);
          if (part.q_begin < 0) part.q_begin = m_blocks[i].q_offset;
          part.q_len += m_blocks[i].cols * r;
        }
      for (std::size_t i = 0; i < m_dense.size(); ++i)
        if (m_dense[i].offset >= bucket.begin && m_dense[i].offset < bucket.end) part.dense.push_back(i);
      m_parts.push_back(std::move(part));
    }
  }
  assign_p_offsets();
}

// The first all-reduce of a bucket: its values folded into the residual, its blocks' P = M Q and
// its dense tensors packed, then the all-reduce of its range of P.
Request PowerSgdExchange::start_bucket(const FloatView& grad, std::size_t index, GradientRange bucket,
                                       StepStats& stats) {
  Stopwatch clock;
  const Part& part = m_parts[index];
  const auto range = std::make_pair(bucket.begin, bucket.end);
  compress::impl::fold_into_residual(exec(), Kokkos::subview(grad, range), Kokkos::subview(m_residual, range),
                                     non_finite_count());
  for (std::size_t i : part.blocks) project(m_blocks[i]);
  for (std::size_t i : part.dense) pack_dense(m_dense[i]);
  poison(part.p_begin);
  exec().fence();
  stats.compress_s += clock.seconds();
  return comm().iallreduce(m_p.data() + part.p_begin, static_cast<std::size_t>(part.p_len), MPI_SUM, &stats);
}

// Every bucket's P all-reduced (finish_buckets); then in bucket order its P orthonormalised, its
// Q = M^T P and the all-reduce of its range of Q, all in flight together.
void PowerSgdExchange::bucketed_exchange(const FloatView& grad, StepStats& stats) {
  finish_buckets(grad, stats);
  for (Part& part : m_parts) {
    if (part.blocks.empty()) continue;
    Stopwatch clock;
    compress::impl::orthonormalise_columns(exec(), m_p, part.columns);
    for (std::size_t i : part.blocks) back_project(m_blocks[i]);
    exec().fence();
    stats.compress_s += clock.seconds();
    part.q_request =
        comm().iallreduce(m_q.data() + part.q_begin, static_cast<std::size_t>(part.q_len), MPI_SUM, &stats);
  }
  for (Part& part : m_parts) part.q_request.wait();
}

// P = M Q of one block. Host backends: the thin products as memory passes (impl/LowRank.hpp);
// device backends: the vendor BLAS.
void PowerSgdExchange::project(const Block& b) {
  const Index r = m_options.rank;
  if constexpr (host_backend) {
    compress::impl::transpose_thin(exec(), m_q.data() + b.q_offset, b.cols, static_cast<int>(r),
                                   m_qt.data() + b.q_offset);
    compress::impl::low_rank_project(exec(), m_residual.data() + b.offset, b.rows, b.cols, m_qt.data() + b.q_offset,
                                     static_cast<int>(r), m_p.data() + b.p_offset);
  } else {
    detail::gemm(exec(), "N", "N", 1.0f, matrix(m_residual, b.offset, b.rows, b.cols),
                 matrix(m_q, b.q_offset, b.cols, r), 0.0f, matrix(m_p, b.p_offset, b.rows, r));
  }
}

// Q = M^T P of one block.
void PowerSgdExchange::back_project(const Block& b) {
  const Index r = m_options.rank;
  if constexpr (host_backend) {
    compress::impl::low_rank_back_project(exec(), m_residual.data() + b.offset, b.rows, b.cols, m_p.data() + b.p_offset,
                                          static_cast<int>(r), m_qt.data() + b.q_offset);
    compress::impl::untranspose_thin(exec(), m_qt.data() + b.q_offset, b.cols, static_cast<int>(r),
                                     m_q.data() + b.q_offset);
  } else {
    detail::gemm(exec(), "T", "N", 1.0f, matrix(m_residual, b.offset, b.rows, b.cols),
                 matrix(m_p, b.p_offset, b.rows, r), 0.0f, matrix(m_q, b.q_offset, b.cols, r));
  }
}

void PowerSgdExchange::pack_dense(const DenseSlice& d) {
  const FloatView e = m_residual, pbuf = m_p;
  const Index from = d.offset, to = d.p_offset;
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::compress::powersgd_dense_pack"), Policy(exec(), 0, d.size), KOKKOS_LAMBDA(Index i) {
        pbuf(to + i) = e(from + i);
        e(from + i) = 0.0f;
      });
}

// A non-finite entry of the folded values poisons the payload at `at`, so that every rank's update
// is non-finite and every rank stops in apply_dense.
void PowerSgdExchange::poison(Index at) {
  const FloatView pbuf = m_p;
  const auto bad = non_finite_count();
  Kokkos::parallel_for(
      A2SGD_LABEL("a2sgd::compress::powersgd_poison"), Policy(exec(), 0, 1), KOKKOS_LAMBDA(Index) {
        if (bad() > 0) pbuf(at) = a2sgd::detail::quiet_nan();
      });
}

void PowerSgdExchange::do_step(StepKey, const FloatView& params, const FloatView& grad, Optimizer& opt, double lr,
                               StepStats& stats) {
  if (!m_parts.empty()) {
    bucketed_exchange(grad, stats);
  } else {
    Stopwatch clock;
    compress::impl::fold_into_residual(exec(), grad, m_residual, non_finite_count());
    for (const auto& b : m_blocks) project(b);
    for (const auto& d : m_dense) pack_dense(d);
    if (m_p.extent(0) > 0) poison(0);
    exec().fence();
    stats.compress_s += clock.seconds();

    allreduce_sum(m_p, stats);

    clock.restart();
    compress::impl::orthonormalise_columns(exec(), m_p, m_p_columns);
    for (const auto& b : m_blocks) back_project(b);
    exec().fence();
    stats.compress_s += clock.seconds();

    if (q_payload() > 0) allreduce_sum(m_q, stats);
  }
  apply_update(params, opt, lr, stats);
}

// u = P Q^T of every block with Q <- Q / p, e -= u; the dense tensors' mean; the optimizer on u.
void PowerSgdExchange::apply_update(const FloatView& params, Optimizer& opt, double lr, StepStats& stats) {
  Stopwatch clock;
  const Index r = m_options.rank;
  const FloatView e = m_residual, u = m_update, pbuf = m_p;
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
    // What the update carries leaves the residual (a SIMD loop with prefetch on the host).
    impl::simd_parallel_for(
        A2SGD_LABEL("a2sgd::compress::powersgd_residual"), exec(), b.offset, b.offset + b.rows * b.cols,
        KOKKOS_LAMBDA(Index i) { e(i) -= u(i); }, std::array<const float*, 2>{e.data(), u.data()});
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
