#include <a2sgd/comm/ViewCollectives.hpp>
#include <a2sgd/train/UpdateMonitor.hpp>

#include <cmath>

namespace a2sgd::train {
namespace {

// Sums over [begin, end) of one tensor: 0 ||dx||^2, 1 ||g_mean||^2, 2 entries with g == 0,
// 3 of those that moved, 4 ||dx||^2 over them.
void tensor_sums(const ExecutionSpace& exec, const ConstFloatView& before, const ConstFloatView& after,
                 const ConstFloatView& grad, const ConstFloatView& mean, Index begin, Index end, double* out) {
  double dx2 = 0, g2 = 0, zeros = 0, moved = 0, zero_dx2 = 0;
  Kokkos::parallel_reduce(
      A2SGD_LABEL("a2sgd::train::update_monitor"), Policy(exec, begin, end),
      KOKKOS_LAMBDA(Index i, double& a, double& b, double& c, double& d, double& e) {
        const double dx = static_cast<double>(before(i)) - after(i);
        const double m = mean(i);
        const bool zero = grad(i) == 0.0f;
        a += dx * dx;
        b += m * m;
        c += zero ? 1.0 : 0.0;
        d += zero && dx != 0.0 ? 1.0 : 0.0;
        e += zero ? dx * dx : 0.0;
      },
      dx2, g2, zeros, moved, zero_dx2);
  out[0] = dx2, out[1] = g2, out[2] = zeros, out[3] = moved, out[4] = zero_dx2;
}

std::pair<double, double> tensor_distance(const ExecutionSpace& exec, const ConstFloatView& a, const ConstFloatView& b,
                                          Index begin, Index end) {
  double dist = 0.0, norm = 0.0;
  Kokkos::parallel_reduce(
      A2SGD_LABEL("a2sgd::train::tensor_divergence"), Policy(exec, begin, end),
      KOKKOS_LAMBDA(Index i, double& d, double& n) {
        const double diff = static_cast<double>(a(i)) - b(i);
        d += diff * diff;
        n += static_cast<double>(b(i)) * b(i);
      },
      dist, norm);
  return {dist, norm};
}

}  // namespace

UpdateMonitor::UpdateMonitor(const Communicator& comm, std::vector<TensorInfo> tensors, Index n,
                             const ExecutionSpace& exec)
    : m_comm(comm),
      m_tensors(std::move(tensors)),
      m_exec(exec),
      m_before("a2sgd::train::monitor_before", static_cast<std::size_t>(n)),
      m_grad("a2sgd::train::monitor_grad", static_cast<std::size_t>(n)),
      m_mean("a2sgd::train::monitor_mean", static_cast<std::size_t>(n)) {}

void UpdateMonitor::before_step(const FloatView& params, const FloatView& grads) {
  Kokkos::deep_copy(m_exec, m_before, params);
  Kokkos::deep_copy(m_exec, m_grad, grads);
  Kokkos::deep_copy(m_exec, m_mean, grads);
  m_exec.fence();
  allreduce_view(m_comm, m_mean);  // sum over ranks; divided by p below
}

std::vector<TensorUpdateStats> UpdateMonitor::after_step(const FloatView& params, double lr) {
  const std::size_t t = m_tensors.size();
  std::vector<double> sums(5 * t);
  for (std::size_t k = 0; k < t; ++k)
    tensor_sums(m_exec, m_before, params, m_grad, m_mean, m_tensors[k].offset, m_tensors[k].offset + m_tensors[k].size,
                &sums[5 * k]);
  m_exec.fence();
  // The mean gradient is the same on every rank: take its norm from one rank's sum.
  std::vector<double> mean_norm(t);
  for (std::size_t k = 0; k < t; ++k) mean_norm[k] = sums[5 * k + 1];
  m_comm.allreduce(sums.data(), sums.size(), MPI_SUM);
  const double p = m_comm.size();
  std::vector<TensorUpdateStats> out(t);
  for (std::size_t k = 0; k < t; ++k) {
    const double* s = &sums[5 * k];
    TensorUpdateStats& r = out[k];
    r.update_norm = std::sqrt(s[0] / p) / lr;
    r.mean_grad_norm = std::sqrt(mean_norm[k]) / p;
    r.zero_fraction = s[2] / (p * static_cast<double>(m_tensors[k].size));
    r.zero_moved = s[2] > 0 ? s[3] / s[2] : 0.0;
    r.zero_update_share = s[0] > 0 ? std::sqrt(s[4] / s[0]) : 0.0;
  }
  return out;
}

std::vector<double> UpdateMonitor::divergence(const FloatView& params, const FloatView& averaged) const {
  std::vector<double> ratio(m_tensors.size());
  for (std::size_t k = 0; k < m_tensors.size(); ++k) {
    const auto [dist, norm] =
        tensor_distance(m_exec, params, averaged, m_tensors[k].offset, m_tensors[k].offset + m_tensors[k].size);
    ratio[k] = norm > 0 ? std::sqrt(dist / norm) : 0.0;
  }
  m_comm.allreduce(ratio.data(), ratio.size(), MPI_MAX);
  return ratio;
}

Record UpdateMonitor::record(std::uint64_t step, const std::vector<TensorUpdateStats>& stats) const {
  Record rec;
  rec.add("event", "diagnostics").add("step", step);
  for (std::size_t k = 0; k < m_tensors.size(); ++k) {
    const std::string& name = m_tensors[k].name;
    const TensorUpdateStats& s = stats[k];
    rec.add(name + ".update_norm", s.update_norm)
        .add(name + ".mean_grad_norm", s.mean_grad_norm)
        .add(name + ".update_ratio", s.mean_grad_norm > 0 ? s.update_norm / s.mean_grad_norm : 0.0)
        .add(name + ".zero_fraction", s.zero_fraction)
        .add(name + ".zero_moved", s.zero_moved)
        .add(name + ".zero_update_share", s.zero_update_share);
  }
  return rec;
}

void UpdateMonitor::add_divergence(Record& rec, const std::vector<double>& divergence) const {
  for (std::size_t k = 0; k < m_tensors.size(); ++k) rec.add("replica_divergence." + m_tensors[k].name, divergence[k]);
}

}  // namespace a2sgd::train
