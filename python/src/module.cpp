// a2sgd._a2sgd: the library's exchange kernels on memory that Python owns (a torch tensor's), for
// the a2sgd.torch communication hooks. Only the library's public headers; no torch headers: the
// Python side hands over data pointers, after checking dtype, device and contiguity, so the
// kernels run on the tensor's memory without a copy.
#include <a2sgd/compress/A2sgdCodec.hpp>
#include <a2sgd/compress/GatherCodec.hpp>
#include <a2sgd/compress/EfSignCodec.hpp>
#include <a2sgd/compress/ExchangeRegistry.hpp>
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

// Kokkos lives as long as the interpreter: initialised at first use (ensure_kokkos) unless the host program did, and
// finalised at exit, or, where codec objects (which own Kokkos views) outlive the atexit handlers
// (a hook state kept in a global), when the last of them goes, so that no view is freed after
// Kokkos::finalize.
bool g_initialised_here = false;
bool g_finalize_pending = false;
int g_live_codecs = 0;

int g_device = -1;  // the device Kokkos was initialised on here (-1: the host, or the backend's default)

// Kokkos starts at the first use, not at import (a program that only imports a2sgd, or that
// initialises Kokkos itself, pays nothing and keeps its own settings), on the device of the first
// tensor the hooks see (device_id -1: the host or the backend's default).
void ensure_kokkos(int device_id = -1) {
  if (!Kokkos::is_initialized()) {
#if KOKKOS_VERSION >= 30700
    Kokkos::InitializationSettings settings;
    if (device_id >= 0) settings.set_device_id(device_id);
    Kokkos::initialize(settings);
#else
    Kokkos::InitArguments arguments;
    arguments.device_id = device_id;
    Kokkos::initialize(arguments);
#endif
    g_initialised_here = true;
    g_device = device_id;
    return;
  }
  if (g_initialised_here && device_id >= 0 && g_device >= 0 && device_id != g_device)
    throw InvalidArgument("a2sgd: the library runs on device " + std::to_string(g_device) + ", not on device " +
                          std::to_string(device_id) + " (one device per process, as DDP has it)");
}

void finalize_if_done() {
  if (g_initialised_here && g_finalize_pending && g_live_codecs == 0 && Kokkos::is_initialized()) Kokkos::finalize();
}

// The first member of every bound object that owns views: destroyed last, after them.
struct LiveCodec {
  LiveCodec() {
    ensure_kokkos();
    ++g_live_codecs;
  }
  LiveCodec(const LiveCodec&) { ++g_live_codecs; }
  LiveCodec& operator=(const LiveCodec&) = default;
  ~LiveCodec() {
    --g_live_codecs;
    finalize_if_done();
  }
};

// A gather codec (GatherCodec.hpp) as Python holds it: with the device counter of non-finite entries
// its fold keeps (reset before, read after each encode: the count decides the hook's error message,
// not the result).
template <class Codec>
struct Bound {
  LiveCodec live;
  Codec codec;
  Kokkos::View<std::int64_t, MemorySpace> non_finite{"a2sgd::python::non_finite"};
};

// Binds the gather codec interface once for every codec: size, payload words and their width,
// whether it keeps a residual, encode and decode. `init` is the codec's constructor from Python.
template <class Codec, class Init>
py::class_<Bound<Codec>> bind_gather_codec(py::module_& m, const char* name, const char* doc, Init init) {
  using B = Bound<Codec>;
  using Word = typename Codec::Word;
  py::class_<B> c(m, name, doc);
  c.def(std::move(init))
      .def_property_readonly("size", [](const B& b) { return b.codec.size(); })
      .def_property_readonly("payload_words", [](const B& b) { return b.codec.payload_words(); })
      .def_property_readonly_static("word_bytes", [](py::object) { return sizeof(Word); })
      .def_property_readonly_static("has_residual", [](py::object) { return Codec::has_residual; })
      .def(
          "encode",
          [](B& b, std::uintptr_t grad, std::uintptr_t residual, std::uintptr_t payload, std::uint64_t seed,
             std::uint64_t step, int rank) {
            py::gil_scoped_release unlocked;
            const ExecutionSpace exec;
            const Index n = b.codec.size();
            Kokkos::deep_copy(exec, b.non_finite, std::int64_t(0));
            b.codec.encode(exec, view_of(grad, n), Codec::has_residual ? view_of(residual, n) : FloatView(),
                           EncodeContext{seed, step, rank, b.non_finite},
                           words_of<Word>(payload, b.codec.payload_words(), "the payload"));
            std::int64_t bad = 0;
            Kokkos::deep_copy(bad, b.non_finite);  // fences
            return bad;
          },
          py::arg("grad"), py::arg("residual"), py::arg("payload"), py::arg("seed") = 0, py::arg("step") = 0,
          py::arg("rank") = 0,
          "the payload of g (with the residual folded in where the codec keeps one; seed, step and rank fix a "
          "random rounding's stream); returns the number of non-finite entries the fold met")
      .def(
          "decode",
          [](const B& b, std::uintptr_t gathered, int ranks, std::uintptr_t out) {
            if (ranks < 1) throw InvalidArgument("ranks " + std::to_string(ranks));
            py::gil_scoped_release unlocked;
            const ExecutionSpace exec;
            const FloatView u = view_of(out, b.codec.size());
            if (!Codec::decode_overwrites) Kokkos::deep_copy(exec, u, 0.0f);
            b.codec.decode(exec, words_of<Word>(gathered, b.codec.payload_words() * ranks, "the gathered payloads"), u,
                           ranks);
            exec.fence();
          },
          py::arg("gathered"), py::arg("ranks"), py::arg("out"),
          "out <- the mean over the ranks of their decoded payloads (`ranks` of them, rank after rank)");
  return c;
}

