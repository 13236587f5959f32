# Test helpers.
#
# a2sgd_add_mpi_test(NAME <name> SOURCES <src>... [RANKS 1 2 4] [TIMEOUT s] [LIBRARIES ...])
#   Builds one Catch2 executable and registers it once per rank count N and host thread count T
#   (A2SGD_TEST_THREADS, with N T <= max(N, A2SGD_TEST_MAX_PROCESSORS)) as <name>_np<N> (T = 1) or
#   <name>_np<N>_t<T>, launched through MPIEXEC_EXECUTABLE / MPIEXEC_NUMPROC_FLAG /
#   MPIEXEC_PREFLAGS with OMP_NUM_THREADS = T and PROCESSORS = N T, so that `ctest -j` runs no
#   more threads than it was given cores; and again under each OpenBLAS core type of
#   A2SGD_PORTABILITY_BLAS_CORES (a2sgd_add_blas_variants).
#
# a2sgd_test_threads(<test> <T>)
#   The environment of a test whose processes use T host threads each; a2sgd_default_test_threads()
#   at the end of tests/ gives every other test T = 1.
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

# Host threads per rank: a threaded host backend (OpenMP, Threads) is tested at 1 and 2 threads
# per rank, as far as ranks x threads stay within the processors a test may claim.
kokkos_check(DEVICES OPENMP RETURN_VALUE _a2sgd_openmp)
kokkos_check(DEVICES THREADS RETURN_VALUE _a2sgd_threads)
if(_a2sgd_openmp OR _a2sgd_threads)
  set(_a2sgd_default_threads "1;2")
else()
  set(_a2sgd_default_threads "1")
endif()
set(A2SGD_TEST_THREADS "${_a2sgd_default_threads}" CACHE STRING
    "Host threads per rank at which each MPI unit test is registered (threaded Kokkos backends)")
set(A2SGD_TEST_MAX_PROCESSORS 4 CACHE STRING "Most ranks x threads one test may use")

function(a2sgd_test_threads test threads)
  # PASSIVE: a rank's idle threads sleep instead of spinning against the other ranks' threads.
  set_property(TEST ${test} APPEND PROPERTY ENVIRONMENT OMP_NUM_THREADS=${threads} OMP_PROC_BIND=false
                                                        OMP_WAIT_POLICY=PASSIVE)
endfunction()

function(a2sgd_default_test_threads)
  get_property(_tests DIRECTORY PROPERTY TESTS)
  foreach(_test IN LISTS _tests)
    get_test_property(${_test} ENVIRONMENT _env)
    if(NOT _env MATCHES "OMP_NUM_THREADS")
      a2sgd_test_threads(${_test} 1)
    endif()
  endforeach()
endfunction()
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

# a2sgd_add_mpi_test(NAME n SOURCES ... [RANKS ...] [LIBRARIES ...] [TIMEOUT s] [NOT_NUMERIC])
# NOT_NUMERIC: no reruns under other OpenBLAS kernel families (the test computes nothing with BLAS).
function(a2sgd_add_mpi_test)
  cmake_parse_arguments(ARG "NOT_NUMERIC" "NAME;TIMEOUT" "SOURCES;RANKS;LIBRARIES" ${ARGN})
  if(NOT ARG_RANKS)
    set(ARG_RANKS ${A2SGD_TEST_RANKS})
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  target_link_libraries(${ARG_NAME} PRIVATE a2sgd_test_main ${ARG_LIBRARIES})
  foreach(_np IN LISTS ARG_RANKS)
    foreach(_threads IN LISTS A2SGD_TEST_THREADS)
      math(EXPR _processors "${_np} * ${_threads}")
      if(_threads GREATER 1 AND _processors GREATER A2SGD_TEST_MAX_PROCESSORS)
        continue()
      endif()
      set(_name ${ARG_NAME}_np${_np})
      set(_labels "mpi;np${_np}")
      if(_threads GREATER 1)
        set(_name ${_name}_t${_threads})
        list(APPEND _labels threads)
      endif()
      set(_command ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${_np} ${MPIEXEC_PREFLAGS} $<TARGET_FILE:${ARG_NAME}>
                   ${MPIEXEC_POSTFLAGS})
      add_test(NAME ${_name} COMMAND ${_command})
      set_tests_properties(${_name} PROPERTIES PROCESSORS ${_processors} TIMEOUT ${ARG_TIMEOUT} LABELS "${_labels}")
      a2sgd_test_threads(${_name} ${_threads})
      if(_threads EQUAL 1 AND NOT ARG_NOT_NUMERIC)
        a2sgd_add_blas_variants(NAME ${_name} PROCESSORS ${_np} TIMEOUT ${ARG_TIMEOUT} LABELS "${_labels}"
                                COMMAND ${_command})
      endif()
    endforeach()
  endforeach()
endfunction()
