# a2sgd-train with METHOD (dense, topk, randomk, qsgd, efsign, powersgd, fp16, bf16, or a2sgd by layer in buckets, with
# Adam's local moments formed per bucket) exchanging buckets (a 64-32-32-4 MLP of
# 3,300 values, caps that make three buckets), on NP ranks: --overlap on starts two of each step's
# three collectives during the backward pass (the summary's collectives_overlapped), --overlap off
# none, and the two runs' losses and accuracies are the same bit for bit (every train and eval
# record's figures).
separate_arguments(_preflags UNIX_COMMAND "${PREFLAGS}")
set(extra)
if(METHOD STREQUAL "a2sgd")
  set(extra --a2sgd-granularity layer --a2sgd-buckets on --optimizer adam --lr 0.001)
endif()
set(work ${WORKDIR}/overlap_${METHOD}_np${NP})
file(REMOVE_RECURSE ${work})
file(MAKE_DIRECTORY ${work})
foreach(mode on off)
  execute_process(
    COMMAND ${MPIEXEC} ${NPFLAG} ${NP} ${_preflags} ${EXE} --compressor ${METHOD} --topk-ratio 0.05 --randomk-ratio 0.05 --dataset synthetic
            --synthetic-train 2000 --synthetic-test 500 --synthetic-features 64 --synthetic-classes 4
            --hidden 32,32 --steps 60 --batch-size 16 --log-every 10 --eval-every 30 --first-bucket-mb 0.001
            --bucket-mb 0.008 ${extra} --overlap ${mode} --metrics ${work}/${mode}.jsonl --no-progress-bar
    OUTPUT_VARIABLE out_${mode} ERROR_VARIABLE err RESULT_VARIABLE rc)
  message("${out_${mode}}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "a2sgd-train --overlap ${mode} exited with ${rc}")
  endif()
  file(READ ${work}/${mode}.jsonl metrics_${mode})
  string(REGEX MATCH "\"collectives\": ([0-9]+)" _ "${metrics_${mode}}")
  set(collectives_${mode} ${CMAKE_MATCH_1})
  string(REGEX MATCH "\"collectives_overlapped\": ([0-9]+)" _ "${metrics_${mode}}")
  set(overlapped_${mode} ${CMAKE_MATCH_1})
  # The figures of the model's progress, without clocks.
  string(REGEX MATCHALL "\"(loss|test_loss|test_accuracy|test_accuracy_averaged|replica_divergence)\": [^,}]*"
         figures_${mode} "${metrics_${mode}}")
endforeach()
if(NOT out_on MATCHES "gradient in 3 buckets of [0-9, ]+ values, each exchanged during the backward pass")
  message(FATAL_ERROR "the start-up lines do not name the three overlapped buckets")
endif()
if(NOT out_off MATCHES "gradient in 3 buckets of [0-9, ]+ values, exchanged after the backward pass \\(--overlap off\\)")
  message(FATAL_ERROR "the start-up lines of --overlap off do not say so")
endif()
# 60 steps of three all-reduces, and the evaluations' averages (one per evaluation: 2 at 30 and 60).
if(NOT collectives_on EQUAL collectives_off OR collectives_on LESS 180)
  message(FATAL_ERROR "collectives: ${collectives_on} overlapped, ${collectives_off} not (expected the same, >= 180)")
endif()
if(NOT overlapped_on EQUAL 120 OR NOT overlapped_off EQUAL 0)
  message(FATAL_ERROR "collectives started during the backward pass: ${overlapped_on} with --overlap on (expected "
                      "120: 2 of 3 per step), ${overlapped_off} with off (expected 0)")
endif()
list(LENGTH figures_on count)
if(count LESS 10 OR NOT "${figures_on}" STREQUAL "${figures_off}")
  message(FATAL_ERROR "--overlap on and off differ (or too few figures, ${count}):\n${figures_on}\n${figures_off}")
endif()
message("ok: ${count} figures equal; ${overlapped_on} of ${collectives_on} collectives overlapped")
