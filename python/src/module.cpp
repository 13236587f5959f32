// a2sgd._a2sgd: the library's exchange kernels on memory that Python owns (a torch tensor's), for
// the a2sgd.torch communication hooks. Only the library's public headers; no torch headers: every
// function takes the torch tensors themselves and checks here, before the kernels view their
// memory without a copy, what the kernel needs of each (a torch.Tensor, its dtype, its element
// count, a device this build's memory space can read, contiguity), naming the argument that fails.
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

#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace py = pybind11;
using namespace a2sgd;

namespace {

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

// Where a tensor must live: in the memory the kernels read (the host in a host build, a GPU in a
// CUDA or HIP one), or on the host (A2SGD's few payload scalars, which the host reads).
enum class Where { kernels, host };

// The torch tensor behind an argument, checked: a torch.Tensor of `dtype` ("torch.float32", ...)
// with n elements, contiguous, where `where` says; for the kernels' memory, Kokkos is started on
// the tensor's device if it does not run yet. Returns its data pointer. Checked in Python's terms,
// since no torch headers are linked: the attributes every torch.Tensor has.
template <class T>
T* tensor_data(py::handle t, const char* what, const char* dtype, Index n, Where where = Where::kernels) {
  // A handle that is never released: a static py::object would be destroyed after the interpreter.
  static const py::handle tensor_type = py::object(py::module_::import("torch").attr("Tensor")).release();
  // TypeError for what the tensor is (its type, dtype, device), ValueError for its shape, as torch.
  const std::string name = "a2sgd: " + std::string(what) + " ";
  const auto type_error = [&](const std::string& why) { throw py::type_error(name + why); };
  const auto value_error = [&](const std::string& why) { throw InvalidArgument(name + why); };
  if (!py::isinstance(t, tensor_type))
    type_error("is a " + std::string(py::str(py::type::of(t).attr("__name__"))) + ", not a torch.Tensor");
  const std::string got = py::str(t.attr("dtype"));
  if (got != dtype)
    type_error("is " + got + ", not " + dtype +
               (got == "torch.float16" || got == "torch.bfloat16"
                    ? " (train in float32, or register torch's fp16_compress_hook or bf16_compress_hook instead)"
                    : ""));
  const py::object device = t.attr("device");
  const std::string type = py::str(device.attr("type"));
  if (where == Where::host && type != "cpu") type_error("is on " + std::string(py::str(device)) + ", not on the CPU");
  if (where == Where::kernels && (type == "cpu") != host_accessible_memory)
    type_error("is on " + std::string(py::str(device)) + ", but this a2sgd's kernels read " + MemorySpace::name() +
               (host_accessible_memory ? " (build the library with Kokkos CUDA or HIP for device tensors)" : ""));
  const auto count = t.attr("numel")().cast<std::int64_t>();
  if (count != n) value_error("has " + std::to_string(count) + " elements, not " + std::to_string(n));
  if (!t.attr("is_contiguous")().cast<bool>()) value_error("is not contiguous");
  const py::object index = device.attr("index");
  if (where == Where::kernels) ensure_kokkos(type == "cpu" || index.is_none() ? -1 : index.cast<int>());
  return reinterpret_cast<T*>(t.attr("data_ptr")().cast<std::uintptr_t>());
}

FloatView float_view(py::handle t, const char* what, Index n) {
  return Kokkos::View<float*, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
      tensor_data<float>(t, what, "torch.float32", n), static_cast<std::size_t>(n));
}

// The torch dtype of a payload word: the integer of the same width (torch has no unsigned 32- and
// 64-bit types; the bits are the same).
template <class Word>
constexpr const char* word_dtype() {
  static_assert(sizeof(Word) == 4 || sizeof(Word) == 8, "payload words are 32 or 64 bits");
  return sizeof(Word) == 4 ? "torch.int32" : "torch.int64";
}

template <class Word>
Kokkos::View<Word*, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> word_view(py::handle t, const char* what,
                                                                                    Index n) {
  using View = Kokkos::View<Word*, MemorySpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  return View(tensor_data<Word>(t, what, word_dtype<Word>(), n), static_cast<std::size_t>(n));
}

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
      .def_property_readonly_static("word_dtype", [](py::object) { return std::string(word_dtype<Word>()); })
      .def(
          "encode",
          [](B& b, py::handle grad, py::handle residual, py::handle payload, std::uint64_t seed, std::uint64_t step,
             int rank) {
            const Index n = b.codec.size();
            const FloatView g = float_view(grad, "grad", n);
            const FloatView e = Codec::has_residual ? float_view(residual, "residual", n) : FloatView();
            const auto words = word_view<Word>(payload, "payload", b.codec.payload_words());
            py::gil_scoped_release unlocked;
            const ExecutionSpace exec;
            Kokkos::deep_copy(exec, b.non_finite, std::int64_t(0));
            b.codec.encode(exec, g, e, EncodeContext{seed, step, rank, b.non_finite}, words);
            std::int64_t bad = 0;
            Kokkos::deep_copy(bad, b.non_finite);  // fences
            return bad;
          },
          py::arg("grad"), py::arg("residual"), py::arg("payload"), py::arg("seed") = 0, py::arg("step") = 0,
          py::arg("rank") = 0,
          "payload <- the codec's words for grad (float32, size values; with the residual folded in and "
          "updated where the codec keeps one, else residual may be None; seed, step and rank fix a random "
          "rounding's stream); payload: a tensor of payload_words words of word_dtype. Returns the number "
          "of non-finite entries the fold met")
      .def(
          "decode",
          [](const B& b, py::handle gathered, int ranks, py::handle out) {
            if (ranks < 1) throw InvalidArgument("ranks " + std::to_string(ranks));
            const auto words = word_view<Word>(gathered, "gathered", b.codec.payload_words() * ranks);
            const FloatView u = float_view(out, "out", b.codec.size());
            py::gil_scoped_release unlocked;
            const ExecutionSpace exec;
            if (!Codec::decode_overwrites) Kokkos::deep_copy(exec, u, 0.0f);
            b.codec.decode(exec, words, u, ranks);
            exec.fence();
          },
          py::arg("gathered"), py::arg("ranks"), py::arg("out"),
          "out <- the mean over the ranks of their decoded payloads (gathered: `ranks` payloads, rank after "
          "rank)");
  return c;
}

