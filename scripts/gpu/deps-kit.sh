#!/usr/bin/env bash
# Part of scripts/gpu/prepare.sh: copies this Debian machine's Open MPI, parallel HDF5,
# Boost.Program_options, Catch2 and zlib into a relocatable folder, with every shared library they
# load that is not part of the C/C++ runtime, and writes DEST/env.sh, which run.sh sources.
#
# Usage: scripts/gpu/deps-kit.sh DEST
# Layout: DEST/ompi/usr/...  Open MPI in Debian's own layout (relocated at run time by OPAL_PREFIX,
#                            PMIx by PMIX_INSTALL_PREFIX)
#         DEST/hdf5/{include,lib}  DEST/boost/{include,lib/<arch>}  DEST/catch2/{include,lib}
#         DEST/zlib/{include,lib}  DEST/lib (the libraries the above load, found with ldd)
set -euo pipefail
dest=${1:?usage: deps-kit.sh DEST}
arch=$(gcc -print-multiarch 2> /dev/null || echo x86_64-linux-gnu)
lib=/usr/lib/$arch
die() { echo "deps-kit.sh: error: $*" >&2; exit 2; }
for f in "$lib/libmpi.so.40" "$lib/hdf5/openmpi/libhdf5.so" /usr/include/hdf5/openmpi/hdf5.h \
  /usr/include/boost/program_options.hpp /usr/include/catch2/catch.hpp /usr/include/zlib.h; do
  [[ -e $f ]] || die "$f is missing: run scripts/deps.sh first"
done
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)

copy() {  # copy SRC... DIR: files and symbolic links as they are (links stay relative)
  local to=${*: -1}
  mkdir -p "$to"
  cp -a "${@:1:$#-1}" "$to/"
}
mirror() {  # mirror PATH...: into DEST/ompi with the same absolute path
  local p
  for p in "$@"; do
    mkdir -p "$dest/ompi$(dirname "$p")"
    cp -a "$p" "$dest/ompi$p"
  done
}

