# CTest dashboard driver for a2sgd: configure, build, test (and optionally coverage and memcheck)
# one build tree and submit the results to CDash.
#
#   ctest -S cmake/ctest/dashboard.cmake [-V] [-D<variable>=<value> ...]
#
# Variables (all optional; -D on the ctest command line, most also from the environment):
#   DASHBOARD_MODEL           Experimental (default) | Nightly | Continuous. Nightly and Continuous
#                             pull the source tree (git) first; Continuous stops without building
#                             when the pull brought nothing new.
#   DASHBOARD_SOURCE_DIR      the a2sgd checkout (default: the one holding this script)
#   DASHBOARD_BINARY_DIR      the build tree (default: <source>/build-dashboard), emptied first
#   CTEST_SITE, CTEST_BUILD_NAME   how the dashboard lists this machine and build (default: host
#                             name; "<OS>-<compiler>-<build type>")
#   CTEST_BUILD_CONFIGURATION CMake build type (default Release; Debug with coverage)
#   DASHBOARD_CONFIGURE_OPTIONS  a ;-list of extra -D options for a2sgd's configure
#   DASHBOARD_BUILD_TARGET    build only this target (default: all)
#   DASHBOARD_TEST_INCLUDE, DASHBOARD_TEST_EXCLUDE   regular expressions of test names
#   DASHBOARD_TEST_EXCLUDE_LABEL  labels not run (default: "compile", the device compile checks)
#   DASHBOARD_PARALLEL_LEVEL  build jobs and ctest -j (default: the number of cores)
#   DASHBOARD_COVERAGE=ON     compile with --coverage and submit gcov coverage (Coverage.xml)
#   DASHBOARD_MEMCHECK=ON     run the 1-rank tests (label np1) again under valgrind memcheck; the
#                             test processes are started by mpiexec, so valgrind follows children
#   A2SGD_CDASH_SUBMIT_URL    where to submit (-D or environment; no default, the project keeps no
#                             public dashboard): without one, nothing is submitted and the results
#                             stay in <build>/Testing.
# The script's exit code is non-zero when configure or build fail or a test fails.
cmake_minimum_required(VERSION 3.20)

macro(dashboard_default var default)
  if(NOT DEFINED ${var})
    if(DEFINED ENV{${var}} AND NOT "$ENV{${var}}" STREQUAL "")
      set(${var} "$ENV{${var}}")
    else()
      set(${var} "${default}")
    endif()
  endif()
endmacro()

get_filename_component(_a2sgd_script_source "${CMAKE_CURRENT_LIST_DIR}/../.." ABSOLUTE)
dashboard_default(DASHBOARD_MODEL Experimental)
dashboard_default(DASHBOARD_SOURCE_DIR "${_a2sgd_script_source}")
dashboard_default(DASHBOARD_BINARY_DIR "${DASHBOARD_SOURCE_DIR}/build-dashboard")
dashboard_default(DASHBOARD_COVERAGE OFF)
dashboard_default(DASHBOARD_MEMCHECK OFF)
dashboard_default(DASHBOARD_TEST_EXCLUDE_LABEL "compile")
cmake_host_system_information(RESULT _a2sgd_cores QUERY NUMBER_OF_LOGICAL_CORES)
dashboard_default(DASHBOARD_PARALLEL_LEVEL ${_a2sgd_cores})
if(DASHBOARD_COVERAGE)
  dashboard_default(CTEST_BUILD_CONFIGURATION Debug)
else()
  dashboard_default(CTEST_BUILD_CONFIGURATION Release)
endif()
if(NOT DASHBOARD_MODEL MATCHES "^(Experimental|Nightly|Continuous)$")
  message(FATAL_ERROR "DASHBOARD_MODEL must be Experimental, Nightly or Continuous, not '${DASHBOARD_MODEL}'")
endif()

