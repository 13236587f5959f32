#include <a2sgd/compress/CastExchange.hpp>
#include <a2sgd/compress/ExchangeRegistry.hpp>
#include <a2sgd/core/HalfFloat.hpp>
#include <a2sgd/core/impl/HostClones.hpp>

#include <algorithm>
#include <climits>
#include <string>
#include <type_traits>

namespace a2sgd {
namespace {

using Wire = Kokkos::View<std::uint16_t*, MemorySpace>;

// The format is a template parameter so that each kernel is one branch-free loop that vectorises.
// Both directions work on 16-bit values held in 32-bit integers (see convert_block).
template <HalfFormat F>
KOKKOS_INLINE_FUNCTION std::uint32_t encode_bits(float v) {
  if constexpr (F == HalfFormat::fp16)
    return to_fp16_bits(v);
  else
    return to_bf16(v);
}

template <HalfFormat F>
KOKKOS_INLINE_FUNCTION float decode_bits(std::uint32_t h) {
  if constexpr (F == HalfFormat::fp16)
    return from_fp16_bits(h);
  else
    return from_bf16(static_cast<std::uint16_t>(h));
}

template <HalfFormat F>
KOKKOS_INLINE_FUNCTION std::uint16_t encode(float v) {
  return static_cast<std::uint16_t>(encode_bits<F>(v));
}

template <HalfFormat F>
KOKKOS_INLINE_FUNCTION float decode(std::uint16_t h) {
  return decode_bits<F>(h);
}

// Host backends convert blocks through plain loops compiled for several ISAs
// (impl/HostClones.hpp): the conversions are selects between integer results, which AVX2 and
// AVX-512 blend 8 and 16 values at a time, while the baseline ISA has no blend instruction.
constexpr Index host_block = 4096;

// Into and out of the 32-bit lanes: floats are encoded on the way in and decoded on the way out;
// 16-bit values are only widened and narrowed.
template <HalfFormat F>
KOKKOS_INLINE_FUNCTION std::uint32_t to_lane(float v) {
  return encode_bits<F>(v);
}

template <HalfFormat F>
KOKKOS_INLINE_FUNCTION std::uint32_t to_lane(std::uint16_t h) {
  return h;
}

template <HalfFormat F, class To>
KOKKOS_INLINE_FUNCTION To from_lane(std::uint32_t bits) {
  if constexpr (std::is_same_v<To, float>)
    return decode_bits<F>(bits);
  else
    return static_cast<std::uint16_t>(bits);
}

// Two passes per chunk, through an L1-resident buffer of 32-bit lanes: in one loop the compiler
// narrows the conversion's selects to 16-bit lanes, which AVX-512F lacks (it then falls back to
// 8 lanes with byte blends, about twice the instructions).
template <HalfFormat F, class From, class To>
A2SGD_HOST_CLONES void convert_block(const From* in, To* out, Index count) {
  constexpr Index chunk = 512;
  std::uint32_t bits[chunk];
  for (Index c = 0; c < count; c += chunk) {
    const Index m = count - c < chunk ? count - c : chunk;
#ifdef A2SGD_OMP_SIMD
#pragma omp simd
#endif
    for (Index i = 0; i < m; ++i) bits[i] = to_lane<F>(in[c + i]);
#ifdef A2SGD_OMP_SIMD
#pragma omp simd
#endif
    for (Index i = 0; i < m; ++i) out[c + i] = from_lane<F, To>(bits[i]);
  }
}

// sum[i] += other[i]: the chunk sum's additions, compiled per ISA like the conversions.
A2SGD_HOST_CLONES void add_block(float* sum, const float* other, Index count) {
#ifdef A2SGD_OMP_SIMD
#pragma omp simd
#endif
  for (Index i = 0; i < count; ++i) sum[i] += other[i];
}

// float -> 16 bits and back, one entry per work item on a device, one block on a host backend.
template <HalfFormat F>
KOKKOS_INLINE_FUNCTION std::uint16_t convert(float v) {
  return encode<F>(v);
}

template <HalfFormat F>
KOKKOS_INLINE_FUNCTION float convert(std::uint16_t h) {
  return decode<F>(h);
}

template <HalfFormat F, class From, class To>
struct Convert {
  Kokkos::View<const From*, MemorySpace> in;
  Kokkos::View<To*, MemorySpace> out;
  KOKKOS_INLINE_FUNCTION void operator()(Index i) const {
    if constexpr (host_backend) {
      const Index n = static_cast<Index>(in.extent(0)), begin = i * host_block;
      convert_block<F>(in.data() + begin, out.data() + begin, begin + host_block < n ? host_block : n - begin);
    } else {
      out(i) = convert<F>(in(i));
    }
  }
};

template <HalfFormat F>
using Encode = Convert<F, float, std::uint16_t>;
template <HalfFormat F>
using Decode = Convert<F, std::uint16_t, float>;

// Work items of an n-entry Encode or Decode.
Index conversion_items(Index n) {
  return host_backend ? (n + host_block - 1) / host_block : n;
}

// This rank's chunk: its own value plus the other ranks' copies in rank order, summed in float,
// rounded once. On a host backend one block per work item, in L1-sized chunks decoded and encoded
// by convert_block, so that every pass vectorises.
template <HalfFormat F>
void sum_chunk_block(std::uint16_t* mine, const std::uint16_t* recv, Index own, int p, int me, Index count) {
  constexpr Index chunk = 512;
  float sum[chunk];
  float other[chunk];
  for (Index c = 0; c < count; c += chunk) {
    const Index m = count - c < chunk ? count - c : chunk;
    convert_block<F>(mine + c, sum, m);
    for (int q = 0; q < p; ++q) {
      if (q == me) continue;
      convert_block<F>(recv + static_cast<Index>(q) * own + c, other, m);
      add_block(sum, other, m);
    }
    convert_block<F>(static_cast<const float*>(sum), mine + c, m);
  }
}

template <HalfFormat F>
struct SumChunk {
  Wire wire;
  Wire recv;
  Index begin;
  Index own;
  int p;
  int me;
  KOKKOS_INLINE_FUNCTION void operator()(Index j) const {
    if constexpr (host_backend) {
      const Index first = j * host_block;
      sum_chunk_block<F>(wire.data() + begin + first, recv.data() + first, own, p, me,
                         first + host_block < own ? host_block : own - first);
    } else {
      float sum = decode<F>(wire(begin + j));
      for (int q = 0; q < p; ++q)
        if (q != me) sum += decode<F>(recv(q * own + j));
      wire(begin + j) = encode<F>(sum);
    }
  }
};

template <template <HalfFormat> class Kernel, class... Args>
void launch(const std::string& label, const ExecutionSpace& exec, HalfFormat format, Index count, Args... args) {
  if (format == HalfFormat::fp16)
    Kokkos::parallel_for(label, Policy(exec, 0, count), Kernel<HalfFormat::fp16>{args...});
  else
    Kokkos::parallel_for(label, Policy(exec, 0, count), Kernel<HalfFormat::bf16>{args...});
}

}  // namespace

CastExchange::Chunks::Chunks(Index n, int p, int me) {
  for (int q = 0; q < p; ++q) {
    const Index begin = n / p * q + std::min<Index>(q, n % p);
    counts.push_back(static_cast<int>(n / p + (q < n % p ? 1 : 0)));
    displs.push_back(static_cast<int>(begin));
  }
  own = counts[static_cast<std::size_t>(me)];
  for (int q = 0; q < p; ++q) {
    counts_out.push_back(q == me ? 0 : counts[static_cast<std::size_t>(q)]);
    recv_counts.push_back(q == me ? 0 : own);
    recv_displs.push_back(q * own);
  }
}

CastExchange::CastExchange(const Communicator& comm, Index n, HalfFormat format, const CommonExchangeOptions& common,
                           const ExecutionSpace& exec)
    : Exchange(comm, n, exec, common, format == HalfFormat::fp16 ? "fp16" : "bf16"),
      m_format(format),
      m_wire(Kokkos::view_alloc(Kokkos::WithoutInitializing, "a2sgd::compress::half_wire"),
             static_cast<std::size_t>(n)),
      m_update("a2sgd::compress::half_update", static_cast<std::size_t>(n)) {
  const int p = comm.size(), me = comm.rank();
  if (n / p + 1 > static_cast<Index>(INT_MAX))
    throw InvalidArgument(name() + ": n / p = " + std::to_string(n / p) + " values per chunk exceed INT_MAX");
  Chunks whole(n, p, me);
  m_counts = std::move(whole.counts);
  m_displs = std::move(whole.displs);
  m_counts_out = std::move(whole.counts_out);
  m_recv_counts = std::move(whole.recv_counts);
  m_recv_displs = std::move(whole.recv_displs);
  const int own = whole.own;
  m_recv = Wire(Kokkos::view_alloc(Kokkos::WithoutInitializing, "a2sgd::compress::half_recv"),
                static_cast<std::size_t>(own) * static_cast<std::size_t>(p));
  if (!host_accessible_memory && !common.gpu_aware_mpi) {
    m_host_wire = Kokkos::create_mirror_view(m_wire);
    m_host_recv = Kokkos::create_mirror_view(m_recv);
  }
}

void CastExchange::buckets_planned() {
  m_parts.clear();
  if (buckets().size() < 2) return;
  const int p = comm().size(), me = comm().rank();
  for (const GradientRange& b : buckets()) {
    Part part;
    part.chunks = Chunks(b.size(), p, me);
    part.recv = Wire(Kokkos::view_alloc(Kokkos::WithoutInitializing, "a2sgd::compress::half_recv"),
                     static_cast<std::size_t>(part.chunks.own) * static_cast<std::size_t>(p));
    m_parts.push_back(std::move(part));
  }
}

Request CastExchange::start_bucket(const FloatView& grad, std::size_t index, GradientRange bucket, StepStats& stats) {
  Stopwatch clock;
  const auto range = std::make_pair(bucket.begin, bucket.end);
  const Wire wire = Kokkos::subview(m_wire, range);
  launch<Encode>(A2SGD_LABEL("a2sgd::compress::half_encode"), exec(), m_format, conversion_items(bucket.size()),
                 ConstFloatView(Kokkos::subview(grad, range)), wire);
  exec().fence();
  stats.compress_s += clock.seconds();
  const Part& part = m_parts[index];
  const Chunks& c = part.chunks;
  return comm().ialltoallv(wire.data(), c.counts_out.data(), c.displs.data(), part.recv.data(), c.recv_counts.data(),
                           c.recv_displs.data(), &stats);
}

void CastExchange::sum_chunk(const Wire& recv, Index begin, int own) {
  // With one rank the chunk is the whole sum already (and a 16-bit value survives the round trip
  // through float exactly): no kernel.
  const int p = comm().size();
  if (p > 1)
    launch<SumChunk>(A2SGD_LABEL("a2sgd::compress::half_sum"), exec(), m_format, conversion_items(own), m_wire, recv,
                     begin, static_cast<Index>(own), p, comm().rank());
}

// Every bucket's all-to-all completed (finish_buckets), then in bucket order its chunk's sum and
// its all-gather, all in flight together; then the whole wire decoded, as the one-bucket step.
void CastExchange::bucketed_step(const FloatView& grad, StepStats& stats) {
  finish_buckets(grad, stats);
  const int me = comm().rank();
  for (std::size_t b = 0; b < m_parts.size(); ++b) {
    Part& part = m_parts[b];
    const Index begin = buckets()[b].begin;
    sum_chunk(part.recv, begin + part.chunks.displs[static_cast<std::size_t>(me)], part.chunks.own);
    exec().fence();
    part.gather = comm().iallgatherv(m_wire.data() + begin, part.chunks.counts.data(), part.chunks.displs.data(), &stats);
  }
  for (Part& part : m_parts) part.gather.wait();
}

void CastExchange::do_step(StepKey, const FloatView& params, const FloatView& grad, Optimizer& opt, double lr,
                           StepStats& stats) {
  if (m_parts.empty())
    whole_step(grad, stats);
  else
    bucketed_step(grad, stats);
  Stopwatch clock;
  launch<Decode>(A2SGD_LABEL("a2sgd::compress::half_decode"), exec(), m_format, conversion_items(size()),
                 Wire(m_wire), m_update);
  exec().fence();
  stats.optimizer_s += clock.seconds();
  apply_dense(params, m_update, opt, lr, 1.0f / static_cast<float>(comm().size()), stats);
}

void CastExchange::whole_step(const FloatView& grad, StepStats& stats) {
  Stopwatch clock;
  const auto wire = m_wire;
  const auto recv = m_recv;
  launch<Encode>(A2SGD_LABEL("a2sgd::compress::half_encode"), exec(), m_format, conversion_items(size()),
                 ConstFloatView(grad), wire);
  exec().fence();
  stats.compress_s += clock.seconds();

  // Reduce-scatter: the other ranks' copies of this rank's chunk, summed on the execution space.
  const double comm_before = stats.comm_s;
  clock.restart();
  const bool staged = m_host_wire.extent(0) > 0;
  if (staged) {
    Kokkos::deep_copy(exec(), m_host_wire, wire);
    exec().fence();
  }
  comm().alltoallv(staged ? m_host_wire.data() : wire.data(), m_counts_out.data(), m_displs.data(),
                   staged ? m_host_recv.data() : recv.data(), m_recv_counts.data(), m_recv_displs.data(), &stats);
  if (staged) Kokkos::deep_copy(exec(), recv, m_host_recv);
  const int me = comm().rank(), own = m_counts[me];
  const Index begin = m_displs[me];
  sum_chunk(recv, begin, own);
  // All-gather of the summed chunks, in place.
  if (staged) {
    const auto chunk = std::make_pair(static_cast<std::size_t>(begin), static_cast<std::size_t>(begin + own));
    Kokkos::deep_copy(exec(), Kokkos::subview(m_host_wire, chunk), Kokkos::subview(wire, chunk));
  }
  exec().fence();
  comm().allgatherv(staged ? m_host_wire.data() : wire.data(), m_counts.data(), m_displs.data(), &stats);
  if (staged) Kokkos::deep_copy(exec(), wire, m_host_wire);
  stats.comm_s = comm_before + clock.seconds();
}

}  // namespace a2sgd

namespace {

// Encode reads g and writes n halves; decode reads them and writes u; optimizer.
a2sgd::ExchangeMethod cast_method(a2sgd::HalfFormat format, const char* summary) {
  using namespace a2sgd;
  ExchangeMethod m;
  m.summary = summary;
  m.make = [format](const ExchangeContext& c, const OptionValues&) -> std::unique_ptr<Exchange> {
    return std::make_unique<CastExchange>(c.comm, c.n, format, c.common, c.exec);
  };
  m.kernel_traffic = [](double n, double, int) {
    const double f = traffic::buffer(n);
    return KernelTraffic{{{traffic::written(f, f / 2.0)}}, {{traffic::written(f / 2.0, f), traffic::sgd(n)}}};
  };
  return m;
}

}  // namespace

A2SGD_REGISTER_EXCHANGE(fp16) {
  return cast_method(a2sgd::HalfFormat::fp16,
                     "the gradient rounded to IEEE half precision, summed in chunks: 2 n bytes");
}

A2SGD_REGISTER_EXCHANGE(bf16) {
  return cast_method(a2sgd::HalfFormat::bf16, "the gradient rounded to bfloat16, summed in chunks: 2 n bytes");
}