# Open MPI 4.1: launchers, daemon, wrappers and their data, libraries, components, help texts.
ompi=$lib/openmpi
mirror /usr/share/openmpi "$ompi/include" "$ompi/lib"
mirror "$lib"/libmpi.so* "$lib"/libmpi_cxx.so* "$lib"/libopen-rte.so* "$lib"/libopen-pal.so* "$lib"/libmca_common_*.so*
rm -f "$dest/ompi$ompi/lib"/{libmpi_java,libmpi_mpifh,libmpi_usempi,liboshmem}* "$dest/ompi$ompi/lib/openmpi3"/*oshmem* \
  "$dest/ompi$ompi/lib/openmpi3"/mca_{spml,sshmem,scoll,atomic}_*
rm -rf "$dest/ompi$ompi/lib/pkgconfig" "$dest/ompi$ompi/lib"/*.mod "$dest/ompi$ompi/include"/*.mod
# Debian reaches the launchers and wrappers through its alternatives (links into /etc): the kit
# holds the programs themselves and relative links named as the wrappers' data files expect.
mkdir -p "$dest/ompi/usr/bin"
for b in orterun orted ompi_info opal_wrapper; do cp "$(readlink -f "/usr/bin/$b")" "$dest/ompi/usr/bin/$b"; done
for b in mpirun mpiexec; do ln -sf orterun "$dest/ompi/usr/bin/$b"; done
for w in mpicxx mpic++ mpicc; do ln -sf opal_wrapper "$dest/ompi/usr/bin/$w"; done
pmix=$lib/pmix2
mirror "$pmix/lib" "$pmix/share"
rm -f "$dest/ompi$pmix/lib"/*.a

# Parallel HDF5 (C), Boost.Program_options (the headers it includes, found by the compiler),
# Catch2 2.x, zlib; each in a plain prefix that CMake's finders take as a root.
copy /usr/include/hdf5/openmpi/. "$dest/hdf5/include"
copy "$lib"/libhdf5_openmpi.so* "$dest/hdf5/lib"
# Debian's hdf5/openmpi/libhdf5.so points two levels up; in the kit the library sits beside it.
ln -sf libhdf5_openmpi.so "$dest/hdf5/lib/libhdf5.so"
for h in $(echo '#include <boost/program_options.hpp>' | g++ -std=c++17 -M -x c++ - | tr ' \\' '\n\n' | grep '^/usr/include/boost/'); do
  mkdir -p "$dest/boost/include/$(dirname "${h#/usr/include/}")"
  cp "$h" "$dest/boost/include/${h#/usr/include/}"
done
# Boost's CMake files find the headers three levels above their folder and the library one level
# above: kept in Debian's lib/<arch>/cmake layout, they find boost/include and boost/lib/<arch>.
copy "$lib"/libboost_program_options.so* "$dest/boost/lib/$arch"
copy "$lib/cmake/Boost-"* "$lib/cmake/boost_program_options-"* "$lib/cmake/boost_headers-"* "$lib/cmake/BoostDetectToolset-"* \
  "$dest/boost/lib/$arch/cmake"
copy /usr/include/catch2 "$dest/catch2/include"
copy /usr/lib/cmake/Catch2 "$dest/catch2/lib/cmake"
[[ -f /usr/lib/libCatch2WithMain.a ]] && copy /usr/lib/libCatch2WithMain.a "$dest/catch2/lib"  # its CMake targets name it
copy /usr/include/zlib.h /usr/include/zconf.h "$dest/zlib/include" 2> /dev/null ||
  { copy /usr/include/zlib.h "$dest/zlib/include"; copy "/usr/include/$arch/zconf.h" "$dest/zlib/include"; }
copy "$lib"/libz.so* "$dest/zlib/lib"

# Every shared library these load, recursively, except the C and C++ runtime (which the target's
# compiler brings, newer or equal) and the kit's own.
runtime='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|libutil|libresolv)\.'
mkdir -p "$dest/lib"
seen=" "
queue=$(find "$dest" -name '*.so*' -type f; find "$dest/ompi/usr/bin" -type f)
while [[ -n $queue ]]; do
  next=
  for f in $queue; do
    while read -r name path; do
      [[ $name =~ $runtime || -z $path || $seen == *" $name "* ]] && continue
      seen+="$name "
      [[ -n $(find "$dest" -name "$name" -print -quit) ]] && continue
      cp -L "$path" "$dest/lib/$name"
      next+=" $dest/lib/$name"
    done < <(ldd "$f" 2> /dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')
  done
  queue=$next
done

# Open MPI's components that need a library this machine lacks would only print warnings; the
# fabric stacks (UCX, OFI, PSM, verbs) are left out, TCP and shared memory stay.
rm -f "$dest/ompi$ompi/lib/openmpi3"/mca_{pml_ucx,osc_ucx,spml_ucx,mtl_ofi,mtl_psm,mtl_psm2,btl_openib,btl_ofi,btl_uct,btl_usnic,atomic_ucx}.so
strip --strip-unneeded "$dest/lib"/*.so* 2> /dev/null || true

cat > "$dest/env.sh" << 'EOF'
# Sourced by scripts/gpu/run.sh: the kit's MPI, HDF5, Boost, Catch2 and zlib before the system's.
kit_deps=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
kit_arch=$(ls "$kit_deps/ompi/usr/lib")
export OPAL_PREFIX=$kit_deps/ompi/usr
export PMIX_INSTALL_PREFIX=$kit_deps/ompi/usr/lib/$kit_arch/pmix2
export PATH=$kit_deps/ompi/usr/bin:$PATH
export LD_LIBRARY_PATH=$kit_deps/ompi/usr/lib/$kit_arch:$kit_deps/ompi/usr/lib/$kit_arch/openmpi/lib:$PMIX_INSTALL_PREFIX/lib:$kit_deps/hdf5/lib:$kit_deps/boost/lib/$kit_arch:$kit_deps/zlib/lib:$kit_deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
kit_cmake_args=(-DMPI_CXX_COMPILER="$kit_deps/ompi/usr/bin/mpicxx" -DMPI_C_COMPILER="$kit_deps/ompi/usr/bin/mpicc"
  -DMPIEXEC_EXECUTABLE="$kit_deps/ompi/usr/bin/mpiexec" -DHDF5_ROOT="$kit_deps/hdf5" -DHDF5_NO_FIND_PACKAGE_CONFIG_FILE=ON
  -DBoost_DIR="$(ls -d "$kit_deps"/boost/lib/$kit_arch/cmake/Boost-*)" -DBoost_NO_SYSTEM_PATHS=ON
  -DCatch2_DIR="$kit_deps/catch2/lib/cmake/Catch2" -DZLIB_ROOT="$kit_deps/zlib")
EOF
echo "deps-kit.sh: $(du -sh "$dest" | cut -f1) in $dest"
