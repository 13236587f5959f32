"""The compiled module a2sgd._a2sgd, built by the project's CMake (pyproject.toml has the package's
metadata). Environment: A2SGD_CMAKE_ARGS (extra configure arguments, e.g. -DKokkos_ROOT=...),
CMAKE_BUILD_PARALLEL_LEVEL (build jobs; default: every core)."""
import os
import shlex
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    """Configures the whole project with the Python module on and everything else off, builds the
    module's target and puts the module where setuptools packs the extension."""

    def build_extension(self, ext):
        target = os.path.abspath(self.get_ext_fullpath(ext.name))
        build = os.path.abspath(os.path.join(self.build_temp, "cmake"))
        os.makedirs(build, exist_ok=True)
        configure = ["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DA2SGD_PYTHON=ON",
                     "-DA2SGD_ENABLE_TESTS=OFF", "-DA2SGD_ENABLE_APPS=OFF", f"-DPython3_EXECUTABLE={sys.executable}"]
        configure += shlex.split(os.environ.get("A2SGD_CMAKE_ARGS", ""))
        subprocess.run(configure, check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        subprocess.run(["cmake", "--build", build, "--target", "_a2sgd", "--parallel", jobs], check=True)
        built = os.path.join(build, "python", "a2sgd")
        module = next(f for f in os.listdir(built) if f.startswith("_a2sgd") and f.endswith(".so"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        self.copy_file(os.path.join(built, module), target)


setup(ext_modules=[CMakeExtension("a2sgd._a2sgd")], cmdclass={"build_ext": CMakeBuild})
