# Spack recipe of a2sgd: `spack repo add <a2sgd>/spack/spack_repo/a2sgd`, then `spack install a2sgd`.
# tests/check_spack_recipe.py checks it against the project's CMake (options, dependency
# versions, languages) and the rules a real Spack enforced (the repository layout of its api,
# versions a clone can fetch) in the test suite, so that a renamed option or a raised minimum fails
# there and not at a user's build. docs/hpc.md has the real-Spack runs.
import os

from spack_repo.builtin.build_systems.cmake import CMakePackage
from spack_repo.builtin.build_systems.cuda import CudaPackage
from spack_repo.builtin.build_systems.rocm import ROCmPackage

from spack.package import *

# This file lives in <clone>/spack/spack_repo/a2sgd/packages/a2sgd/: by default Spack fetches
# `main` from that clone; A2SGD_GIT names another repository (a mirror, a fork).
_CLONE = os.path.abspath(os.path.join(os.path.dirname(__file__), *([os.pardir] * 5)))


class A2sgd(CMakePackage, CudaPackage, ROCmPackage):
    """Communication-efficient data-parallel SGD on MPI and Kokkos: A2SGD (two-level gradient
    averaging, O(1) bytes per worker and step) and the baselines it is compared with (dense,
    Top-K, Random-K, QSGD, EF-sign, PowerSGD, fp16/bf16), with HDF5 checkpoints."""

    homepage = "file://" + _CLONE
    git = os.environ.get("A2SGD_GIT", "file://" + _CLONE)

    # Only commits on main reach every clone (tags do not), so main is the version: preferred, so
    # that a plain `spack install a2sgd` takes it.
    version("main", branch="main", preferred=True)

    # The license of the whole tree (LICENSE): Apache 2.0 with the LLVM exception, as Kokkos 4 and
    # Kokkos Kernels.
    license("Apache-2.0 WITH LLVM-exception")

    variant("openmp", default=False, description="Kokkos OpenMP backend on the host (else Serial)")
    variant("apps", default=True, description="a2sgd-train, a2sgd-bench, a2sgd-checkpoint, the example")
    variant("tests", default=False, description="Build the Catch2/CTest suite (run by `spack install --test=root`)")
    variant("shared", default=True, description="Build liba2sgd as a shared library")
    variant("python", default=False, description="The Python package a2sgd: a2sgd.torch, PyTorch DDP communication hooks")

    conflicts("+cuda", when="cuda_arch=none", msg="+cuda needs cuda_arch=<sm>, e.g. cuda_arch=90")
    conflicts("+rocm", when="amdgpu_target=none", msg="+rocm needs amdgpu_target=<gfx>, e.g. gfx90a")
    conflicts("+cuda", when="+rocm", msg="one device backend per build")

    depends_on("cxx", type="build")
    depends_on("c", type="build")  # FindHDF5 probes its C wrapper (cmake/A2SGDDependencies.cmake)
    depends_on("cmake@3.20:", type="build")

    # Kokkos 3.4 to 4.x (Kokkos 5 needs C++20); Kokkos Kernels of the same release.
    depends_on("kokkos@3.4:4")
    depends_on("kokkos-kernels@3.4:4")
    depends_on("kokkos+serial", when="~openmp")
    depends_on("kokkos+openmp", when="+openmp")
    depends_on("kokkos+pic", when="+shared")
    depends_on("kokkos+cuda+cuda_lambda", when="+cuda")
    depends_on("kokkos-kernels+cublas", when="+cuda")
    depends_on("kokkos+rocm", when="+rocm")
    depends_on("kokkos-kernels+rocblas", when="+rocm")
    depends_on("kokkos-kernels+blas", when="~cuda~rocm")
    for _arch in CudaPackage.cuda_arch_values:
        depends_on(f"kokkos+cuda cuda_arch={_arch}", when=f"+cuda cuda_arch={_arch}")
        depends_on(f"kokkos-kernels+cuda cuda_arch={_arch}", when=f"+cuda cuda_arch={_arch}")
    for _target in ROCmPackage.amdgpu_targets:
        depends_on(f"kokkos+rocm amdgpu_target={_target}", when=f"+rocm amdgpu_target={_target}")

    depends_on("mpi@3:")
    depends_on("hdf5@1.10:+mpi")
    depends_on("zlib-api")
    depends_on("boost@1.66:+program_options", when="+apps")
    depends_on("catch2", type=("build", "test"), when="+tests")  # 2.13 (Debian) or 3.x
    # The Python package: pybind11 at build time, torch where a2sgd.torch runs (and its tests).
    extends("python", when="+python")
    depends_on("python@3.8:", type=("build", "run"), when="+python")
    depends_on("py-pybind11@2.6:", type="build", when="+python")
    depends_on("py-torch", type=("run", "test"), when="+python")

    def cmake_args(self):
        spec = self.spec
        args = [
            self.define_from_variant("A2SGD_ENABLE_APPS", "apps"),
            self.define_from_variant("A2SGD_ENABLE_TESTS", "tests"),
            self.define_from_variant("BUILD_SHARED_LIBS", "shared"),
            self.define_from_variant("A2SGD_PYTHON", "python"),
            self.define_from_variant("A2SGD_REQUIRE_OPENMP", "openmp"),
            self.define_from_variant("A2SGD_REQUIRE_CUDA", "cuda"),
            self.define_from_variant("A2SGD_REQUIRE_HIP", "rocm"),
            self.define("Kokkos_ROOT", spec["kokkos"].prefix),
            self.define("KokkosKernels_ROOT", spec["kokkos-kernels"].prefix),
            self.define("HDF5_ROOT", spec["hdf5"].prefix),
        ]
        if spec.satisfies("+cuda"):
            args.append(self.define("CMAKE_CXX_COMPILER", self["kokkos"].kokkos_cxx))
        if spec.satisfies("+rocm"):
            args.append(self.define("CMAKE_CXX_COMPILER", spec["hip"].hipcc))
        if spec.satisfies("+tests"):
            # The MPI tests start ranks with this MPI's launcher; the reruns under other OpenBLAS
            # kernel families only make sense with OpenBLAS.
            args.append(self.define("MPIEXEC_EXECUTABLE", join_path(spec["mpi"].prefix.bin, "mpiexec")))
            args.append(self.define("MPIEXEC_PREFLAGS", ";".join(self._mpiexec_preflags())))
            if not spec.satisfies("^openblas"):
                args.append(self.define("A2SGD_PORTABILITY_BLAS_CORES", ""))
        if spec.satisfies("+python"):
            # Installed under the prefix's lib/pythonX.Y/site-packages, where Spack's python finds extensions.
            args.append(self.define("Python3_EXECUTABLE", spec["python"].command.path))
        return args

    def _mpiexec_preflags(self):
        """The suite's launcher flags: Open MPI runs the 4-rank tests on fewer cores only when told,
        and refuses root unless told; Spack's build environment drops OMPI_ALLOW_RUN_AS_ROOT (it
        removes every *_ROOT variable), so the flag says it instead."""
        if not self.spec.satisfies("^openmpi"):
            return []
        flags = ["--oversubscribe"]
        if os.geteuid() == 0:
            flags.append("--allow-run-as-root")
        return flags

    def check(self):
        """`spack install --test=root a2sgd+tests`: the CTest suite, without the device compile checks."""
        if not self.spec.satisfies("+tests"):
            return
        ctest = Executable(self.spec["cmake"].prefix.bin.ctest)
        with working_dir(self.build_directory):
            ctest("--output-on-failure", "--label-exclude", "compile", f"-j{make_jobs}")

    def test_version(self):
        """the installed a2sgd-train reports this package's version"""
        if not self.spec.satisfies("+apps"):
            raise SkipTest("a2sgd was installed without +apps")
        train = which(self.prefix.bin.join("a2sgd-train"))
        out = train("--version", output=str.split, error=str.split)
        assert "a2sgd" in out
