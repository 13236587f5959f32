# Compiles and links the whole project (library, apps, tests) against a GPU-enabled Kokkos, so
# that the device branches of every kernel are compiled somewhere even on a machine without a
# GPU. Nothing is run. The check fails on any compiler warning that points into the project's
# sources (warnings from Kokkos, Kokkos Kernels or the vendor headers are not ours).
#
#   cmake -DBACKEND=CUDA|HIP -DSOURCE=<a2sgd> -DBINARY=<scratch dir> -DKOKKOS_ROOT=<prefix> [-DJOBS=n]
#         -P check_device_compile.cmake
#
# KOKKOS_ROOT must hold a Kokkos and Kokkos Kernels built with that backend. CUDA compiles with
# the nvcc_wrapper installed with Kokkos (nvcc from PATH, CUDA_HOME or /usr/local/cuda), HIP with
# hipcc. Without them the check prints "A2SGD_DEVICE_COMPILE_CHECK skipped" and the reason, and
# CTest marks it skipped.
macro(skip reason)
  message("A2SGD_DEVICE_COMPILE_CHECK skipped: ${reason}")
  return()
endmacro()

if(NOT KOKKOS_ROOT OR NOT EXISTS "${KOKKOS_ROOT}")
  skip("no ${BACKEND} Kokkos given (A2SGD_${BACKEND}_KOKKOS_ROOT is '${KOKKOS_ROOT}')")
endif()
file(GLOB config "${KOKKOS_ROOT}/lib*/cmake/Kokkos/KokkosConfigCommon.cmake")
if(NOT config)
  skip("${KOKKOS_ROOT} holds no Kokkos CMake package")
endif()
file(READ "${config}" text)
if(NOT text MATCHES "${BACKEND}")
  skip("the Kokkos in ${KOKKOS_ROOT} has no ${BACKEND} backend")
endif()
if(BACKEND STREQUAL "CUDA")
  set(compiler "${KOKKOS_ROOT}/bin/nvcc_wrapper")
  find_program(NVCC nvcc PATHS /usr/local/cuda/bin ENV CUDA_HOME PATH_SUFFIXES bin)
  if(NOT NVCC OR NOT EXISTS "${compiler}")
    skip("nvcc or ${compiler} not found (PATH, CUDA_HOME, /usr/local/cuda/bin)")
  endif()
  get_filename_component(nvcc_dir "${NVCC}" DIRECTORY)
  set(ENV{PATH} "${nvcc_dir}:$ENV{PATH}")
elseif(BACKEND STREQUAL "HIP")
  find_program(compiler hipcc PATHS /opt/rocm/bin ENV ROCM_PATH PATH_SUFFIXES bin)
  if(NOT compiler)
    skip("hipcc not found (PATH, ROCM_PATH, /opt/rocm/bin)")
  endif()
else()
  message(FATAL_ERROR "BACKEND must be CUDA or HIP, not '${BACKEND}'")
endif()
if(NOT JOBS)
  set(JOBS 2)
endif()

execute_process(
  COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${BINARY} -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${compiler}
          -DCMAKE_PREFIX_PATH=${KOKKOS_ROOT} -DA2SGD_REQUIRE_${BACKEND}=ON -DA2SGD_PORTABILITY_BLAS_CORES=
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring against the ${BACKEND} Kokkos failed:\n${out}\n${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BINARY} --parallel ${JOBS} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
string(REGEX MATCHALL "[^\n]*${SOURCE}/[^\n]*warning[^\n]*" ours "${out}\n${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the ${BACKEND} build failed:\n${out}\n${err}")
endif()
if(ours)
  string(REPLACE ";" "\n" ours "${ours}")
  message(FATAL_ERROR "the ${BACKEND} build warns in a2sgd's sources:\n${ours}")
endif()
message("${BACKEND} build of library, apps and tests: compiled and linked without warnings in a2sgd's sources")
