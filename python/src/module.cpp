// a2sgd._a2sgd: the library's exchange kernels on memory that Python owns (a torch tensor's), for
// the a2sgd.torch communication hooks. Only the library's public headers; no torch headers: the
// Python side hands over data pointers, after checking dtype, device and contiguity, so the
// kernels run on the tensor's memory without a copy.
#include <a2sgd/compress/A2sgdCodec.hpp>
#include <a2sgd/compress/EfSignCodec.hpp>
#include <a2sgd/compress/QsgdCodec.hpp>
#include <a2sgd/compress/TopkCodec.hpp>
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

template <class T>
Kokkos::View<T*, MemorySpace> words_of(std::uintptr_t address, Index n, const char* what) {
  if (n < 0) throw InvalidArgument(std::string("a negative length of ") + what);
  if (n > 0 && address == 0) throw InvalidArgument(std::string("a null data pointer for ") + what);
  return Kokkos::View<T*, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(reinterpret_cast<T*>(address),
                                                                                static_cast<std::size_t>(n));
}

// Kokkos lives as long as the interpreter: initialised on import unless the host program did, and
// finalised at exit, or, where codec objects (which own Kokkos views) outlive the atexit handlers
// (a hook state kept in a global), when the last of them goes, so that no view is freed after
// Kokkos::finalize.
bool g_initialised_here = false;
bool g_finalize_pending = false;
int g_live_codecs = 0;

void finalize_if_done() {
  if (g_initialised_here && g_finalize_pending && g_live_codecs == 0 && Kokkos::is_initialized()) Kokkos::finalize();
}

// The first member of every bound object that owns views: destroyed last, after them.
struct LiveCodec {
  LiveCodec() { ++g_live_codecs; }
  LiveCodec(const LiveCodec&) { ++g_live_codecs; }
  LiveCodec& operator=(const LiveCodec&) = default;
  ~LiveCodec() {
    --g_live_codecs;
    finalize_if_done();
  }
};

// The baselines' codecs with the device counter of non-finite entries their folds keep: reset
// before, read after each encode (the count decides the hook's error message, not the result).
struct Counter {
  Kokkos::View<std::int64_t, MemorySpace> count{"a2sgd::python::non_finite"};
  void reset() const { Kokkos::deep_copy(ExecutionSpace(), count, std::int64_t(0)); }
  std::int64_t read() const {
    std::int64_t n = 0;
    Kokkos::deep_copy(n, count);  // fences
    return n;
  }
};

// Each binds a codec with its payload's word type and size and one encode and decode signature, so
// that one template binds them all.
struct PyTopk {
  using Word = std::uint64_t;
  LiveCodec live;
  TopkCodec codec;
  Counter bad;
  Index words() const { return codec.k(); }
  void encode(const ExecutionSpace& exec, const FloatView& g, const FloatView& e,
              const Kokkos::View<Word*, MemorySpace>& payload) {
    codec.encode(exec, g, e, bad.count, payload);
  }
  void decode(const ExecutionSpace& exec, const Kokkos::View<Word*, MemorySpace>& all, const FloatView& u,
              int ranks) const {
    Kokkos::deep_copy(exec, u, 0.0f);
    TopkCodec::decode_add(exec, all, u, 1.0f / static_cast<float>(ranks));
  }
};

struct PyQsgd {
  using Word = std::uint32_t;
  LiveCodec live;
  QsgdCodec codec;
  Index words() const { return codec.payload_words(); }
  void decode(const ExecutionSpace& exec, const Kokkos::View<Word*, MemorySpace>& all, const FloatView& u,
              int ranks) const {
    codec.decode(exec, all, u, ranks);
  }
};

struct PyEfSign {
  using Word = std::uint32_t;
  LiveCodec live;
  EfSignCodec codec;
  Counter bad;
  Index words() const { return codec.payload_words(); }
  void encode(const ExecutionSpace& exec, const FloatView& g, const FloatView& e,
              const Kokkos::View<Word*, MemorySpace>& payload) {
    codec.encode(exec, g, e, bad.count, payload);
  }
  void decode(const ExecutionSpace& exec, const Kokkos::View<Word*, MemorySpace>& all, const FloatView& u,
              int ranks) const {
    codec.decode(exec, all, u, ranks);
  }
};

// e <- a = g + e, the payload from a, what it carries out of e; returns a's non-finite entries.
template <class Py>
std::int64_t encode_with_residual(Py& c, std::uintptr_t grad, std::uintptr_t residual, std::uintptr_t payload) {
  py::gil_scoped_release unlocked;
  const ExecutionSpace exec;
  c.bad.reset();
  c.encode(exec, view_of(grad, c.codec.size()), view_of(residual, c.codec.size()),
           words_of<typename Py::Word>(payload, c.words(), "the payload"));
  return c.bad.read();
}

