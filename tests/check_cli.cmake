# a2sgd-train's command line on 2 ranks: an INI config file with command-line overrides, and bad
# input: each bad case must end with the stated exit code and one clear message, on every rank,
# without hanging (the test's TIMEOUT catches a hang).
include(${CMAKE_CURRENT_LIST_DIR}/ExpectExit.cmake)
set(syn --dataset synthetic --synthetic-train 400 --synthetic-test 100 --synthetic-features 8
        --synthetic-classes 2 --no-progress-bar --log-every 1000)
set(bad_dir ${WORKDIR}/bad_idx)
file(MAKE_DIRECTORY ${bad_dir})
foreach(f train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)
  file(WRITE ${bad_dir}/${f} "not an idx file")
endforeach()
file(WRITE ${WORKDIR}/bad.ini "lr = 0.1\nno-such-option = 3\n")

function(expect code pattern)
  expect_exit(2 ${code} "${pattern}" a2sgd-train ${ARGN})
endfunction()

expect(2 "--batch-size -5: must be positive" ${syn} --batch-size -5)
string(REPLACE "," ", " _valid "${METHODS}")  # every registered method, in order
expect(2 "unknown method \\(valid: ${_valid}\\)" ${syn} --compressor qsgd2)
expect(2 "unknown optimizer \"adamw\"" ${syn} --optimizer adamw)
expect(2 "--qsgd-levels 0: must be in \\[1, 16777215\\]" ${syn} --compressor qsgd --qsgd-levels 0)
expect(2 "--powersgd-rank 0: must be in \\[1, 1024\\]" ${syn} --compressor powersgd --powersgd-rank 0)
expect(2 "--topk-ratio 2: must be in \\(0, 1\\]" ${syn} --compressor topk --topk-ratio 2)
# Divergence with a baseline: a non-finite gradient stops every rank in the same collective.
expect(3 "training diverged" ${syn} --compressor qsgd --lr 1e30)
expect(3 "training diverged" ${syn} --compressor powersgd --lr 1e30)
expect(2 "unrecognised option '--no-such-flag'" ${syn} --no-such-flag)
# Moment schemes the optimizer does not define, refused before training.
expect(2 "frozen: the frozen moment scheme is defined for Adam only" ${syn} --optimizer momentum --a2sgd-moments frozen)
expect(2 "frozen: .*needs at least one warm-up step" ${syn} --optimizer adam --a2sgd-moments frozen)
expect(2 "local: Nesterov momentum is not defined" ${syn} --optimizer momentum --nesterov)
expect(2 "unknown moment scheme \"late\" \\(valid: decoded, local, frozen\\)" ${syn} --a2sgd-moments late)
# The first moment at the periodic average: refused without a moment, without averaging, and with
# Adam's average (m without v).
expect(2 "state-at-average reset: plain SGD has no optimizer state" ${syn} --compressor a2sgd --a2sgd-average-every 10
       --a2sgd-state-at-average reset)
expect(2 "state-at-average average: acts at the periodic average: needs --average-every K > 0" ${syn}
       --compressor a2sgd --optimizer momentum --a2sgd-average-every 0 --a2sgd-state-at-average average)
# The averaging policy (every method's): its own checks, and an alias that disagrees with it.
expect(2 "--outer-optimizer nesterov: acts at the periodic average: needs --average-every K > 0" ${syn}
       --compressor dense --outer-optimizer nesterov)
expect(2 "--outer-lr 0: must be in \\(0, 10\\]" ${syn} --compressor local --outer-lr 0)
expect(2 "--outer-momentum 1: must be in \\[0, 1\\)" ${syn} --compressor local --outer-momentum 1)
expect(2 "--outer-optimizer lookahead: valid: average, momentum, nesterov" ${syn} --outer-optimizer lookahead)
expect(2 "--average-every -3: must not be negative" ${syn} --compressor local --average-every -3)
expect(2 "--average-every 20: differs from --a2sgd-average-every 10" ${syn} --compressor a2sgd
       --a2sgd-average-every 10 --average-every 20)
