# Finds Kokkos (3.4 to 4.x) and Kokkos Kernels for the build and defines A2SGD::Kokkos
# (cmake/A2SGDKokkosTarget.cmake). An installed package finds them through A2SGDConfig.cmake.
include_guard(GLOBAL)

# A version range (3.4...<5) is rejected by 3.x's version file; 5.x needs C++20 and is refused below.
find_package(Kokkos 3.4 REQUIRED)
find_package(KokkosKernels REQUIRED)

if(Kokkos_VERSION VERSION_GREATER_EQUAL 5.0)
  message(FATAL_ERROR "A2SGD: Kokkos ${Kokkos_VERSION} found; supported are 3.4 to 4.x "
                      "(Kokkos 5 needs C++20).")
endif()

include(${CMAKE_CURRENT_LIST_DIR}/A2SGDKokkosTarget.cmake)
message(STATUS "A2SGD: Kokkos ${Kokkos_VERSION} (${A2SGD_KOKKOS_FLAVOR} config), devices: ${Kokkos_DEVICES}")

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