// out <- the update from every rank's payload, `ranks` of them one after the other in `gathered`.
template <class Py>
void decode_gathered(const Py& c, std::uintptr_t gathered, int ranks, std::uintptr_t out) {
  if (ranks < 1) throw InvalidArgument("ranks " + std::to_string(ranks));
  py::gil_scoped_release unlocked;
  const ExecutionSpace exec;
  c.decode(exec, words_of<typename Py::Word>(gathered, c.words() * ranks, "the gathered payloads"),
           view_of(out, c.codec.size()), ranks);
  exec.fence();
}

A2sgdCodecOptions codec_options(const std::string& averaging, const std::string& residual, bool error_feedback,
                                const std::string& zero_gradient) {
  return {parse_global_averaging(averaging), parse_residual_reference(residual), error_feedback,
          parse_zero_gradient(zero_gradient)};
}

}  // namespace

PYBIND11_MODULE(_a2sgd, m) {
  m.doc() = "a2sgd's exchange kernels on caller-owned float32 memory (used by a2sgd.torch)";
  if (!Kokkos::is_initialized()) {
    Kokkos::initialize();
    g_initialised_here = true;
  }
  py::module_::import("atexit").attr("register")(py::cpp_function([] {
    g_finalize_pending = true;
    finalize_if_done();
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

  // The baselines, as a2sgd-train runs them (TopkCodec.hpp, QsgdCodec.hpp, EfSignCodec.hpp): the
  // payload words are handed over as torch int64 (Top-K) or int32 (QSGD, EF-sign) tensors of the
  // same bits, which every rank all-gathers.
  py::class_<PyTopk>(m, "TopkCodec", "Top-K with error feedback on n float32 values: a payload of k int64 words")
      .def(py::init([](Index n, double ratio) {
             return PyTopk{LiveCodec(), TopkCodec(n, topk_k(ratio, n)), Counter()};
           }),
           py::arg("n"), py::arg("ratio"))
      .def_property_readonly("k", [](const PyTopk& c) { return c.codec.k(); })
      .def_property_readonly("payload_words", [](const PyTopk& c) { return c.words(); })
      .def_property_readonly("size", [](const PyTopk& c) { return c.codec.size(); })
      .def("encode", &encode_with_residual<PyTopk>, py::arg("grad"), py::arg("residual"), py::arg("payload"),
           "e <- a = g + e; the k largest |a| as (index << 32 | value bits) into the payload, out of e; returns "
           "the number of non-finite entries of a")
      .def("decode", &decode_gathered<PyTopk>, py::arg("gathered"), py::arg("ranks"), py::arg("out"),
           "out <- the mean over the ranks of their sparse vectors (out is zeroed first)");

  py::class_<PyQsgd>(m, "QsgdCodec", "QSGD on n float32 values: a payload of payload_words int32 words")
      .def(py::init([](Index n, std::int64_t levels) {
             return PyQsgd{LiveCodec(), QsgdCodec(n, levels)};
           }),
           py::arg("n"), py::arg("levels"))
      .def_property_readonly("size", [](const PyQsgd& c) { return c.codec.size(); })
      .def_property_readonly("bits", [](const PyQsgd& c) { return c.codec.bits(); })
      .def_property_readonly("payload_words", [](const PyQsgd& c) { return c.codec.payload_words(); })
      .def_static("rounding_key", &QsgdCodec::rounding_key, py::arg("seed"), py::arg("step"), py::arg("rank"))
      .def(
          "encode",
          [](const PyQsgd& c, std::uintptr_t grad, std::uint64_t key, std::uintptr_t payload) {
            py::gil_scoped_release unlocked;
            const ExecutionSpace exec;
            c.codec.encode(exec, view_of(grad, c.codec.size()), key,
                           words_of<std::uint32_t>(payload, c.codec.payload_words(), "the payload"));
            exec.fence();
          },
          py::arg("grad"), py::arg("key"), py::arg("payload"),
          "the norm and the packed sign/level fields of g, rounded with the stream `key`")
      .def("decode", &decode_gathered<PyQsgd>, py::arg("gathered"), py::arg("ranks"), py::arg("out"),
           "out <- the mean over the ranks of their decoded payloads");

  py::class_<PyEfSign>(m, "EfSignCodec", "EF-sign on n float32 values: a payload of payload_words int32 words")
      .def(py::init([](Index n) {
             return PyEfSign{LiveCodec(), EfSignCodec(n), Counter()};
           }),
           py::arg("n"))
      .def_property_readonly("size", [](const PyEfSign& c) { return c.codec.size(); })
      .def_property_readonly("payload_words", [](const PyEfSign& c) { return c.codec.payload_words(); })
      .def("encode", &encode_with_residual<PyEfSign>, py::arg("grad"), py::arg("residual"), py::arg("payload"),
           "e <- a = g + e; the scale ||a||_1 / n and the signs of a into the payload; e <- a - s sign(a); returns "
           "the number of non-finite entries of a")
      .def("decode", &decode_gathered<PyEfSign>, py::arg("gathered"), py::arg("ranks"), py::arg("out"),
           "out <- the mean over the ranks of s_r sign_r");
}
