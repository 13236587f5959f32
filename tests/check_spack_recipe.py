#!/usr/bin/env python3
"""Checks the Spack repository under spack/ against the project and the rules a real Spack enforces.

The recipe is executed with a minimal stand-in for Spack's package API that records its
directives (version, variant, depends_on, conflicts) and evaluates cmake_args() for a set of
specs. Then, what Spack itself would only find out when a user's build fails:
  * every -D the recipe passes is a cache variable or option the project declares, or a variable
    that CMake or a find module of a package the project looks for reads (<Pkg>_ROOT, ...);
  * every variant changes the build: toggling it changes cmake_args() or the dependencies;
  * each dependency's minimum version is the one the project's find_package() asks for, the
    CMake minimum is cmake_minimum_required's, Kokkos stays below the release the project refuses;
  * a numeric release, if the recipe has one, is project(VERSION), and the GPU architecture reaches
    Kokkos for every cuda_arch / amdgpu_target value.
And what a real Spack (v1.1) refused or failed on (docs/hpc.md):
  * the repository layout of the api its repo.yaml declares: api v2.x needs
    <root>/spack_repo/<namespace>/repo.yaml with packages/<name with underscores>/package.py
    ("Path must contain 'spack_repo/'"); v1.x the older <root>/repo.yaml layout;
  * every language the CMake project enables (project(LANGUAGES), enable_language()) has a
    depends_on("c" / "cxx" / "fortran") (else "SPACK_CC_* variables not set" at configure);
  * every declared version can be fetched from a clone of this repository (a tag must exist in
    it: tags do not reach a clone of main; a commit must be on HEAD's history; a branch must
    exist); the version a plain `spack install a2sgd` takes (the preferred one, else the
    highest numeric release) is then one of them.
Usage: check_spack_recipe.py <source dir>
"""
import os
import re
import subprocess
import sys
import types

SOURCE = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
failures = []


def fail(message):
    failures.append(message)
    print("FAIL:", message)


# ---- 0. the repository layout for the api its repo.yaml declares ----
def repo_yaml(path):
    """namespace and api of a repo.yaml (the two keys Spack reads here), without a YAML parser."""
    text = open(path).read()
    namespace = re.search(r"^\s*namespace:\s*['\"]?([\w.-]+)", text, re.M)
    api = re.search(r"^\s*api:\s*['\"]?v?(\d+)\.(\d+)", text, re.M)
    return (namespace.group(1) if namespace else None), ((int(api.group(1)), int(api.group(2))) if api else None)


repos = []
for root, dirs, files in os.walk(os.path.join(SOURCE, "spack")):
    if "repo.yaml" in files:
        repos.append(root)
if len(repos) != 1:
    print(f"FAIL: expected one Spack repository (repo.yaml) under spack/, found {len(repos)}: {repos}")
    sys.exit(1)
REPO = repos[0]
namespace, api = repo_yaml(os.path.join(REPO, "repo.yaml"))
if namespace is None or api is None:
    fail(f"{REPO}/repo.yaml must declare repo: namespace and api (v2.x for Spack v1)")
elif api[0] >= 2:
    # Spack v1 (api v2.x): the repository is <root>/spack_repo/<namespace>, package directories are
    # Python module names (dashes become underscores), and the recipe imports spack_repo.*.
    if os.path.basename(os.path.dirname(REPO)) != "spack_repo" or os.path.basename(REPO) != namespace:
        fail(f"api v{api[0]}.{api[1]} needs the repository at <root>/spack_repo/{namespace}/ "
             f"(Spack: \"Path must contain 'spack_repo/'\"); it is at {os.path.relpath(REPO, SOURCE)}")
    for name in os.listdir(os.path.join(REPO, "packages")):
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
            fail(f"api v2 package directories are module names: packages/{name}")
else:
    if os.path.basename(os.path.dirname(REPO)) == "spack_repo":
        fail(f"api v{api[0]}.{api[1]} (Spack < 1.0) does not use the spack_repo/ layout")
RECIPE = os.path.join(REPO, "packages", "a2sgd", "package.py")
if not os.path.exists(RECIPE):
    print(f"FAIL: no packages/a2sgd/package.py in {REPO}")
    sys.exit(1)
print(f"repository {os.path.relpath(REPO, SOURCE)}: namespace {namespace}, api v{api[0]}.{api[1]}, layout as "
      f"Spack requires")