// A2SGD's codec as Python holds it: the local means of the last encode, which its decode needs
// (a hook encodes a bucket, all-reduces the payload and decodes that bucket before encoding it
// again, so one set per codec is enough).
struct BoundA2sgd {
  LiveCodec live;
  A2sgdCodec codec;
  std::vector<TwoMeansResult> local;
  bool encoded = false;
};

BoundA2sgd make_a2sgd(Index n, const std::vector<Index>& sizes, const std::string& averaging,
                      const std::string& residual, bool error_feedback, const std::string& zero_gradient) {
  const A2sgdCodecOptions o{parse_global_averaging(averaging), parse_residual_reference(residual), error_feedback,
                            parse_zero_gradient(zero_gradient)};
  BoundA2sgd b{LiveCodec(), A2sgdCodec(n, o, sizes.size() == 1 ? std::vector<Index>{} : sizes), {}, false};
  b.local.resize(b.codec.segments());
  return b;
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
  py::class_<BoundA2sgd>(m, "A2sgdCodec",
                         "A2SGD on n float32 values in segments (sizes: [] or [n] for one, else the tensors' "
                         "sizes): a payload of payload_words float64 values to SUM-all-reduce")
      .def(py::init(&make_a2sgd), py::arg("n"), py::arg("sizes") = std::vector<Index>{},
           py::arg("averaging") = "mean", py::arg("residual_reference") = "local", py::arg("error_feedback") = true,
           py::arg("zero_gradient") = "move")
      .def_property_readonly("size", [](const BoundA2sgd& b) { return b.codec.size(); })
      .def_property_readonly("segments", [](const BoundA2sgd& b) { return b.codec.segments(); })
      .def_property_readonly("payload_words", [](const BoundA2sgd& b) { return b.codec.payload_words(); })
      .def_property_readonly("has_residual", [](const BoundA2sgd& b) { return b.codec.has_residual(); })
      .def(
          "encode",
          [](BoundA2sgd& b, py::handle grad, py::handle residual, py::handle payload) {
            const Index n = b.codec.size();
            const FloatView g = float_view(grad, "grad", n);
            const FloatView e = b.codec.has_residual() ? float_view(residual, "residual", n) : FloatView();
            // The payload's few scalars are summed by the host (global_means): a CPU tensor; a device
            // build's hook all-reduces a device copy of it.
            double* words =
                tensor_data<double>(payload, "payload", "torch.float64", b.codec.payload_words(), Where::host);
            py::gil_scoped_release unlocked;
            const std::int64_t bad = b.codec.encode(ExecutionSpace(), g, e, b.local.data(), words);
            b.encoded = true;
            return bad;
          },
          py::arg("grad"), py::arg("residual"), py::arg("payload"),
          "steps 2-3 over a = grad + residual per segment: payload (a CPU float64 tensor of payload_words) <- "
          "this rank's payload; the local means kept for decode. Returns the number of non-finite entries")
      .def(
          "decode",
          [](BoundA2sgd& b, py::handle reduced, int world_size, py::handle grad, py::handle residual) {
            if (world_size < 1) throw InvalidArgument("world size " + std::to_string(world_size));
            if (!b.encoded) throw InvalidArgument("a2sgd: decode before any encode (no local means yet)");
            const double* sums =
                tensor_data<double>(reduced, "reduced", "torch.float64", b.codec.payload_words(), Where::host);
            std::vector<std::pair<double, double>> global(b.codec.segments()), local(b.codec.segments());
            b.codec.global_means(sums, world_size, global.data());
            for (const auto& [pos, neg] : global)
              if (!std::isfinite(pos) || !std::isfinite(neg)) return false;  // a rank's gradient was poisoned
            for (std::size_t s = 0; s < local.size(); ++s) local[s] = {b.local[s].mean_pos(), b.local[s].mean_neg()};
            const Index n = b.codec.size();
            const FloatView g = float_view(grad, "grad", n);
            const FloatView e = b.codec.has_residual() ? float_view(residual, "residual", n) : FloatView();
            py::gil_scoped_release unlocked;
            b.codec.decode_in_place(ExecutionSpace(), g, e, local.data(), global.data());
            ExecutionSpace().fence();
            return true;
          },
          py::arg("reduced"), py::arg("world_size"), py::arg("grad"), py::arg("residual"),
          "steps 4-6: the global means from reduced (the payloads SUM-all-reduced over world_size ranks, a CPU "
          "float64 tensor), then grad <- the update and residual <- a - c. Returns False, touching nothing, when "
          "a mean is not finite (a rank's gradient had NaN/Inf)");
  m.def("segment_bounds", &A2sgdCodec::segment_bounds, py::arg("n"), py::arg("sizes"),
        "[0, n] for the whole buffer, or the running sums of the tensor sizes (which must add up to n)");

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