set(CTEST_SOURCE_DIRECTORY "${DASHBOARD_SOURCE_DIR}")
set(CTEST_BINARY_DIRECTORY "${DASHBOARD_BINARY_DIR}")
set(CTEST_CMAKE_GENERATOR "Unix Makefiles")
cmake_host_system_information(RESULT _a2sgd_host QUERY HOSTNAME)
dashboard_default(CTEST_SITE "${_a2sgd_host}")
find_program(_a2sgd_cxx_compiler NAMES c++ g++ clang++)
execute_process(COMMAND ${_a2sgd_cxx_compiler} -dumpfullversion OUTPUT_VARIABLE _a2sgd_cxx_version
                OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
get_filename_component(_a2sgd_cxx_name "${_a2sgd_cxx_compiler}" NAME)
dashboard_default(CTEST_BUILD_NAME "${CMAKE_HOST_SYSTEM_NAME}-${_a2sgd_cxx_name}-${_a2sgd_cxx_version}-${CTEST_BUILD_CONFIGURATION}")

# CTestConfig.cmake (project name, nightly start time) is read by ctest_start from the source tree;
# the submit URL is A2SGD_CDASH_SUBMIT_URL (-D or environment), which CTestConfig.cmake also reads.
dashboard_default(A2SGD_CDASH_SUBMIT_URL "")

set(_a2sgd_options "-DCMAKE_BUILD_TYPE=${CTEST_BUILD_CONFIGURATION}" ${DASHBOARD_CONFIGURE_OPTIONS})
if(DASHBOARD_COVERAGE)
  find_program(CTEST_COVERAGE_COMMAND NAMES gcov)
  if(NOT CTEST_COVERAGE_COMMAND)
    message(FATAL_ERROR "DASHBOARD_COVERAGE=ON needs gcov")
  endif()
  list(APPEND _a2sgd_options "-DCMAKE_CXX_FLAGS=--coverage" "-DCMAKE_EXE_LINKER_FLAGS=--coverage"
       "-DCMAKE_SHARED_LINKER_FLAGS=--coverage")
  # Coverage of the library's sources, not of the tests or third-party headers.
  set(CTEST_CUSTOM_COVERAGE_EXCLUDE ".*/tests/.*" ".*/apps/.*" "/usr/.*" ".*/kokkos.*")
endif()
if(DASHBOARD_MEMCHECK)
  find_program(CTEST_MEMORYCHECK_COMMAND NAMES valgrind)
  if(NOT CTEST_MEMORYCHECK_COMMAND)
    message(FATAL_ERROR "DASHBOARD_MEMCHECK=ON needs valgrind")
  endif()
  set(CTEST_MEMORYCHECK_TYPE Valgrind)
  set(CTEST_MEMORYCHECK_COMMAND_OPTIONS "--trace-children=yes --leak-check=full --error-exitcode=0 --num-callers=30")
endif()
set(CTEST_CONFIGURE_COMMAND "\"${CMAKE_COMMAND}\" -S \"${CTEST_SOURCE_DIRECTORY}\" -B \"${CTEST_BINARY_DIRECTORY}\"")
foreach(_option IN LISTS _a2sgd_options)
  string(APPEND CTEST_CONFIGURE_COMMAND " \"${_option}\"")
endforeach()
set(CTEST_BUILD_FLAGS "-j${DASHBOARD_PARALLEL_LEVEL}")
if(DASHBOARD_BUILD_TARGET)
  set(CTEST_BUILD_TARGET "${DASHBOARD_BUILD_TARGET}")
endif()

ctest_empty_binary_directory("${CTEST_BINARY_DIRECTORY}")
ctest_start(${DASHBOARD_MODEL})

# Update step: a git checkout records its revision; Nightly and Continuous pull first.
find_program(CTEST_GIT_COMMAND NAMES git)
if(CTEST_GIT_COMMAND AND EXISTS "${CTEST_SOURCE_DIRECTORY}/.git")
  set(CTEST_UPDATE_COMMAND "${CTEST_GIT_COMMAND}")
  if(DASHBOARD_MODEL STREQUAL "Experimental")
    set(CTEST_UPDATE_VERSION_ONLY ON)
  endif()
  ctest_update(RETURN_VALUE _a2sgd_updated)
  if(DASHBOARD_MODEL STREQUAL "Continuous" AND _a2sgd_updated EQUAL 0)
    message(STATUS "a2sgd dashboard: Continuous, nothing new in ${CTEST_SOURCE_DIRECTORY}")
    return()
  endif()
endif()

ctest_configure(RETURN_VALUE _a2sgd_configure)
ctest_read_custom_files("${CTEST_BINARY_DIRECTORY}")
set(_a2sgd_build_errors 0)
if(_a2sgd_configure EQUAL 0)
  ctest_build(NUMBER_ERRORS _a2sgd_build_errors RETURN_VALUE _a2sgd_build)
  if(NOT _a2sgd_build EQUAL 0 AND _a2sgd_build_errors EQUAL 0)
    set(_a2sgd_build_errors 1)
  endif()
endif()
set(_a2sgd_test 0)
if(_a2sgd_configure EQUAL 0 AND _a2sgd_build_errors EQUAL 0)
  set(_a2sgd_test_args PARALLEL_LEVEL ${DASHBOARD_PARALLEL_LEVEL})
  foreach(_arg INCLUDE EXCLUDE)
    if(DASHBOARD_TEST_${_arg})
      list(APPEND _a2sgd_test_args ${_arg} "${DASHBOARD_TEST_${_arg}}")
    endif()
  endforeach()
  if(DASHBOARD_TEST_EXCLUDE_LABEL)
    list(APPEND _a2sgd_test_args EXCLUDE_LABEL "${DASHBOARD_TEST_EXCLUDE_LABEL}")
  endif()
  ctest_test(${_a2sgd_test_args} RETURN_VALUE _a2sgd_test)
  if(DASHBOARD_COVERAGE)
    ctest_coverage()
  endif()
  if(DASHBOARD_MEMCHECK)
    set(_a2sgd_memcheck_args INCLUDE_LABEL np1)
    if(DASHBOARD_TEST_INCLUDE)
      list(APPEND _a2sgd_memcheck_args INCLUDE "${DASHBOARD_TEST_INCLUDE}")
    endif()
    ctest_memcheck(${_a2sgd_memcheck_args} PARALLEL_LEVEL ${DASHBOARD_PARALLEL_LEVEL})
  endif()
endif()

if(A2SGD_CDASH_SUBMIT_URL)
  ctest_submit(SUBMIT_URL "${A2SGD_CDASH_SUBMIT_URL}" RETRY_COUNT 2 RETRY_DELAY 5 RETURN_VALUE _a2sgd_submit)
  if(NOT _a2sgd_submit EQUAL 0)
    message(SEND_ERROR "a2sgd dashboard: submitting to ${A2SGD_CDASH_SUBMIT_URL} failed")
  endif()
else()
  message(STATUS "a2sgd dashboard: no A2SGD_CDASH_SUBMIT_URL: results left in ${CTEST_BINARY_DIRECTORY}/Testing")
endif()

if(NOT _a2sgd_configure EQUAL 0)
  message(FATAL_ERROR "a2sgd dashboard: configure failed")
elseif(NOT _a2sgd_build_errors EQUAL 0)
  message(FATAL_ERROR "a2sgd dashboard: build failed (${_a2sgd_build_errors} errors)")
elseif(NOT _a2sgd_test EQUAL 0)
  message(FATAL_ERROR "a2sgd dashboard: tests failed")
endif()