# ---- a stand-in for the parts of Spack's package API the recipe uses ----
directives = {"version": [], "variant": [], "depends_on": [], "conflicts": [], "extends": [], "license": []}


def _record(kind):
    def directive(*args, **kwargs):
        directives[kind].append((args, kwargs))

    return directive


class Prefix(str):
    def __getattr__(self, name):
        return Prefix(os.path.join(self, name))

    def join(self, name):
        return Prefix(os.path.join(self, name))


class Spec:
    """Variant values and dependency names; satisfies() understands '+v', '~v', 'v=x' and '^dep'."""

    def __init__(self, variants, deps):
        self.variants_values = variants
        self.deps = deps

    def satisfies(self, text):
        for token in re.findall(r"[+~^]?[\w-]+(?:=[\w,-]+)?", text):
            if token.startswith("^"):
                if token[1:] not in self.deps:
                    return False
            elif token.startswith("+") or token.startswith("~"):
                for name in re.split(r"(?=[+~])", token):
                    if not name:
                        continue
                    if self.variants_values.get(name[1:], False) != (name[0] == "+"):
                        return False
            elif "=" in token:
                key, value = token.split("=", 1)
                if str(self.variants_values.get(key)) != value:
                    return False
        return True

    def __getitem__(self, name):
        if name not in self.deps:
            raise KeyError(f"the recipe reads spec['{name}'] but that is not a dependency of this spec")
        dep = types.SimpleNamespace(prefix=Prefix(f"/spack/{name}"), hipcc="/spack/hip/bin/hipcc",
                                    kokkos_cxx="/spack/kokkos/bin/nvcc_wrapper",
                                    command=types.SimpleNamespace(path=f"/spack/{name}/bin/{name}"))
        return dep

    @property
    def variants(self):
        return {k: types.SimpleNamespace(value=v) for k, v in self.variants_values.items()}


class CMakePackage:
    def __init__(self, spec):
        self.spec = spec

    def __getitem__(self, name):
        return self.spec[name]

    @staticmethod
    def define(name, value):
        if isinstance(value, bool):
            value = "ON" if value else "OFF"
        return f"-D{name}={value}"

    def define_from_variant(self, name, variant):
        return self.define(name, bool(self.spec.variants_values[variant]))


class CudaPackage:
    cuda_arch_values = ("70", "80", "90", "100")


class ROCmPackage:
    amdgpu_targets = ("gfx906", "gfx90a", "gfx942")


def _install_stand_in():
    package = types.ModuleType("spack.package")
    for kind in directives:
        setattr(package, kind, _record(kind))
    for name in ("maintainers", "tags"):
        setattr(package, name, lambda *a, **k: None)
    package.join_path = os.path.join
    package.Executable = lambda *a, **k: None
    package.which = lambda *a, **k: None
    package.working_dir = None
    package.make_jobs = 2
    package.SkipTest = type("SkipTest", (Exception,), {})
    package.__all__ = [n for n in dir(package) if not n.startswith("_")]
    sys.modules["spack"] = types.ModuleType("spack")
    sys.modules["spack.package"] = package
    for module, cls in (("cmake", CMakePackage), ("cuda", CudaPackage), ("rocm", ROCmPackage)):
        name = f"spack_repo.builtin.build_systems.{module}"
        m = types.ModuleType(name)
        setattr(m, cls.__name__, cls)
        sys.modules[name] = m
    for name in ("spack_repo", "spack_repo.builtin", "spack_repo.builtin.build_systems"):
        sys.modules[name] = types.ModuleType(name)


_install_stand_in()
namespace = {"__file__": RECIPE, "__name__": "a2sgd_recipe"}
exec(compile(open(RECIPE).read(), RECIPE, "exec"), namespace)
Recipe = namespace["A2sgd"]

# Variants: the recipe's own plus those CudaPackage / ROCmPackage declare.
variants = {args[0]: kwargs.get("default") for args, kwargs in directives["variant"]}
variants.update({"cuda": False, "rocm": False, "cuda_arch": "none", "amdgpu_target": "none"})


def when_holds(when, spec):
    return when is None or spec.satisfies(when)


def dependencies(values):
    """The dependency specs (name + constraints) active for these variant values."""
    spec = Spec(values, set())
    active = []
    for args, kwargs in directives["depends_on"] + directives["extends"]:
        if when_holds(kwargs.get("when"), spec):
            active.append(args[0])
    return active