// A2SGD's codec from the hook's segment bounds (which must run from 0 to n) and option names.
A2sgdCodec codec_of(Index n, const std::vector<Index>& bounds, const std::string& averaging,
                    const std::string& residual, bool error_feedback, const std::string& zero_gradient) {
  if (bounds.size() < 2 || bounds.front() != 0 || bounds.back() != n)
    throw InvalidArgument("segment bounds must run from 0 to n = " + std::to_string(n));
  std::vector<Index> sizes;
  for (std::size_t s = 0; s + 1 < bounds.size(); ++s) sizes.push_back(bounds[s + 1] - bounds[s]);
  const A2sgdCodecOptions o{parse_global_averaging(averaging), parse_residual_reference(residual), error_feedback,
                            parse_zero_gradient(zero_gradient)};
  return A2sgdCodec(n, o, sizes.size() == 1 ? std::vector<Index>{} : sizes);
}

}  // namespace

PYBIND11_MODULE(_a2sgd, m) {
  m.doc() = "a2sgd's exchange kernels on caller-owned float32 memory (used by a2sgd.torch)";
  py::module_::import("atexit").attr("register")(py::cpp_function([] {
    g_finalize_pending = true;
    finalize_if_done();
  }));
  py::register_exception<InvalidArgument>(m, "InvalidArgument", PyExc_ValueError);

  // The methods' options as the registry declares them (the one place their defaults, choices and
  // ranges live): a2sgd.torch reads its states' defaults and checks their values here.
  m.def(
      "method_options",
      [](const std::string& name) {
        std::vector<std::tuple<std::string, std::string, std::vector<std::string>>> out;
        for (const OptionSpec& o : exchange_method(name).options) out.emplace_back(o.name, o.default_value, o.choices);
        return out;
      },
      py::arg("method"), "(name, default, choices) of every option of an exchange method, as a2sgd-train has them");
  m.def(
      "check_method_options",
      [](const std::string& name, const std::map<std::string, std::string>& values) {
        const ExchangeMethod& method = exchange_method(name);
        OptionValues o = default_options(method);
        for (const auto& [key, value] : values) o.set(key, value);
        if (method.check_options) method.check_options(o);
      },
      py::arg("method"), py::arg("values"),
      "raises ValueError naming the option when a value is outside what a2sgd-train accepts");

  m.def(
      "kokkos_initialized", [] { return Kokkos::is_initialized(); }, "whether Kokkos runs in this process");
  m.def("initialize", &ensure_kokkos, py::arg("device_id") = -1,
        "starts Kokkos on that device (-1: the host or the default) unless it runs; the codecs start it too");
  m.def(
      "memory_space", [] { return std::string(MemorySpace::name()); },
      "the name of the Kokkos memory space the kernels read");
  m.def(
      "host_memory", [] { return host_accessible_memory; },
      "whether the kernels read host memory (a CPU build) rather than a device's (CUDA, HIP)");
  m.def(
      "payload_width",
      [](const std::string& averaging) { return A2sgdCodec::payload_width(parse_global_averaging(averaging)); },
      py::arg("averaging"), "doubles per segment in the payload: 2 (mean) or 4 (weighted)");
  m.def("segment_bounds", &A2sgdCodec::segment_bounds, py::arg("n"), py::arg("sizes"),
        "[0, n] for the whole buffer, or the running sums of the tensor sizes (which must add up to n)");

  m.def(
      "encode",
      [](std::uintptr_t grad, std::uintptr_t residual, Index n, const std::vector<Index>& bounds,
         const std::string& averaging, const std::string& residual_ref, bool error_feedback,
         const std::string& zero_gradient) {
        ensure_kokkos();
        const A2sgdCodec codec = codec_of(n, bounds, averaging, residual_ref, error_feedback, zero_gradient);
        const std::size_t segments = codec.segments();
        std::vector<TwoMeansResult> local(segments);
        std::vector<double> payload(static_cast<std::size_t>(codec.payload_words()));
        std::int64_t non_finite = 0;
        {
          py::gil_scoped_release unlocked;
          const FloatView g = view_of(grad, n);
          const FloatView e = error_feedback ? view_of(residual, n) : FloatView();
          non_finite = codec.encode(ExecutionSpace(), g, e, local.data(), payload.data());
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
        const std::size_t width = static_cast<std::size_t>(A2sgdCodec::payload_width(a));
        if (world_size < 1) throw InvalidArgument("world size " + std::to_string(world_size));
        if (reduced.empty() || reduced.size() % width != 0)
          throw InvalidArgument("a payload of " + std::to_string(reduced.size()) + " values for width " +
                                std::to_string(width));
        // Segments of one value each stand for the payload's segments: the means need no sizes.
        const auto segments = static_cast<Index>(reduced.size() / width);
        A2sgdCodecOptions o;
        o.averaging = a;
        const A2sgdCodec codec(segments, o, std::vector<Index>(static_cast<std::size_t>(segments), 1));
        std::vector<std::pair<double, double>> means(static_cast<std::size_t>(segments));
        codec.global_means(reduced.data(), world_size, means.data());
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
        ensure_kokkos();
        const A2sgdCodec codec = codec_of(n, bounds, averaging, residual_ref, error_feedback, zero_gradient);
        if (local_means.size() != codec.segments() || global_means.size() != codec.segments())
          throw InvalidArgument("one (pos, neg) pair of local and of global means per segment");
        py::gil_scoped_release unlocked;
        const FloatView g = view_of(grad, n);
        const FloatView e = error_feedback ? view_of(residual, n) : FloatView();
        codec.decode_in_place(ExecutionSpace(), g, e, local_means.data(), global_means.data());
        ExecutionSpace().fence();
      },
      py::arg("grad"), py::arg("residual"), py::arg("n"), py::arg("bounds"), py::arg("local_means"),
      py::arg("global_means"), py::arg("averaging") = "mean", py::arg("residual_reference") = "local",
      py::arg("error_feedback") = true, py::arg("zero_gradient") = "move",
      "A2SGD's decode pass: the update replaces g, the residual e = a - c, per segment");

  // The baselines, as a2sgd-train runs them (TopkCodec.hpp, QsgdCodec.hpp, EfSignCodec.hpp), each
  // through the one gather interface: the payload words are handed over as torch int64 (Top-K) or
  // int32 (QSGD, EF-sign) tensors of the same bits, which every rank all-gathers.
  bind_gather_codec<TopkCodec>(
      m, "TopkCodec", "Top-K with error feedback on n float32 values: a payload of k int64 words",
      py::init([](Index n, double ratio) { return Bound<TopkCodec>{LiveCodec(), TopkCodec(n, topk_k(ratio, n))}; }))
      .def_property_readonly("k", [](const Bound<TopkCodec>& b) { return b.codec.k(); });
  bind_gather_codec<QsgdCodec>(
      m, "QsgdCodec", "QSGD on n float32 values: a payload of payload_words int32 words",
      py::init([](Index n, std::int64_t levels) { return Bound<QsgdCodec>{LiveCodec(), QsgdCodec(n, levels)}; }))
      .def_property_readonly("bits", [](const Bound<QsgdCodec>& b) { return b.codec.bits(); });
  bind_gather_codec<EfSignCodec>(
      m, "EfSignCodec", "EF-sign with error feedback on n float32 values: a payload of payload_words int32 words",
      py::init([](Index n) { return Bound<EfSignCodec>{LiveCodec(), EfSignCodec(n)}; }));
}
