# A2SGD with momentum and Adam at the learning rates a dense run uses (Fashion-MNIST MLP, 4 ranks,
# one epoch: 234 steps, evaluations at 117 and 234), docs/convergence.md:
#  - with a2sgd-train's defaults (replicas averaged every 100 steps for momentum and Adam) both
#    learn without a divergence warning: averaged-model test accuracy at least 0.80 with momentum
#    (measured with seeds 1, 2: 0.8301, 0.8269) and 0.82 with Adam (0.8420, 0.8410);
#  - the pure O(1) exchange (--a2sgd-average-every 0) with momentum drifts: the averaged model is
#    worse than a replica (test loss 0.812 against 0.622 at step 117), every rank warns, and with
#    --stop-on-divergence every rank stops with exit code 3 and a diverged record.
separate_arguments(_preflags UNIX_COMMAND "${PREFLAGS}")
if(NOT EXISTS /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz
   AND NOT EXISTS /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte)
  message("SKIPPED: no Fashion-MNIST in /usr/share/datasets/fashion-mnist (Debian: dataset-fashion-mnist)")
  return()
endif()
set(common --compressor a2sgd --steps 234 --eval-every 117 --log-every 117 --no-progress-bar --quiet)

function(run name expect_rc)
  execute_process(COMMAND ${MPIEXEC} ${NPFLAG} 4 ${_preflags} ${EXE} ${common} ${ARGN}
                          --metrics ${WORKDIR}/momentum_${name}.jsonl
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL expect_rc)
    message(FATAL_ERROR "${name}: exit code ${rc}, expected ${expect_rc}\n${out}${err}")
  endif()
  set(last_err "${err}" PARENT_SCOPE)
  file(READ ${WORKDIR}/momentum_${name}.jsonl metrics)
  set(last_metrics "${metrics}" PARENT_SCOPE)
endfunction()

foreach(case "momentum;0.80;--optimizer;momentum;--lr;0.05;--momentum;0.9" "adam;0.82;--optimizer;adam;--lr;0.001")
  list(POP_FRONT case name bound)
  run(${name} 0 ${case})
  if(last_err MATCHES "warning")
    message(FATAL_ERROR "${name} with the defaults warned:\n${last_err}")
  endif()
  string(REGEX MATCH "\"event\": \"summary\"[^\n]*\"test_accuracy_averaged\": ([0-9.]+)" _ "${last_metrics}")
  set(accuracy "${CMAKE_MATCH_1}")
  if(accuracy STREQUAL "" OR accuracy LESS ${bound})
    message(FATAL_ERROR "${name} with the defaults: averaged-model accuracy '${accuracy}' below ${bound}")
  endif()
  if(NOT last_metrics MATCHES "\"a2sgd_average_every\": \"100\"")
    message(FATAL_ERROR "${name}: the default averaging period is not 100")
  endif()
  message(STATUS "${name} with the defaults: averaged-model accuracy ${accuracy} >= ${bound}, no warning")
endforeach()

run(pure 3 --optimizer momentum --lr 0.05 --momentum 0.9 --a2sgd-average-every 0 --stop-on-divergence)
foreach(r 0 1 2 3)
  if(NOT last_err MATCHES "rank ${r}: warning: step 117: the averaged model is worse than rank 0's replica")
    message(FATAL_ERROR "pure A2SGD with momentum: rank ${r} did not warn\n${last_err}")
  endif()
endforeach()
if(NOT last_metrics MATCHES "\"event\": \"diverged\"")
  message(FATAL_ERROR "pure A2SGD with momentum: no diverged record")
endif()
message(STATUS "pure A2SGD with momentum: every rank warned at step 117 and stopped with exit code 3")
