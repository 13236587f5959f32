# End-to-end: a2sgd-train on 2 ranks on a synthetic problem (a 64-32-4 MLP, n = 2212) with METHOD,
# any registered exchange method, at its defaults. Checks the final accuracy of rank 0's replica
# and of the averaged model (>= MIN_ACCURACY), that every step handed MPI the bytes the method
# plans (planned_bytes_per_step: its step_traffic(), checked against docs/methods.md's formulas by
# the unit tests), and the metrics file's records and fields.
separate_arguments(_preflags UNIX_COMMAND "${PREFLAGS}")
# Methods that send a fraction of the entries send too few of 2212 at their default 0.001 to
# learn in 186 steps; an option of another method than METHOD is checked but not used.
set(_args --topk-ratio 0.05 --randomk-ratio 0.05)
# Local SGD, and A2SGD on the MLP, average the replicas periodically by default: a period that
# divides the 186 steps, so that the bytes per step equal the plan's amortised ones (six averages).
if(METHOD STREQUAL "local" OR METHOD STREQUAL "a2sgd")
  list(APPEND _args --average-every 31)
endif()
set(metrics ${WORKDIR}/metrics_${METHOD}.jsonl)
file(REMOVE ${metrics})
execute_process(
  COMMAND ${MPIEXEC} ${NPFLAG} 2 ${_preflags} ${EXE} --compressor ${METHOD} ${_args} --dataset synthetic
          --synthetic-train 4000 --synthetic-test 1000 --synthetic-features 64 --synthetic-classes 4
          --hidden 32 --epochs 3 --batch-size 32 --log-every 20 --metrics ${metrics} --no-progress-bar
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "a2sgd-train (${METHOD}) exited with ${rc}")
endif()
file(STRINGS ${metrics} lines)
list(LENGTH lines count)
# 186 steps: a train record every 20 steps and at the end (10), 3 evaluations, 1 summary.
if(NOT count EQUAL 14)
  message(FATAL_ERROR "expected 14 metrics records, found ${count}")
endif()
list(GET lines 0 first)
foreach(key step epoch wall_s loss comm_bytes compress_s comm_s optimizer_s compute_s)
  if(NOT first MATCHES "\"${key}\": ")
    message(FATAL_ERROR "train record lacks \"${key}\": ${first}")
  endif()
endforeach()
string(REGEX MATCHALL "\"event\": \"eval\"[^\n]*" evals "${lines}")
foreach(key test_loss test_accuracy test_accuracy_averaged replica_divergence)
  if(NOT evals MATCHES "\"${key}\": ")
    message(FATAL_ERROR "eval record lacks \"${key}\"")
  endif()
endforeach()
list(GET lines -1 summary)
if(NOT summary MATCHES "\"event\": \"summary\"")
  message(FATAL_ERROR "last record is not the summary: ${summary}")
endif()
foreach(key test_accuracy test_accuracy_averaged bytes_per_step planned_bytes_per_step)
  if(NOT summary MATCHES "\"${key}\": ([0-9.e+-]+)")
    message(FATAL_ERROR "summary lacks ${key}")
  endif()
  set(${key} ${CMAKE_MATCH_1})
endforeach()
# The schedule the run trained with: the MLP's (no warm-up unless --lr-warmup-steps is given).
if(NOT summary MATCHES "\"lr_schedule\": \"(constant|step|cosine|plateau)\"" OR
   NOT summary MATCHES "\"lr_warmup_steps\": 0[,}]")
  message(FATAL_ERROR "summary lacks the schedule (lr_schedule, lr_warmup_steps 0): ${summary}")
endif()
if(test_accuracy LESS ${MIN_ACCURACY} OR test_accuracy_averaged LESS ${MIN_ACCURACY})
  message(FATAL_ERROR "${METHOD}: accuracy ${test_accuracy} (replica) / ${test_accuracy_averaged} (averaged) "
                      "below ${MIN_ACCURACY}")
endif()
if(NOT bytes_per_step EQUAL planned_bytes_per_step)
  message(FATAL_ERROR "${METHOD}: ${bytes_per_step} bytes per step, planned ${planned_bytes_per_step}")
endif()