def cmake_args(values):
    names = {re.match(r"[\w-]+", d).group(0) for d in dependencies(values)}
    names |= {"cmake", "hip"} if values.get("rocm") else {"cmake"}
    if values.get("tests"):
        names.add("openblas")  # exercise both branches below
    return Recipe(Spec(values, names)).cmake_args()


# ---- what the project declares ----
def read(path):
    with open(os.path.join(SOURCE, path)) as f:
        return f.read()


cmake_files = []
for root, dirs, files in os.walk(SOURCE):
    dirs[:] = [d for d in dirs if not d.startswith(".") and not d.startswith("build")]
    for f in files:
        if f == "CMakeLists.txt" or (f.endswith(".cmake") and not f.startswith("check_")):
            cmake_files.append(os.path.relpath(os.path.join(root, f), SOURCE))
cmake_text = "\n".join(read(f) for f in cmake_files)
declared = set(re.findall(r"\boption\(\s*([A-Za-z_][\w]*)", cmake_text))
declared |= set(re.findall(r"\bset\(\s*([A-Za-z_][\w]*)\s[^)]*\bCACHE\b", cmake_text))
for prefix in re.findall(r"\boption\(\s*([A-Za-z0-9_]+)\$\{_backend\}", cmake_text):
    backends = re.search(r"foreach\(_backend ([A-Z ]+)\)", cmake_text).group(1).split()
    declared |= {prefix + b for b in backends}
found_packages = set(re.findall(r"\bfind_package\(\s*(\w+)", cmake_text))
# Variables that CMake itself, or the find modules / configs of packages the project looks for, read.
cmake_reads = {"BUILD_SHARED_LIBS", "CMAKE_CXX_COMPILER", "CMAKE_BUILD_TYPE", "CMAKE_INSTALL_PREFIX"}
cmake_reads |= {f"{p}_ROOT" for p in found_packages} | {f"{p}_DIR" for p in found_packages}
if "MPI" in found_packages:
    cmake_reads |= {"MPIEXEC_EXECUTABLE", "MPIEXEC_NUMPROC_FLAG", "MPIEXEC_PREFLAGS"}
if "Python3" in found_packages:
    cmake_reads |= {"Python3_EXECUTABLE"}  # FindPython3's documented hint

# ---- 1. every -D is something the build reads ----
specs = {
    "default": dict(variants),
    "openmp": dict(variants, openmp=True),
    "tests": dict(variants, tests=True),
    "library only, static": dict(variants, apps=False, shared=False),
    "python": dict(variants, python=True),
    "cuda sm_90": dict(variants, cuda=True, cuda_arch="90"),
    "rocm gfx90a": dict(variants, rocm=True, amdgpu_target="gfx90a"),
}
for label, values in specs.items():
    for arg in cmake_args(values):
        m = re.match(r"-D([\w]+)(?::\w+)?=", arg)
        if not m:
            fail(f"{label}: cmake argument {arg!r} is not -DNAME=VALUE")
        elif m.group(1) not in declared | cmake_reads:
            fail(f"{label}: the recipe sets {m.group(1)}, which no CMake file of the project declares or reads")
print(f"cmake_args of {len(specs)} specs: every -D declared by the project ({len(declared)} options/cache "
      f"variables) or read by CMake / find_package({', '.join(sorted(found_packages))})")

# ---- 2. every variant maps to something ----
for name, default in variants.items():
    if not isinstance(default, bool) or name in ("cuda", "rocm"):
        continue
    on, off = dict(variants, **{name: True}), dict(variants, **{name: False})
    if cmake_args(on) == cmake_args(off) and sorted(dependencies(on)) == sorted(dependencies(off)):
        fail(f"variant {name} changes neither cmake_args() nor the dependencies")
for name, extra in (("cuda", {"cuda_arch": "90"}), ("rocm", {"amdgpu_target": "gfx90a"})):
    on = dict(variants, **{name: True}, **extra)
    if cmake_args(on) == cmake_args(variants):
        fail(f"+{name} does not reach the CMake configuration")
print(f"variants {sorted(k for k, v in variants.items() if isinstance(v, bool))}: each changes the build")

