# scripts/studies/paper_experiment.sh's plumbing on a tiny budget (the full experiment is docs/results.md):
# every run of the script for 4 steps of a small LSTM at 2 ranks, then the report and the plots.
# Checks that every run wrote its metrics with a summary, that the report covers both optimizers
# with a target, the time-to-target table and the A2SGD : Top-K and A2SGD : QSGD ratios, and that
# the four PNGs exist; that the SGD runs train at a2sgd-train's rate unless --sgd-lr names one; and
# that bad options exit 2. Skipped without the Penn Treebank files.
if(NOT EXISTS "${DATA}/ptb.train.txt")
  message("SKIPPED: no Penn Treebank files in '${DATA}' (set A2SGD_DATA_DIR)")
  return()
endif()
set(out ${WORKDIR}/paper_experiment)
file(REMOVE_RECURSE ${out})
set(env ${CMAKE_COMMAND} -E env MPIEXEC=${MPIEXEC} "MPIEXEC_FLAGS=${PREFLAGS}" PYTHON=${PYTHON})
execute_process(COMMAND ${env} bash ${SCRIPT} --out ${out} --build ${BUILD} --steps 4 --eval-every 4
                        -- --data-dir ${DATA} --hidden 32 --bptt 20 --batch-size 10 --eval-batch 20
                RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "paper_experiment.sh: exit code ${rc}\n${stdout}${stderr}")
endif()
foreach(run dense_sgd a2sgd_sgd a2sgd-pure_sgd topk_sgd qsgd_sgd dense_adam a2sgd_adam a2sgd-pure_adam topk_adam
            qsgd_adam)
  file(READ ${out}/${run}.jsonl metrics)
  if(NOT metrics MATCHES "\"event\": \"summary\"[^\n]*\"modelled_comm_s_p128_10gbps\": [0-9]")
    message(FATAL_ERROR "${run}: no summary with modelled communication:\n${metrics}")
  endif()
endforeach()
# Without --sgd-lr every SGD run trains at a2sgd-train's own rate for its method (on the language
# model 20 for dense, 30 for A2SGD); with it, at the rate given.
foreach(case "dense_sgd;20" "a2sgd_sgd;30" "a2sgd-pure_sgd;30")
  list(GET case 0 run)
  list(GET case 1 rate)
  file(STRINGS ${out}/${run}.jsonl summary REGEX "\"event\": \"summary\"")
  if("${stdout}${stderr}" MATCHES "== ${run}: [^\n]*--lr" OR NOT summary MATCHES "\"lr\": ${rate}[,}]")
    message(FATAL_ERROR "${run} without --sgd-lr: expected no --lr from the script and a2sgd-train's rate ${rate}:\n${summary}")
  endif()
endforeach()
execute_process(COMMAND ${env} bash ${SCRIPT} --out ${out}/lr5 --build ${BUILD} --steps 4 --eval-every 4 --no-report
                        --runs a2sgd_sgd --sgd-lr 5 -- --data-dir ${DATA} --hidden 32 --bptt 20 --batch-size 10
                        --eval-batch 20
                RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
file(STRINGS ${out}/lr5/a2sgd_sgd.jsonl summary REGEX "\"event\": \"summary\"")
if(NOT rc EQUAL 0 OR NOT summary MATCHES "\"lr\": 5[,}]")
  message(FATAL_ERROR "--sgd-lr 5: exit code ${rc}, summary: ${summary}\n${stdout}${stderr}")
endif()
# --rates: each baseline at its rate in a sweep's best.json (cell lstm_p2_<optimizer>), the A2SGD runs
# at a2sgd-train's defaults; a baseline the cell lacks is refused before anything trains.
file(WRITE ${out}/best.json [=[{"lstm_p2_sgd": {"dense": {"lr": 7.0, "edge": false}, "a2sgd": {"lr": 80.0}},
 "lstm_p2_adam": {"powersgd": {"lr": 0.0007, "edge": true}}}]=])
execute_process(COMMAND ${env} bash ${SCRIPT} --out ${out}/tuned --build ${BUILD} --steps 4 --eval-every 4 --no-report
                        --runs "dense_sgd a2sgd_sgd powersgd_adam" --rates ${out}/best.json
                        -- --data-dir ${DATA} --hidden 32 --bptt 20 --batch-size 10 --eval-batch 20
                RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
if(NOT rc EQUAL 0 OR NOT stderr MATCHES "warning: powersgd's best rate in lstm_p2_adam is at the edge")
  message(FATAL_ERROR "--rates: exit code ${rc} (expected 0 and an edge warning)\n${stdout}${stderr}")
endif()
foreach(case "dense_sgd;7" "a2sgd_sgd;30" "powersgd_adam;0.0007")
  list(GET case 0 run)
  list(GET case 1 rate)
  file(STRINGS ${out}/tuned/${run}.jsonl summary REGEX "\"event\": \"summary\"")
  if(NOT summary MATCHES "\"lr\": ${rate}[,}]")
    message(FATAL_ERROR "--rates: ${run} should train at ${rate}:\n${summary}\n${stderr}")
  endif()
endforeach()
execute_process(COMMAND ${env} bash ${SCRIPT} --out ${out}/untuned --build ${BUILD} --steps 4 --no-report
                        --runs "dense_sgd topk_sgd" --rates ${out}/best.json -- --data-dir ${DATA}
                RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
if(NOT rc EQUAL 2 OR NOT stderr MATCHES "no tuned rate for topk in cell lstm_p2_sgd" OR EXISTS ${out}/untuned/dense_sgd.jsonl)
  message(FATAL_ERROR "--rates without topk's cell: exit code ${rc} (expected 2, nothing trained)\n${stdout}${stderr}")
endif()
file(READ ${out}/report.md report)
foreach(pattern "## ADAM: target validation perplexity [0-9.]+ \\(dense's final x 1.1\\)"
                "## SGD: target validation perplexity [0-9.]+ \\(dense's final x 1.1\\)"
                "\\| a2sgd : topk \\|" "\\| a2sgd : qsgd \\|" "\\| a2sgd-pure : qsgd \\|"
                "\\| dense \\| [0-9.]+ / [0-9.]+ \\| 0.000 \\| 2,666,560 \\|")
  if(NOT report MATCHES "${pattern}")
    message(FATAL_ERROR "report.md lacks '${pattern}':\n${report}")
  endif()
endforeach()
foreach(png ppl_sgd_10gbps ppl_sgd_100gbps ppl_adam_10gbps ppl_adam_100gbps)
  if(NOT EXISTS ${out}/${png}.png)
    message(FATAL_ERROR "plot_metrics.py did not write ${png}.png")
  endif()
endforeach()
execute_process(COMMAND bash ${SCRIPT} --steps 0 RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(NOT rc EQUAL 2 OR NOT err MATCHES "--steps must be a positive integer")
  message(FATAL_ERROR "--steps 0: exit code ${rc}: ${err}")
endif()
execute_process(COMMAND bash ${SCRIPT} --build ${BUILD} --runs nosuch_sgd --out ${out}/bad RESULT_VARIABLE rc
                ERROR_VARIABLE err OUTPUT_QUIET)
if(NOT rc EQUAL 2 OR NOT err MATCHES "unknown run 'nosuch_sgd'")
  message(FATAL_ERROR "--runs nosuch_sgd: exit code ${rc}: ${err}")
endif()
message(STATUS "ok: paper experiment plumbing")
