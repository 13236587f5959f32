# Defines the interface target A2SGD::Kokkos from an already found Kokkos and Kokkos Kernels.
# Used by the build (after cmake/A2SGDKokkos.cmake found them) and, installed, by
# A2SGDConfig.cmake (after find_dependency found them).
#
# Two worlds:
#  * Debian 12 / Trilinos 13.2: Kokkos 3.4 with a TriBITS-generated config. Its Kokkos::kokkos
#    target points at the wrong include directory, so the target is built from
#    Kokkos_INCLUDE_DIRS / KokkosKernels_LIBRARIES (those names are imported targets there).
#  * Native Kokkos 4.x (Spack, vendor modules): Kokkos::kokkos and Kokkos::kokkoskernels.
include_guard(GLOBAL)

if(NOT TARGET A2SGD::Kokkos)
  add_library(A2SGD::Kokkos INTERFACE IMPORTED GLOBAL)
  if(TARGET Kokkos::kokkoskernels AND NOT DEFINED KokkosKernels_LIBRARIES)
    set(A2SGD_KOKKOS_FLAVOR "native")
    target_link_libraries(A2SGD::Kokkos INTERFACE Kokkos::kokkos Kokkos::kokkoskernels)
  else()
    set(A2SGD_KOKKOS_FLAVOR "tribits")
    target_include_directories(A2SGD::Kokkos SYSTEM INTERFACE ${Kokkos_INCLUDE_DIRS} ${KokkosKernels_INCLUDE_DIRS}
                                                              ${Kokkos_TPL_INCLUDE_DIRS})
    target_link_libraries(A2SGD::Kokkos INTERFACE ${KokkosKernels_LIBRARIES} ${KokkosKernels_TPL_LIBRARIES})
  endif()
endif()