# ---- 3. dependency versions ----
def recipe_minimum(name, values=None):
    """The lowest version the recipe's active constraints on `name` allow (None: any)."""
    lows, highs = [], []
    for dep in dependencies(values or dict(variants, tests=True, apps=True)):
        m = re.match(rf"{re.escape(name)}@([\d.]*):?([\d.]*)", dep)
        if m and dep.split("@")[0] == name:
            lows.append(m.group(1))
            highs.append(m.group(2))
    if not lows:
        return None, None
    return max(lows, key=lambda v: tuple(int(x) for x in v.split("."))), next((h for h in highs if h), None)


def cmake_minimum_of(package):
    m = re.search(rf"find_package\(\s*{package}\s+([\d.]+)", cmake_text)
    return m.group(1) if m else None


def same_version(a, b):
    norm = lambda v: tuple(int(x) for x in v.split(".")) + (0,) * (3 - len(v.split(".")))
    return a is not None and b is not None and norm(a) == norm(b)


pairs = {"MPI": "mpi", "HDF5": "hdf5", "Boost": "boost", "Kokkos": "kokkos", "KokkosKernels": "kokkos-kernels",
         "Catch2": "catch2", "ZLIB": "zlib-api"}
for cmake_name, spack_name in pairs.items():
    if cmake_name not in found_packages:
        fail(f"the project no longer looks for {cmake_name}; update this check and the recipe")
        continue
    want = cmake_minimum_of(cmake_name)
    if cmake_name == "KokkosKernels":
        want = cmake_minimum_of("Kokkos")  # Kokkos Kernels is released with Kokkos
    have, _ = recipe_minimum(spack_name)
    if want is None and have is None:
        if not any(d.split("@")[0].split("+")[0] == spack_name for d in dependencies(dict(variants, tests=True))):
            fail(f"find_package({cmake_name}) has no '{spack_name}' dependency in the recipe")
        continue
    if not same_version(want, have):
        fail(f"find_package({cmake_name} {want}) but the recipe asks for {spack_name}@{have}:")
    else:
        print(f"{cmake_name} >= {want}: recipe {spack_name}@{have}:")
refused = re.search(r"Kokkos_VERSION VERSION_GREATER_EQUAL ([\d.]+)", cmake_text)
_, kokkos_high = recipe_minimum("kokkos")
if not refused or kokkos_high is None or int(kokkos_high.split(".")[0]) + 1 != int(float(refused.group(1))):
    fail(f"the project refuses Kokkos >= {refused and refused.group(1)}, the recipe allows up to {kokkos_high}")
cmake_min = re.search(r"cmake_minimum_required\(VERSION ([\d.]+)", read("CMakeLists.txt")).group(1)
have, _ = recipe_minimum("cmake")
if not same_version(cmake_min, have):
    fail(f"cmake_minimum_required({cmake_min}) but the recipe asks for cmake@{have}:")
if not any(d.startswith("hdf5") and "+mpi" in d for d in dependencies(variants)):
    fail("the project needs a parallel HDF5; the recipe does not ask for hdf5+mpi")
boost = [d for d in dependencies(dict(variants, apps=True)) if d.startswith("boost")]
if not boost or "+program_options" not in boost[0] or any(
        d.startswith("boost") for d in dependencies(dict(variants, apps=False))):
    fail(f"boost+program_options must be a dependency exactly when +apps: {boost}")

# ---- 4. release version and GPU architecture propagation ----
project_version = re.search(r"project\(A2SGD VERSION ([\d.]+)", read("CMakeLists.txt")).group(1)
releases = [a[0] for a, k in directives["version"] if re.match(r"^[\d.]+$", a[0])]
if releases and project_version not in releases:
    fail(f"project(VERSION {project_version}) is not among the recipe's releases ({releases})")
for arch in CudaPackage.cuda_arch_values:
    deps = dependencies(dict(variants, cuda=True, cuda_arch=arch))
    for pkg in ("kokkos", "kokkos-kernels"):
        if not any(d.startswith(pkg + "+") and f"cuda_arch={arch}" in d for d in deps):
            fail(f"+cuda cuda_arch={arch} does not reach {pkg}")
for target in ROCmPackage.amdgpu_targets:
    if not any(d.startswith("kokkos+") and f"amdgpu_target={target}" in d
               for d in dependencies(dict(variants, rocm=True, amdgpu_target=target))):
        fail(f"+rocm amdgpu_target={target} does not reach kokkos")
if not any("cuda_lambda" in d for d in dependencies(dict(variants, cuda=True, cuda_arch="90"))):
    fail("+cuda does not ask for kokkos+cuda_lambda")
