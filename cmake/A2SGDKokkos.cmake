# Finds Kokkos and Kokkos Kernels and defines the project-owned interface target A2SGD::Kokkos.
#
# Two worlds must work:
#  * Debian 12 / Trilinos 13.2: Kokkos 3.4 with a TriBITS-generated config. Its Kokkos::kokkos
#    target points at the wrong include directory, so we build our own target from
#    Kokkos_INCLUDE_DIRS / KokkosKernels_LIBRARIES (those names are imported targets there).
#  * Native Kokkos 4.x (Spack, vendor modules): Kokkos::kokkos and Kokkos::kokkoskernels.
#
# This file is installed with the package so that A2SGDConfig.cmake recreates the same target
# in a consumer project.

include_guard(GLOBAL)

# A version range (3.4...<5) is rejected by 3.x's version file; 5.x needs C++20 and is refused below.
find_package(Kokkos 3.4 REQUIRED)
find_package(KokkosKernels REQUIRED)

if(Kokkos_VERSION VERSION_GREATER_EQUAL 5.0)
  message(FATAL_ERROR "A2SGD: Kokkos ${Kokkos_VERSION} found; supported are 3.4 to 4.x "
                      "(Kokkos 5 needs C++20).")
endif()

if(NOT TARGET A2SGD::Kokkos)
  add_library(A2SGD::Kokkos INTERFACE IMPORTED GLOBAL)
  if(TARGET Kokkos::kokkoskernels AND NOT DEFINED KokkosKernels_LIBRARIES)
    set(A2SGD_KOKKOS_FLAVOR "native")
    target_link_libraries(A2SGD::Kokkos INTERFACE Kokkos::kokkos Kokkos::kokkoskernels)
  else()
    set(A2SGD_KOKKOS_FLAVOR "tribits")
    target_include_directories(A2SGD::Kokkos SYSTEM INTERFACE ${Kokkos_INCLUDE_DIRS}
                               ${KokkosKernels_INCLUDE_DIRS} ${Kokkos_TPL_INCLUDE_DIRS})
    target_link_libraries(A2SGD::Kokkos INTERFACE ${KokkosKernels_LIBRARIES}
                          ${KokkosKernels_TPL_LIBRARIES})
  endif()
  message(STATUS "A2SGD: Kokkos ${Kokkos_VERSION} (${A2SGD_KOKKOS_FLAVOR} config), "
                 "devices: ${Kokkos_DEVICES}")
endif()

# A2SGD_REQUIRE_<BACKEND>=ON turns a silently missing backend into a configure error.
set(A2SGD_KOKKOS_BACKENDS SERIAL OPENMP THREADS CUDA HIP SYCL)
foreach(_backend IN LISTS A2SGD_KOKKOS_BACKENDS)
  if(A2SGD_REQUIRE_${_backend})
    kokkos_check(DEVICES ${_backend} RETURN_VALUE _a2sgd_has_backend)
    if(NOT _a2sgd_has_backend)
      message(FATAL_ERROR "A2SGD_REQUIRE_${_backend}=ON but Kokkos ${Kokkos_VERSION} was built "
                          "with devices '${Kokkos_DEVICES}'.")
    endif()
  endif()
endforeach()
