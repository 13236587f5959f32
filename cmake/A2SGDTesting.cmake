# Test helpers.
#
# a2sgd_add_mpi_test(NAME <name> SOURCES <src>... [RANKS 1 2 4] [TIMEOUT s] [LIBRARIES ...])
#   Builds one Catch2 executable and registers it once per rank count as <name>_np<N>,
#   launched through MPIEXEC_EXECUTABLE / MPIEXEC_NUMPROC_FLAG / MPIEXEC_PREFLAGS with the
#   PROCESSORS property set so that `ctest -j` does not oversubscribe more than it must, and
#   again under each OpenBLAS core type of A2SGD_PORTABILITY_BLAS_CORES (a2sgd_add_blas_variants).
#
# a2sgd_add_blas_variants(NAME <name> PROCESSORS <n> TIMEOUT <s> LABELS <l>... [CORES <c>...] COMMAND <cmd>...)
#   Registers <name>_blas_<Core> for every core type (CORES, default A2SGD_PORTABILITY_BLAS_CORES): the same command run with OpenBLAS forced to
#   that kernel family (tests/blas_core.sh), labelled `portability`; skipped where the CPU cannot
#   run it. The GEMM rounding of other CPUs is then checked on this one (docs/testing.md).

include_guard(GLOBAL)

# Open MPI refuses more ranks than cores unless told; ctest runs the 4-rank tests on 2 cores.
if(NOT A2SGD_MPIEXEC_PREFLAGS_CHECKED)
  set(A2SGD_MPIEXEC_PREFLAGS_CHECKED TRUE CACHE INTERNAL "")
  execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _a2sgd_mpiexec_version
                  ERROR_QUIET)
  if(_a2sgd_mpiexec_version MATCHES "Open MPI|OpenRTE" AND NOT MPIEXEC_PREFLAGS)
    set(MPIEXEC_PREFLAGS "--oversubscribe" CACHE STRING "Flags passed to mpiexec before the executable" FORCE)
  endif()
endif()

set(A2SGD_TEST_RANKS "1;2;4" CACHE STRING "Rank counts at which each MPI test is registered")
set(A2SGD_PORTABILITY_BLAS_CORES "Prescott;Sandybridge;SkylakeX" CACHE STRING
    "OpenBLAS core types under which the numeric tests run again (label portability; empty: none)")

function(a2sgd_add_blas_variants)
  cmake_parse_arguments(ARG "" "NAME;PROCESSORS;TIMEOUT" "LABELS;CORES;COMMAND" ${ARGN})
  if(NOT DEFINED ARG_CORES)
    set(ARG_CORES ${A2SGD_PORTABILITY_BLAS_CORES})
  endif()
  foreach(_core IN LISTS ARG_CORES)
    add_test(NAME ${ARG_NAME}_blas_${_core} COMMAND bash ${PROJECT_SOURCE_DIR}/tests/blas_core.sh ${_core} ${ARG_COMMAND})
    set_tests_properties(${ARG_NAME}_blas_${_core} PROPERTIES PROCESSORS ${ARG_PROCESSORS} TIMEOUT ${ARG_TIMEOUT}
                         LABELS "${ARG_LABELS};portability" SKIP_RETURN_CODE 77)
  endforeach()
endfunction()

function(a2sgd_add_mpi_test)
  cmake_parse_arguments(ARG "" "NAME;TIMEOUT" "SOURCES;RANKS;LIBRARIES" ${ARGN})
  if(NOT ARG_RANKS)
    set(ARG_RANKS ${A2SGD_TEST_RANKS})
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  target_link_libraries(${ARG_NAME} PRIVATE a2sgd_test_main ${ARG_LIBRARIES})
  foreach(_np IN LISTS ARG_RANKS)
    set(_command ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${_np} ${MPIEXEC_PREFLAGS} $<TARGET_FILE:${ARG_NAME}>
                 ${MPIEXEC_POSTFLAGS})
    add_test(NAME ${ARG_NAME}_np${_np} COMMAND ${_command})
    set_tests_properties(${ARG_NAME}_np${_np} PROPERTIES PROCESSORS ${_np} TIMEOUT ${ARG_TIMEOUT}
                         LABELS "mpi;np${_np}")
    a2sgd_add_blas_variants(NAME ${ARG_NAME}_np${_np} PROCESSORS ${_np} TIMEOUT ${ARG_TIMEOUT} LABELS "mpi;np${_np}"
                            COMMAND ${_command})
  endforeach()
endfunction()