print(f"releases {releases or 'none (main only)'} against project(VERSION {project_version}); cuda_arch and "
      f"amdgpu_target reach Kokkos")

# ---- 5. languages the CMake project enables have depends_on ----
language_deps = {"C": "c", "CXX": "cxx", "Fortran": "fortran"}
main_cmake = [f for f in cmake_files if not f.startswith(os.path.join("tests", "consumer"))]
main_text = "\n".join(read(f) for f in main_cmake)
enabled = set()
for m in re.finditer(r"\bproject\(\s*A2SGD\b.*?\bLANGUAGES\s+([A-Za-z ]+)", main_text, re.S):
    enabled |= set(m.group(1).split())
enabled |= set(re.findall(r"\benable_language\(\s*(\w+)", main_text))
build_deps = {re.match(r"[\w-]+", args[0]).group(0) for args, kwargs in directives["depends_on"]
              if kwargs.get("when") is None}
for language in sorted(enabled):
    dep = language_deps.get(language)
    if dep and dep not in build_deps:
        fail(f"the CMake project enables {language} but the recipe has no depends_on(\"{dep}\", type=\"build\") "
             f"(Spack: \"SPACK_CC_* variables not set\")")
print(f"languages enabled by the project: {sorted(enabled)}: each has its depends_on")

# ---- 6. every version can be fetched from a clone; a plain install takes one of them ----
def git(*args):
    return subprocess.run(["git", "-C", SOURCE, *args], capture_output=True, text=True)


versions = [(args[0], kwargs) for args, kwargs in directives["version"]]
if not versions:
    fail("the recipe declares no version")
elif git("rev-parse", "--git-dir").returncode != 0:
    print("versions: not a git checkout, fetchability not checked")
else:
    for name, kwargs in versions:
        if "tag" in kwargs:
            if not git("tag", "--list", kwargs["tag"]).stdout.strip():
                fail(f"version {name}: tag {kwargs['tag']} does not exist in this clone (tags do not reach a clone "
                     f"of main; Spack: \"Remote branch {kwargs['tag']} not found\")")
        elif "commit" in kwargs:
            if git("merge-base", "--is-ancestor", kwargs["commit"], "HEAD").returncode != 0:
                fail(f"version {name}: commit {kwargs['commit']} is not in this clone's history")
        elif "branch" in kwargs:
            branch = kwargs["branch"]
            if (git("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}").returncode != 0 and
                    git("rev-parse", "--verify", "--quiet", f"refs/remotes/origin/{branch}").returncode != 0):
                fail(f"version {name}: branch {branch} does not exist in this clone")
        else:
            fail(f"version {name}: neither tag, commit nor branch (a tarball is not fetchable from a clone)")
    preferred = [name for name, kwargs in versions if kwargs.get("preferred")]
    numeric = [name for name, _ in versions if re.fullmatch(r"[\d.]+", name)]
    if len(preferred) > 1:
        fail(f"more than one preferred version: {preferred}")
    # The concretizer takes the preferred version, else the highest numeric release (it ranks
    # branch versions below releases), else a branch.
    default = preferred[0] if preferred else (max(numeric, key=lambda v: tuple(int(x) for x in v.split(".")))
                                              if numeric else versions[0][0])
    print(f"versions {[n for n, _ in versions]}: fetchable from a clone; `spack install a2sgd` takes {default}")

# The license: the recipe's names the tree's LICENSE (Apache 2.0 with the LLVM exception).
licenses = [args[0] for args, _ in directives["license"]]
if licenses != ["Apache-2.0 WITH LLVM-exception"]:
    fail(f"license directives {licenses}: expected one, 'Apache-2.0 WITH LLVM-exception' (LICENSE)")
license_text = open(os.path.join(SOURCE, "LICENSE")).read() if os.path.exists(os.path.join(SOURCE, "LICENSE")) else ""
if "Apache License" not in license_text or "LLVM Exceptions to the Apache 2.0 License" not in license_text:
    fail("LICENSE is not the Apache 2.0 license with the LLVM exceptions that the recipe declares")
else:
    print(f"license {licenses[0]}: the recipe's, as LICENSE states it")

if failures:
    print(f"{len(failures)} problem(s) in {RECIPE}")
    sys.exit(1)
print("the Spack recipe agrees with the project's CMake")