expect(2 "--state-at-average reset: plain SGD has no optimizer state" ${syn} --compressor local --state-at-average reset)
expect(2 "--local-warmup-steps -1: must not be negative" ${syn} --compressor local --local-warmup-steps -1)
expect(2 "state-at-average average: with Adam the averaged m is not bounded" ${syn} --compressor a2sgd
       --optimizer adam --a2sgd-state-at-average average)
expect(2 "--divergence-threshold -1: must be >= 0" ${syn} --divergence-threshold -1)
expect(2 "--project-ranks 2,,4: \"\" is not a rank count in \\[1, 16777216\\]" ${syn} --project-ranks 2,,4)
expect(2 "--project-ranks 0: \"0\" is not a rank count" ${syn} --project-ranks 0)
expect(2 "--project-links 25:1,25.2:3: two links of 25 Gb/s" ${syn} --project-links 25:1,25.2:3)
expect(2 "--project-links 25:x: link \"25:x\": expected GBIT_PER_S" ${syn} --project-links 25:x)
# Values that would be accepted silently and train nothing, or fail late (exit 2, before training).
expect(2 "unexpected argument 'stray' \\(every option starts with --" ${syn} stray)
expect(2 "randomk: ratio 1e-300 of n = [0-9]+ values selects none \\(k = 0\\); the valid range is \\[" ${syn}
       --compressor randomk --randomk-ratio 1e-300)
expect(2 "powersgd: rank 1000 compresses none of the model's weight matrices.*valid range for this model is \\[1, 127\\]"
       ${syn} --compressor powersgd --powersgd-rank 1000)
expect(2 "--synthetic-classes 4294967301: must be in \\[2, 2147483647\\]" --dataset synthetic
       --synthetic-classes 4294967301 --no-progress-bar)
expect(2 "--synthetic-features 100000000000: with 400 \\+ 100 samples needs .* GB, more than this machine's"
       --dataset synthetic --synthetic-train 400 --synthetic-test 100 --synthetic-features 100000000000)
