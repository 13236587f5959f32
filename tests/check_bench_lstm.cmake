# a2sgd-bench-lstm on one rank at small sizes: the JSON line holds every figure; the step's GEMM
# work is the count of the products the LSTM and decoder issue (formula below, written apart from
# the tool's); a plain GEMM never beats the core's measured FMA peak (a peak below it means the
# peak loop is broken, e.g. its accumulators spilled to memory); bad options exit 2 with one
# message.
include(${CMAKE_CURRENT_LIST_DIR}/ExpectExit.cmake)

set(V 300)
set(H 48)
set(L 3)
set(T 6)
set(C 5)
expect_exit(1 0 "" a2sgd-bench-lstm --vocab ${V} --hidden ${H} --layers ${L} --bptt ${T} --batch-size ${C} --repeats 3 --warmup 1 --json)
string(STRIP "${last_out}" json)
message("${json}")
foreach(key step_s tokens_per_s decoder_gflops gemm_gflops softmax_s step_gemm_flops)
  string(JSON value ERROR_VARIABLE bad GET "${json}" ${key})
  if(bad OR NOT value GREATER 0)
    message(FATAL_ERROR "${key} missing or not positive: '${value}' ${bad}")
  endif()
endforeach()

# Rows R = T C. Decoder: Z = Y W^T, dW = dZ^T Y, dY = dZ W. Each LSTM layer (input width H here,
# gates 4H): forward X W_ih^T over all rows and h W_hh^T per step; backward dgates W_hh for every
# step but the first, dW_ih, dW_hh and the input gradient dgates W_ih.
math(EXPR R "${T} * ${C}")
math(EXPR layer "2 * ${R} * 4 * ${H} * (${H} + ${H}) + 2 * (${R} - ${C}) * 4 * ${H} * ${H} + 2 * ${R} * 4 * ${H} * (2 * ${H} + ${H})")
math(EXPR want "6 * ${R} * ${H} * ${V} + ${L} * ${layer}")
string(JSON got GET "${json}" step_gemm_flops)
if(NOT got EQUAL want)
  message(FATAL_ERROR "step_gemm_flops ${got}, expected ${want}")
endif()

# The widest ISA's peak (AVX-512, else AVX2) bounds any GEMM the BLAS can run.
string(JSON gemm GET "${json}" gemm_gflops)
set(widest "")
foreach(isa avx512 avx2)
  string(JSON peak ERROR_VARIABLE absent GET "${json}" fma_peak_${isa}_gflops)
  if(NOT absent)
    if(NOT peak GREATER 0)
      message(FATAL_ERROR "fma_peak_${isa}_gflops = ${peak}")
    endif()
    if(widest STREQUAL "")
      set(widest ${isa})
      set(widest_peak ${peak})
    endif()
  endif()
endforeach()
if(CMAKE_HOST_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64" AND widest STREQUAL "")
  message(FATAL_ERROR "no FMA peak measured on an x86-64 host")
endif()
if(NOT widest STREQUAL "" AND gemm GREATER widest_peak)
  message(FATAL_ERROR "plain GEMMs at ${gemm} GFLOP/s beat the measured ${widest} FMA peak, ${widest_peak} GFLOP/s")
endif()

expect_exit(1 2 "sizes must be positive" a2sgd-bench-lstm --hidden 0)
expect_exit(1 2 "sizes must be positive" a2sgd-bench-lstm --bptt -1)
expect_exit(1 2 "no-such-option" a2sgd-bench-lstm --no-such-option)
