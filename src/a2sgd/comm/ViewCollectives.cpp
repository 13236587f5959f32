#include <a2sgd/comm/ViewCollectives.hpp>

namespace a2sgd {
namespace {

template <class Call>
void staged(const FloatView& view, Call&& call) {
  Kokkos::fence();
  if constexpr (host_accessible_memory) {
    call(view.data());
  } else {
    auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), view);
    call(host.data());
    Kokkos::deep_copy(view, host);
  }
}

}  // namespace

void broadcast_view(const Communicator& comm, const FloatView& view, int root, StepStats* stats) {
  staged(view, [&](float* data) { comm.broadcast(data, view.extent(0), root, stats); });
}

void allreduce_view(const Communicator& comm, const FloatView& view, StepStats* stats) {
  staged(view, [&](float* data) { comm.allreduce(data, view.extent(0), MPI_SUM, stats); });
}

}  // namespace a2sgd
