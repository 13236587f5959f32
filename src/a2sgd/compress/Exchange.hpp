#pragma once
/// @file Exchange.hpp
/// The interface every gradient-exchange method implements (dense, A2SGD, Top-K,
/// QSGD, PowerSGD, ...). A method owns its per-rank state, talks to MPI through a Communicator
/// (any number of rounds, fixed or variable payloads) and applies the optimizer itself, so it
/// can fuse decoding with the update.

#include <a2sgd/comm/Communicator.hpp>
#include <a2sgd/comm/NetworkModel.hpp>
#include <a2sgd/comm/Request.hpp>
#include <a2sgd/compress/GradientBuckets.hpp>
#include <a2sgd/compress/ModelAveraging.hpp>
#include <a2sgd/core/Accounting.hpp>
#include <a2sgd/core/GradientListener.hpp>
#include <a2sgd/core/Types.hpp>
#include <a2sgd/optim/Optimizer.hpp>

#include <string>
#include <utility>
#include <vector>

namespace a2sgd {

/// Options common to all methods.
struct CommonExchangeOptions {
  /// Hand device pointers straight to MPI (CUDA/ROCm-aware MPI). When false and the data lives in
  /// memory the host cannot read, dense payloads are staged through a host buffer.
  bool gpu_aware_mpi = false;
  /// Periodic model averaging and the outer optimizer at each average (ModelAveraging.hpp): a
  /// policy of every method, applied by Exchange::step() after the method's own step.
  AveragingOptions averaging;
  /// Gradient buckets and their overlap with the backward pass (plan_buckets(), begin_step()).
  BucketOptions buckets;
};

/// One data-parallel gradient exchange method on a flat buffer of n float32 values.
///
/// The Communicator passed at construction must outlive the exchange. Construction is
/// collective: all ranks must build the same method with the same options and the same n,
/// otherwise every rank throws CollectiveError.
class Exchange : public GradientListener {
 public:
  /// The permission to run a step's body, made by step() alone. nvcc requires the function that
  /// encloses a device lambda to be public, so some methods' do_step() is public; taking a key
  /// that nobody else can make, it still cannot be called around step().
  class StepKey {
    friend class Exchange;
    StepKey() {}  // user-provided, so that StepKey{} is not an aggregate a caller could make
  };

  ~Exchange() override = default;
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  /// Method name as selected by make_exchange(): "dense", "a2sgd", ...
  virtual std::string name() const = 0;
  /// Options that define the method, as (key, value) text, for logs and checkpoint metadata: the
  /// method's own, then the averaging policy's where it differs from the defaults.
  std::vector<std::pair<std::string, std::string>> options() const;
  /// Per-rank state, restored in place on restart: the method's own (e.g. the A2SGD residual),
  /// then the outer optimizer's ("outer_anchor", the model of the last synchronisation, and
  /// "outer_velocity"; both identical on every rank) when one is set.
  std::vector<NamedView> state() const;
  /// The collectives of one regular step (for A2SGD: after warm-up) and the bytes this rank hands
  /// to MPI in each: the method's own (the formulas of docs/methods.md), then the periodic
  /// average's (every = K). stats().last_step.bytes_sent equals their sum on a step without an
  /// average.
  std::vector<PlannedCollective> step_traffic() const;
  /// The averaging policy this exchange applies after its steps.
  const AveragingOptions& averaging() const noexcept { return m_common.averaging; }

  /// One training step (collective): exchanges this rank's gradient `grad` (n values; it may be
  /// used as scratch space and is left unspecified) and applies `opt` with learning rate `lr`
  /// to `params`. Every kernel runs on exec(); the gradient must be complete there (work the
  /// caller queued on other instances must be fenced by the caller). A step allocates nothing
  /// after the first, and the host reads nothing from the device but the collectives' payloads
  /// (when MPI cannot read device memory) and the scalars it must decide on (fenced points that
  /// also stop the step's clocks). Non-finite gradients raise NonFiniteError on every rank: A2SGD detects them
  /// before anything is modified; a dense all-reduce detects them while applying the average,
  /// so the parameters are then non-finite too.
  void step(const FloatView& params, const FloatView& grad, Optimizer& opt, double lr);

