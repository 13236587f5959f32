# Sanitizer and fuzzing builds (docs/reliability.md).
#
#   A2SGD_SANITIZE        sanitizers for every target of the build, e.g. "address;undefined"
#                         (-fsanitize=..., frame pointers kept, no recovery: the first report fails)
#   A2SGD_ENABLE_FUZZING  the libFuzzer harnesses of tests/fuzz (Clang only; everything is then
#                         instrumented for coverage, and A2SGD_SANITIZE defaults to address;undefined)
#   A2SGD_FUZZ_SECONDS    how long each harness runs as a CTest test (label "fuzz"; default 60)
set(A2SGD_SANITIZE "" CACHE STRING "Sanitizers for every target, e.g. address;undefined (empty: none)")
option(A2SGD_ENABLE_FUZZING "Build the libFuzzer harnesses in tests/fuzz (Clang)" OFF)
set(A2SGD_FUZZ_SECONDS 60 CACHE STRING "Seconds each fuzz harness runs under CTest")

if(A2SGD_ENABLE_FUZZING)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "A2SGD_ENABLE_FUZZING needs Clang (libFuzzer), not ${CMAKE_CXX_COMPILER_ID}: "
                        "configure with -DCMAKE_CXX_COMPILER=clang++")
  endif()
  if(NOT A2SGD_SANITIZE)
    set(A2SGD_SANITIZE address undefined)
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

if(A2SGD_SANITIZE)
  string(REPLACE ";" "," _a2sgd_sanitizers "${A2SGD_SANITIZE}")
  add_compile_options(-fsanitize=${_a2sgd_sanitizers} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${_a2sgd_sanitizers})
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    # The instrumentation keeps some `omp simd` loops from vectorising; Clang says so per loop.
    add_compile_options(-Wno-pass-failed)
  endif()
  message(STATUS "A2SGD: sanitizers ${_a2sgd_sanitizers}")
endif()