expect(2 "--hidden 256,x: is not a comma-separated list of positive widths" ${syn} --hidden 256,x)
expect(2 "the argument \\('abc'\\) for option '--lr' is invalid" ${syn} --lr abc)
expect(2 "--epochs 0: must be positive" ${syn} --epochs 0)
# Boost re-expands placeholders found in the user's own text (what() looped forever on these).
expect(2 "the argument \\('%value%'\\) for option '--steps' is invalid" ${syn} --steps %value%)
expect(2 "unrecognised option '--%canonical_option%'" ${syn} --%canonical_option%)
# Kokkos' own options, checked before Kokkos parses them: exit 2 on every rank, no abort.
expect(2 "--kokkos-threads: 'abc' is not a non-negative integer" ${syn} --kokkos-threads=abc)
expect(2 "--kokkos-num-devices: '-5' is not a non-negative integer" ${syn} --kokkos-num-devices=-5)
expect(2 "--kokkos-threads: '99999999999' is not a non-negative integer" ${syn} --kokkos-threads=99999999999)
# 2^62 evaluation rows: rows x width x 4 bytes would wrap around to a small allocation.
expect(2 "a batch of 4611686018427387904 rows of [0-9]+ activations does not fit in memory" ${syn} --eval-batch 4611686018427387904)
expect(2 "exceeds the 200 training samples of each rank" ${syn} --batch-size 500)
expect(2 "data directory /nonexistent/fmnist does not exist" --data-dir /nonexistent/fmnist)
expect(2 "bad_idx/train-images-idx3-ubyte: magic number 0x6e6f7420 is not that of an IDX file" --data-dir ${bad_dir})
expect(2 "--metrics /nonexistent/dir/m.jsonl: cannot open for writing" ${syn} --metrics /nonexistent/dir/m.jsonl)
# Output that cannot be written is an error, not a success: a full disk for the metrics (exit 2 at
# the end, on every rank), a checkpoint directory that cannot hold files (exit 2 before training).
expect(2 "--metrics /dev/full: writing failed \\(No space left on device\\)" ${syn} --metrics /dev/full)
file(WRITE ${WORKDIR}/cli_not_a_directory "")
expect(2 "checkpoint directory ${WORKDIR}/cli_not_a_directory/ckpt: " ${syn} --checkpoint-dir ${WORKDIR}/cli_not_a_directory/ckpt)
expect(2 "--config /nonexistent.ini: no such file" ${syn} --config /nonexistent.ini)
# The heap policy comes from the environment and is read before MPI_Init; a bad value on one
# rank alone (ranks may be started with different environments) still stops every rank.
set(ENV{A2SGD_HEAP_POLICY} sometimes)
expect(2 "A2SGD_HEAP_POLICY=sometimes: unknown heap policy \"sometimes\" \\(valid: keep, system\\)" ${syn})
unset(ENV{A2SGD_HEAP_POLICY})
execute_process(
  COMMAND ${MPIEXEC} ${NPFLAG} 2 ${_preflags} sh -c
          "if [ \"\${OMPI_COMM_WORLD_RANK:-\$PMI_RANK}\" = 1 ]; then export A2SGD_HEAP_POLICY=rank1only; fi; exec \"\$0\" \"\$@\""
          ${EXE} ${syn}
  TIMEOUT 120 OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
string(REGEX MATCHALL "a2sgd-train: " reports "${err}")
list(LENGTH reports n)
if(NOT rc EQUAL 2 OR NOT n EQUAL 1
   OR NOT "${err}" MATCHES "a2sgd-train: error: A2SGD_HEAP_POLICY=rank1only: unknown heap policy")
  message(FATAL_ERROR "a bad heap policy on rank 1 alone: exit code ${rc}, expected 2 and one report\n${out}${err}")
endif()
message(STATUS "ok (${rc}): A2SGD_HEAP_POLICY on rank 1 alone")
# Config files that are not text, or not files, or name themselves; a value that does not parse is
# an error even where the command line overrides it.
expect(2 "--config ${WORKDIR}: not a regular file" ${syn} --config ${WORKDIR})
string(ASCII 1 control)
file(WRITE ${WORKDIR}/binary.ini "steps = 3${control}\n")
expect(2 "--config ${WORKDIR}/binary.ini: line 1 holds a control byte" ${syn} --config ${WORKDIR}/binary.ini)
file(WRITE ${WORKDIR}/self.ini "config = ${WORKDIR}/self.ini\n")
expect(2 "a config file cannot name a config file" ${syn} --config ${WORKDIR}/self.ini)
file(WRITE ${WORKDIR}/unparsable.ini "lr = abc\n")
expect(2 "the argument \\('abc'\\) for option 'lr' is invalid" ${syn} --config ${WORKDIR}/unparsable.ini --lr 0.1)
expect(2 "no-such-option" ${syn} --config ${WORKDIR}/bad.ini)
file(WRITE ${WORKDIR}/placeholder.ini "steps = %value%%original_token%\n")
expect(2 "the argument \\('%value%%original_token%'\\) for option 'steps' is invalid" ${syn}
       --config ${WORKDIR}/placeholder.ini)
# Divergence: a huge learning rate overflows the loss; every rank stops at the same step.
expect(3 "training diverged: .*step [0-9]+.*Try a smaller learning rate" ${syn} --compressor dense --lr 1e30)
expect(3 "training diverged: .*Try a smaller learning rate" ${syn} --compressor a2sgd --lr 1e30)

# --config FILE with a command-line override; the effective configuration lands in --output-dir.
file(WRITE ${WORKDIR}/good.ini "compressor = dense\nlr = 0.01\nsteps = 5\nhidden = 8\n")
file(REMOVE_RECURSE ${WORKDIR}/cli_out)
execute_process(COMMAND ${MPIEXEC} ${NPFLAG} 2 ${_preflags} ${EXE} ${syn} --config ${WORKDIR}/good.ini --lr 0.02
                        --output-dir ${WORKDIR}/cli_out --quiet
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "--config run failed (${rc}): ${out}${err}")
endif()
file(READ ${WORKDIR}/cli_out/config.ini ini)
foreach(line "compressor = dense" "lr = 0.02" "steps = 5" "hidden = 8" "optimizer = momentum")
  string(FIND "${ini}" "${line}\n" at)
  if(at LESS 0)
    message(FATAL_ERROR "effective config.ini lacks '${line}':\n${ini}")
  endif()
endforeach()
if(NOT EXISTS ${WORKDIR}/cli_out/metrics.jsonl)
  message(FATAL_ERROR "--output-dir did not receive metrics.jsonl")
endif()
message(STATUS "ok: --config with override")

# Projections of the run's exchange to other rank counts and links (docs/scaling.md): the summary
# holds the alpha-beta model's time for every pair, config.ini the lists, and the kernels' memory
# traffic is the registry's for the method (A2SGD: 8 bytes per value to compress, 20 to apply).
# A2SGD's 16-byte all-reduce at 1,024 ranks costs ceil(log2 1024) = 10 rounds of alpha + 16 beta
# (the pure exchange: the MLP's default average every 100 steps would add its amortised share).
file(REMOVE_RECURSE ${WORKDIR}/cli_project)
execute_process(COMMAND ${MPIEXEC} ${NPFLAG} 2 ${_preflags} ${EXE} ${syn} --compressor a2sgd --average-every 0 --steps 2 --eval-every 0
                        --project-ranks 2,1024 --project-links 25:12.5,200:1 --output-dir ${WORKDIR}/cli_project --quiet
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
file(READ ${WORKDIR}/cli_project/config.ini ini)
file(STRINGS ${WORKDIR}/cli_project/metrics.jsonl lines REGEX "\"event\": \"summary\"")
if(NOT rc EQUAL 0 OR NOT ini MATCHES "\nproject-ranks = 2,1024\nproject-links = 25:12.5,200:1\n")
  message(FATAL_ERROR "--project-ranks/--project-links: exit code ${rc}, config.ini:\n${ini}${out}${err}")
endif()
foreach(key num_params kernel_bytes_compress kernel_bytes_apply modelled_comm_s_p1024_25gbps
            modelled_comm_s_p2_200gbps)
  if(NOT lines MATCHES "\"${key}\": ([0-9.e+-]+)")
    message(FATAL_ERROR "the summary lacks ${key}: ${lines}")
  endif()
  set(${key} ${CMAKE_MATCH_1})
endforeach()
math(EXPR want_compress "8 * ${num_params}")
math(EXPR want_apply "20 * ${num_params}")
if(NOT kernel_bytes_compress EQUAL want_compress OR NOT kernel_bytes_apply EQUAL want_apply)
  message(FATAL_ERROR "A2SGD's kernel bytes ${kernel_bytes_compress} / ${kernel_bytes_apply}, expected "
                      "${want_compress} / ${want_apply} for n = ${num_params}")
endif()
# 10 (12.5e-6 + 16 * 8 / 25e9) s and 1 (1e-6 + 16 * 8 / 200e9) s, as the summary prints them
# (compared as text: CMake has no floating-point comparison; both are exact to the printed digits).
foreach(pair "${modelled_comm_s_p1024_25gbps};0.0001250512" "${modelled_comm_s_p2_200gbps};1.00064e-06")
  list(GET pair 0 got)
  list(GET pair 1 want)
  if(NOT got STREQUAL want)
    message(FATAL_ERROR "modelled all-reduce of 16 bytes: ${got} s, expected ${want} s")
  endif()
endforeach()
message(STATUS "ok: --project-ranks and --project-links")

# The MLP's A2SGD defaults (docs/algorithm.md, "The defaults"): an average every 100 steps with the
# outer Nesterov step, in the start-up line and the effective config.ini; --average-every 0 (or
# its older name) gives the pure exchange without the outer step; local SGD keeps the plain average.
foreach(case "a2sgd;-;100;nesterov" "a2sgd;--average-every 0;0;average" "a2sgd;--a2sgd-average-every 0;0;average"
             "local;-;100;average")
  list(GET case 0 method)
  list(GET case 1 extra)
  list(GET case 2 every)
  list(GET case 3 outer)
  if(extra STREQUAL "-")
    set(extra "")
  endif()
  separate_arguments(extra UNIX_COMMAND "${extra}")
  file(REMOVE_RECURSE ${WORKDIR}/cli_defaults)
  execute_process(COMMAND ${MPIEXEC} ${NPFLAG} 2 ${_preflags} ${EXE} ${syn} --compressor ${method} ${extra} --steps 1
                          --eval-every 0 --output-dir ${WORKDIR}/cli_defaults
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  file(READ ${WORKDIR}/cli_defaults/config.ini ini)
  if(NOT rc EQUAL 0 OR NOT ini MATCHES "\naverage-every = ${every}\nouter-optimizer = ${outer}\n")
    message(FATAL_ERROR "${method} ${extra}: expected average-every ${every}, outer-optimizer ${outer}:\n${ini}${out}${err}")
  endif()
  if(outer STREQUAL "nesterov" AND NOT out MATCHES "replicas averaged every 100 steps \\(outer nesterov, lr 0.7, momentum 0.9")
    message(FATAL_ERROR "the start-up line does not state the outer step:\n${out}")
  endif()
  if(every STREQUAL "0" AND NOT out MATCHES "replicas averaged only at evaluations and at the end")
    message(STATUS "start-up line:\n${out}")
    message(FATAL_ERROR "the start-up line does not state that the replicas are not averaged")
  endif()
endforeach()
message(STATUS "ok: the MLP's averaging defaults in the start-up line and config.ini")

# The learning rate follows the optimizer where none is given: Adam's own rate, not SGD's.
file(REMOVE_RECURSE ${WORKDIR}/cli_adam)
execute_process(COMMAND ${MPIEXEC} ${NPFLAG} 2 ${_preflags} ${EXE} ${syn} --optimizer adam --steps 1 --eval-every 0
                        --output-dir ${WORKDIR}/cli_adam --quiet
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
file(READ ${WORKDIR}/cli_adam/config.ini ini)
if(NOT rc EQUAL 0 OR NOT ini MATCHES "\nlr = 0.001\n")
  message(FATAL_ERROR "--optimizer adam without --lr: exit code ${rc}, expected 0 and lr = 0.001:\n${ini}${out}${err}")
endif()
message(STATUS "ok: --optimizer adam takes Adam's default rate")

# The divergence monitor: a threshold below any A2SGD replica divergence fires at the first
# evaluation. Every rank warns; the metrics record it; --stop-on-divergence makes it exit 3.
foreach(stop ON OFF)
  set(flags)
  set(want 0)
  if(stop)
    set(flags --stop-on-divergence)
    set(want 3)
  endif()
  file(REMOVE ${WORKDIR}/cli_divergence.jsonl)
  execute_process(COMMAND ${MPIEXEC} ${NPFLAG} 2 ${_preflags} ${EXE} ${syn} --steps 20 --eval-every 10
                          --divergence-threshold 1e-12 ${flags} --metrics ${WORKDIR}/cli_divergence.jsonl
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL want)
    message(FATAL_ERROR "divergence monitor (stop ${stop}): exit code ${rc}, expected ${want}\n${out}${err}")
  endif()
  foreach(r 0 1)
    if(NOT err MATCHES "rank ${r}: warning: step 10: the replicas drift apart: replica divergence [0-9.e+-]+ exceeds")
      message(FATAL_ERROR "rank ${r} did not warn (stop ${stop}):\n${err}")
    endif()
  endforeach()
  file(READ ${WORKDIR}/cli_divergence.jsonl metrics)
  if(NOT metrics MATCHES "\"event\": \"divergence_warning\", \"step\": 10, [^\n]*\"replica_divergence\": [0-9]")
    message(FATAL_ERROR "metrics lack the divergence_warning record (stop ${stop}):\n${metrics}")
  endif()
  if(stop AND NOT metrics MATCHES "\"event\": \"diverged\"")
    message(FATAL_ERROR "--stop-on-divergence: no diverged record:\n${metrics}")
  endif()
  if(NOT stop AND NOT metrics MATCHES "\"event\": \"summary\"")
    message(FATAL_ERROR "a warned run that was not stopped did not finish:\n${metrics}")
  endif()
endforeach()
message(STATUS "ok: divergence monitor")
