# Test helpers.
#
# a2sgd_add_mpi_test(NAME <name> SOURCES <src>... [RANKS 1 2 4] [TIMEOUT s] [LIBRARIES ...])
#   Builds one Catch2 executable and registers it once per rank count as <name>_np<N>,
#   launched through MPIEXEC_EXECUTABLE / MPIEXEC_NUMPROC_FLAG / MPIEXEC_PREFLAGS with the
#   PROCESSORS property set so that `ctest -j` does not oversubscribe more than it must.

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
    add_test(NAME ${ARG_NAME}_np${_np}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${_np} ${MPIEXEC_PREFLAGS}
                     $<TARGET_FILE:${ARG_NAME}> ${MPIEXEC_POSTFLAGS})
    set_tests_properties(${ARG_NAME}_np${_np} PROPERTIES PROCESSORS ${_np} TIMEOUT ${ARG_TIMEOUT}
                         LABELS "mpi;np${_np}")
  endforeach()
endfunction()