  /// Buckets (methods whose exchange is one collective per bucket: dense): splits the gradient into
  /// the buckets of plan_buckets(order, n, common.buckets), `order` being the model's
  /// (Model::gradient_order(); the same on every rank). Without it, or for a method that does not
  /// bucket (or whose MPI cannot read the memory), the gradient is one bucket. More than one bucket
  /// changes how MPI associates the ranks' sums of a value at 3 ranks and more (as DDP's buckets
  /// do); overlap on or off does not change a bit. Call before the first step.
  void plan_buckets(const std::vector<GradientRange>& order);
  /// The buckets in the order their collectives start (one bucket [0, n) unless planned).
  const std::vector<GradientRange>& buckets() const noexcept { return m_buckets; }
  /// Whether the method exchanges planned buckets one collective each (and can overlap them).
  bool exchanges_buckets() const { return bucketed(); }

  /// Arms the coming step's overlap: returns the listener the model reports to during its backward
  /// pass (StepContext::gradient), or nullptr when nothing can overlap (one bucket, or overlap off).
  /// Every bucket but the last starts its collective as soon as the model has reported all of it
  /// (in bucket order, so every rank starts the same collectives in the same order), and each report
  /// makes progress on the collectives in flight; step() starts the rest and completes them. The
  /// last bucket starts in step(): nothing is left to overlap it with, and the caller may still
  /// change it (the Trainer marks a non-finite loss there). `grad` and `opt` must be the buffer and
  /// the optimizer given to step() (a method that compresses the optimizer's local direction, as
  /// A2SGD with momentum or Adam, forms it bucket by bucket).
  GradientListener* begin_step(const FloatView& grad, Optimizer& opt);
  /// GradientListener: `range` (a group of the planned order) is final on `exec`.
  void gradient_ready(const ExecutionSpace& exec, GradientRange range) override;

  /// Collective: out <- mean over ranks of params (out may alias params). One O(n) all-reduce,
  /// accounted in stats().averaging, never in the training traffic.
  void average_replicas(const FloatView& params, const FloatView& out);

  const ExchangeStats& stats() const noexcept { return m_stats; }
  /// Steps completed (drives warm-up and periodic averaging); restored on restart.
  std::uint64_t steps() const noexcept { return m_stats.steps; }
  void set_steps(std::uint64_t steps) noexcept { m_stats.steps = steps; }
  /// Restores the accounting of an interrupted run (checkpoint restart).
  void restore_stats(const ExchangeStats& stats) noexcept { m_stats = stats; }

  Index size() const noexcept { return m_size; }
  const Communicator& comm() const noexcept { return *m_comm; }
  const ExecutionSpace& exec() const noexcept { return m_exec; }

 protected:
  /// `signature` identifies method and options; ranks must agree on it, on the averaging policy
  /// and on n. A non-empty `problem` (a method's own verdict on its options) fails the
  /// construction on every rank with that message.
  Exchange(const Communicator& comm, Index n, const ExecutionSpace& exec, const CommonExchangeOptions& common,
           const std::string& signature, const std::string& problem = "");

  /// The method's step; add costs to `stats` (zeroed by the caller). Only step() can call it: it
  /// alone makes a StepKey, so an override that has to be public stays behind step()'s checks and
  /// accounting.
  virtual void do_step(StepKey, const FloatView& params, const FloatView& grad, Optimizer& opt, double lr,
                       StepStats& stats) = 0;
  /// The method's own parts of options(), state() and step_traffic().
  virtual std::vector<std::pair<std::string, std::string>> own_options() const = 0;
  virtual std::vector<NamedView> own_state() const { return {}; }
  virtual std::vector<PlannedCollective> own_traffic() const = 0;
  /// Steps at the start of a run after which the replicas are still identical (a dense warm-up):
  /// the outer optimizer's anchor is the model after them.
  virtual std::uint64_t synchronous_steps() const { return 0; }

  /// Whether the method exchanges each bucket with one non-blocking collective (start_bucket()).
  virtual bool bucketed() const { return false; }
  /// Called by plan_buckets() once buckets() holds the new plan: a method sets up what it keeps
  /// per bucket (a bucketed method with more than one bucket).
  virtual void buckets_planned() {}
  /// Starts the collective of bucket number `index`, `bucket`, of `grad` (bucketed methods; the
  /// kernels that wrote it are done): encodes it if the method does, and returns the collective.
  virtual Request start_bucket(const FloatView& grad, std::size_t index, GradientRange bucket, StepStats& stats);
  /// For bucketed methods' do_step(): starts the buckets not yet started, in order, and completes
  /// every bucket's collective.
  void finish_buckets(const FloatView& grad, StepStats& stats);
  /// The optimizer of the step in progress (begin_step()'s or step()'s), for start_bucket().
  Optimizer& step_optimizer() const;

