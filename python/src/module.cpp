// a2sgd._a2sgd: the library's exchange kernels on memory that Python owns (a torch tensor's), for
// the a2sgd.torch communication hooks. Only the library's public headers; no torch headers: the
// Python side hands over data pointers, after checking dtype, device and contiguity, so the
// kernels run on the tensor's memory without a copy.
#include <a2sgd/compress/A2sgdCodec.hpp>
#include <a2sgd/core/BuildInfo.hpp>
#include <a2sgd/core/Error.hpp>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace py = pybind11;
using namespace a2sgd;

namespace {

using Unmanaged = Kokkos::View<float*, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

FloatView view_of(std::uintptr_t address, Index n) {
  if (n < 0) throw InvalidArgument("a negative length");
  if (n > 0 && address == 0) throw InvalidArgument("a null data pointer");
  return Unmanaged(reinterpret_cast<float*>(address), static_cast<std::size_t>(n));
}

A2sgdCodecOptions codec_options(const std::string& averaging, const std::string& residual, bool error_feedback,
                                const std::string& zero_gradient) {
  return {parse_global_averaging(averaging), parse_residual_reference(residual), error_feedback,
          parse_zero_gradient(zero_gradient)};
}

// Kokkos lives as long as the interpreter: initialised on import unless the host program did, and
// finalised at exit (after every view the module made is gone: they are unmanaged).
bool g_initialised_here = false;

}  // namespace

PYBIND11_MODULE(_a2sgd, m) {
  m.doc() = "a2sgd's exchange kernels on caller-owned float32 memory (used by a2sgd.torch)";
  if (!Kokkos::is_initialized()) {
    Kokkos::initialize();
    g_initialised_here = true;
  }
  py::module_::import("atexit").attr("register")(py::cpp_function([] {
    if (g_initialised_here && Kokkos::is_initialized()) Kokkos::finalize();
  }));
  py::register_exception<InvalidArgument>(m, "InvalidArgument", PyExc_ValueError);

  m.def(
      "memory_space", [] { return std::string(MemorySpace::name()); },
      "the name of the Kokkos memory space the kernels read");
  m.def(
      "host_memory", [] { return host_accessible_memory; },
      "whether the kernels read host memory (a CPU build) rather than a device's (CUDA, HIP)");
  m.def(
      "payload_width",
      [](const std::string& averaging) { return a2sgd_payload_width(parse_global_averaging(averaging)); },
      py::arg("averaging"), "doubles per segment in the payload: 2 (mean) or 4 (weighted)");
  m.def("segment_bounds", &a2sgd_segment_bounds, py::arg("n"), py::arg("sizes"),
        "[0, n] for the whole buffer, or the running sums of the tensor sizes (which must add up to n)");

  m.def(
      "encode",
      [](std::uintptr_t grad, std::uintptr_t residual, Index n, const std::vector<Index>& bounds,
         const std::string& averaging, const std::string& residual_ref, bool error_feedback,
         const std::string& zero_gradient) {
        const A2sgdCodecOptions o = codec_options(averaging, residual_ref, error_feedback, zero_gradient);
        if (bounds.size() < 2 || bounds.front() != 0 || bounds.back() != n)
          throw InvalidArgument("segment bounds must run from 0 to n = " + std::to_string(n));
        const std::size_t segments = bounds.size() - 1;
        std::vector<TwoMeansResult> local(segments);
        std::vector<double> payload(static_cast<std::size_t>(a2sgd_payload_width(o.averaging)) * segments);
        std::int64_t non_finite = 0;
        {
          py::gil_scoped_release unlocked;
          const FloatView g = view_of(grad, n);
          const FloatView e = error_feedback ? view_of(residual, n) : FloatView();
          non_finite = a2sgd_encode(ExecutionSpace(), o, g, e, bounds, local.data(), payload.data());
        }
        std::vector<std::pair<double, double>> means(segments);
        for (std::size_t s = 0; s < segments; ++s) means[s] = {local[s].mean_pos(), local[s].mean_neg()};
        return std::make_tuple(payload, means, non_finite);
      },
      py::arg("grad"), py::arg("residual"), py::arg("n"), py::arg("bounds"), py::arg("averaging") = "mean",
      py::arg("residual_reference") = "local", py::arg("error_feedback") = true, py::arg("zero_gradient") = "move",
      "A2SGD's encode pass over a = g + e per segment: (payload to SUM-all-reduce, local means, non-finite count)");

  m.def(
      "global_means",
      [](const std::vector<double>& reduced, const std::string& averaging, int world_size) {
        const GlobalAveraging a = parse_global_averaging(averaging);
        const std::size_t width = static_cast<std::size_t>(a2sgd_payload_width(a));
        if (world_size < 1) throw InvalidArgument("world size " + std::to_string(world_size));
        if (reduced.empty() || reduced.size() % width != 0)
          throw InvalidArgument("a payload of " + std::to_string(reduced.size()) + " values for width " +
                                std::to_string(width));
        std::vector<std::pair<double, double>> means(reduced.size() / width);
        for (std::size_t s = 0; s < means.size(); ++s)
          means[s] = a2sgd_global_means(a, &reduced[width * s], world_size);
        return means;
      },
      py::arg("reduced"), py::arg("averaging"), py::arg("world_size"),
      "the global averages (M_pos, M_neg) of every segment from the payload summed over the ranks");

  m.def(
      "decode_in_place",
      [](std::uintptr_t grad, std::uintptr_t residual, Index n, const std::vector<Index>& bounds,
         const std::vector<std::pair<double, double>>& local_means,
         const std::vector<std::pair<double, double>>& global_means, const std::string& averaging,
         const std::string& residual_ref, bool error_feedback, const std::string& zero_gradient) {
        const A2sgdCodecOptions o = codec_options(averaging, residual_ref, error_feedback, zero_gradient);
        if (bounds.size() < 2 || bounds.front() != 0 || bounds.back() != n)
          throw InvalidArgument("segment bounds must run from 0 to n = " + std::to_string(n));
        if (local_means.size() != bounds.size() - 1 || global_means.size() != bounds.size() - 1)
          throw InvalidArgument("one (pos, neg) pair of local and of global means per segment");
        py::gil_scoped_release unlocked;
        const FloatView g = view_of(grad, n);
        const FloatView e = error_feedback ? view_of(residual, n) : FloatView();
        a2sgd_decode_in_place(ExecutionSpace(), o, g, e, bounds, local_means.data(), global_means.data());
        ExecutionSpace().fence();
      },
      py::arg("grad"), py::arg("residual"), py::arg("n"), py::arg("bounds"), py::arg("local_means"),
      py::arg("global_means"), py::arg("averaging") = "mean", py::arg("residual_reference") = "local",
      py::arg("error_feedback") = true, py::arg("zero_gradient") = "move",
      "A2SGD's decode pass: the update replaces g, the residual e = a - c, per segment");
}