  /// In-place sum over ranks of a float buffer, staged through the host when MPI cannot read it.
  void allreduce_sum(const FloatView& data, StepStats& stats);
  /// MPI_Allgather of `send` (the same length on every rank) into `recv` (size() times as long,
  /// rank order), staged through host buffers kept between steps when MPI cannot read the memory
  /// (not host accessible and not common_options().gpu_aware_mpi). Returns after `recv` has been
  /// queued on exec().
  template <class T>
  void allgather(const Kokkos::View<T*, MemorySpace>& send, const Kokkos::View<T*, MemorySpace>& recv,
                 StepStats& stats);
  /// A counter on the device for the non-finite entries a method finds while compressing (the
  /// error-feedback fold writes it; a kernel then poisons the payload, so the host never reads it).
  const Kokkos::View<std::int64_t, MemorySpace>& non_finite_count() const noexcept { return m_non_finite; }
  /// Stand-alone optimizer pass params <- step(scale * grad), billed to optimizer_s; throws
  /// NonFiniteError when the (all-reduced, hence identical on all ranks) gradient is not finite.
  void apply_dense(const FloatView& params, const ConstFloatView& grad, Optimizer& opt, double lr, float scale,
                   StepStats& stats);
  /// data <- data * factor.
  void scale(const FloatView& data, float factor) const;

  const CommonExchangeOptions& common_options() const noexcept { return m_common; }

 private:
  /// The periodic average after a step (stats: that step's).
  void synchronise(const FloatView& params, Optimizer& opt, StepStats& stats);

  const Communicator* m_comm;
  Index m_size;
  ExecutionSpace m_exec;
  CommonExchangeOptions m_common;
  ExchangeStats m_stats;
  Kokkos::View<std::int64_t, MemorySpace> m_non_finite;
  // The outer optimizer's state (empty unless AveragingOptions::has_outer_state()).
  FloatView m_anchor;
  FloatView m_velocity;
  // Buckets: the plan, per bucket the values reported this step and its collective, the next bucket
  // to start; the armed step's gradient and the stats its early collectives account into.
  std::vector<GradientRange> m_buckets;
  std::vector<Index> m_reported;
  std::vector<Request> m_requests;
  std::size_t m_next_bucket = 0;
  bool m_armed = false;
  FloatView m_armed_grad;
  Optimizer* m_step_optimizer = nullptr;  // the armed (or current) step's, for start_bucket()
  StepStats m_pending;
  void start_next_bucket(const FloatView& grad, StepStats& stats);
  // Host copies of collective payloads, grown to the largest seen (the first step allocates them).
  Kokkos::View<char*, Kokkos::HostSpace> m_host_send;
  Kokkos::View<char*, Kokkos::HostSpace> m_host_recv;
  template <class T>
  Kokkos::View<T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> staging(
      Kokkos::View<char*, Kokkos::HostSpace>& buffer, std::size_t count);
};

template <class T>
Kokkos::View<T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> Exchange::staging(
    Kokkos::View<char*, Kokkos::HostSpace>& buffer, std::size_t count) {
  if (buffer.extent(0) < count * sizeof(T))
    buffer = Kokkos::View<char*, Kokkos::HostSpace>(
        Kokkos::view_alloc(Kokkos::WithoutInitializing, "a2sgd::mpi_staging"), count * sizeof(T));
  return Kokkos::View<T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
      reinterpret_cast<T*>(buffer.data()), count);
}

template <class T>
void Exchange::allgather(const Kokkos::View<T*, MemorySpace>& send, const Kokkos::View<T*, MemorySpace>& recv,
                         StepStats& stats) {
  const auto count = static_cast<std::size_t>(send.extent(0));
  if (host_accessible_memory || m_common.gpu_aware_mpi) {
    m_exec.fence();  // the payload's kernels are done
    m_comm->allgather(send.data(), count, recv.data(), &stats);
    return;
  }
  const double comm_before = stats.comm_s;
  Stopwatch clock;
  const auto host_send = staging<T>(m_host_send, count);
  const auto host_recv = staging<T>(m_host_recv, recv.extent(0));
  Kokkos::deep_copy(m_exec, host_send, send);
  m_exec.fence();
  m_comm->allgather(host_send.data(), count, host_recv.data(), &stats);
  Kokkos::deep_copy(m_exec, recv, host_recv);
  stats.comm_s = comm_before + clock.seconds();  // the copies are part of communicating
}

}  // namespace a2sgd
