# a2sgd-train checkpoints end to end on 2 ranks (MODE selects the scenario):
#   resume  - N steps in one run equal N/2, restart, N/2 (dense, A2SGD, PowerSGD, QSGD, and local SGD
#             with DiLoCo's outer Nesterov optimizer, restarted between two averages): final
#             checkpoints identical bit for bit, the same metrics after the restart; --eval-only
#             reports the final evaluation's accuracy; elastic 2 -> 4 restarts complete (A2SGD, and
#             the outer optimizer, whose state every new rank takes from the old ranks' mean).
#   fault   - one rank SIGKILLed mid-run, and mid-checkpoint-write; --resume auto then reaches
#             the uninterrupted run's final state exactly.
#   signal  - SIGUSR1 to rank 1 alone, SIGTERM to rank 0 alone: every rank checkpoints at the
#             agreed step boundary and exits 75, --resume auto reaches the uninterrupted run's final
#             state exactly with one metrics log; a second signal exits at once without a
#             checkpoint; without --checkpoint-dir the stop warns that nothing was saved.
#   invalid - loading a checkpoint of another model, compressor, optimizer or batch size (unless
#             --resume-override allows it), a truncated file, a non-HDF5 file and a file with a
#             damaged byte: exit code 2, a message naming the problem, the file unchanged;
#             a2sgd-checkpoint verify passes the good file and names the damaged dataset;
#             a2sgd-checkpoint bench completes.
#   diskfull - checkpoints on a small tmpfs (skipped where mounting is not allowed): the write that
#             no longer fits exits 74 on every rank naming the file and the system's reason, leaves
#             no temporary file and the previous checkpoint sound; --resume auto on the full disk
#             does the same; with the space claim disabled (a full disk inside HDF5's writes) the
#             job still ends with 74 instead of hanging.
separate_arguments(_preflags UNIX_COMMAND "${PREFLAGS}")
set(work ${WORKDIR}/ckpt_${MODE})
file(REMOVE_RECURSE ${work})
file(MAKE_DIRECTORY ${work})
set(syn --dataset synthetic --synthetic-train 4000 --synthetic-test 1000 --synthetic-features 64
        --synthetic-classes 4 --batch-size 32 --log-every 10 --no-progress-bar --quiet)

function(train ranks expect_rc)
  execute_process(COMMAND ${MPIEXEC} ${NPFLAG} ${ranks} ${_preflags} ${EXE} ${syn} ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL expect_rc)
    message(FATAL_ERROR "a2sgd-train ${ARGN}: exit code ${rc}, expected ${expect_rc}\n${out}${err}")
  endif()
  set(last_out "${out}" PARENT_SCOPE)
  set(last_err "${err}" PARENT_SCOPE)
endfunction()

function(same_checkpoint a b)
  execute_process(COMMAND ${CKPT} diff ${a} ${b} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "checkpoints differ: ${a} ${b}\n${out}${err}")
  endif()
  message(STATUS "identical: ${a} ${b}")
endfunction()

# "step loss comm_bytes" of the train records from step FROM on, and the eval accuracies.
function(metrics file from var)
  file(STRINGS ${file} lines REGEX "\"event\": \"(train|eval)\"")
  set(result "")
  foreach(line IN LISTS lines)
    string(REGEX MATCH "\"step\": ([0-9]+)" _ "${line}")
    if(CMAKE_MATCH_1 LESS from)
      continue()
    endif()
    string(REGEX REPLACE ".*(\"step\": [0-9]+).*(\"loss\": [^,]+).*(\"comm_bytes\": [0-9]+).*" "\\1 \\2 \\3" t "${line}")
    string(REGEX REPLACE ".*(\"step\": [0-9]+).*(\"test_accuracy\": [^,]+).*(\"test_accuracy_averaged\": [^,]+).*"
                         "\\1 \\2 \\3" t "${t}")
    list(APPEND result "${t}")
  endforeach()
  set(${var} "${result}" PARENT_SCOPE)
endfunction()

set(ref_args --steps 100 --checkpoint-every 25 --eval-every 50)

if(MODE STREQUAL "resume")
  # PowerSGD carries a state shorter than n (its Q matrices), QSGD a random stream per step.
  # The outer optimizer's anchor and momentum are restored, not rebuilt: the restart at step 50
  # lies between the averages at 45 and 60. (It stops at an evaluation of the uninterrupted run:
  # the first part's final evaluation is then no extra one that could change the schedule's best
  # loss, which this run's test loss, rising late on the small problem, would show.)
  set(args_diloco --compressor local --average-every 15 --outer-optimizer nesterov --outer-lr 0.7
                  --outer-momentum 0.9 --optimizer adam --lr 0.003)
  set(split_diloco 50)
  foreach(method dense a2sgd powersgd qsgd diloco)
    set(margs --compressor ${method})
    if(DEFINED args_${method})
      set(margs ${args_${method}})
    endif()
    set(split 55)
    if(DEFINED split_${method})
      set(split ${split_${method}})
    endif()
    math(EXPR after "${split} + 1")
    train(2 0 ${margs} ${ref_args} --checkpoint-dir ${work}/ref_${method} --metrics ${work}/ref_${method}.jsonl)
    train(2 0 ${margs} --steps ${split} --checkpoint-every 25 --eval-every 50
          --checkpoint-dir ${work}/split_${method} --metrics ${work}/first_${method}.jsonl)
    train(2 0 ${margs} ${ref_args} --checkpoint-dir ${work}/split_${method} --resume auto
          --metrics ${work}/second_${method}.jsonl)
    same_checkpoint(${work}/ref_${method}/ckpt-000000100.h5 ${work}/split_${method}/ckpt-000000100.h5)
    metrics(${work}/ref_${method}.jsonl ${after} want)
    metrics(${work}/second_${method}.jsonl ${after} got)
    if(NOT want STREQUAL got OR want STREQUAL "")
      message(FATAL_ERROR "${method}: metrics after the restart differ:\n${want}\n${got}")
    endif()
    message(STATUS "${method}: metrics after the restart identical")
  endforeach()
  # Evaluation from a checkpoint alone reports the training run's final accuracy.
  file(STRINGS ${work}/ref_a2sgd.jsonl evals REGEX "\"event\": \"eval\", \"step\": 100")
  string(REGEX MATCH "\"test_accuracy\": [^,]+, \"test_loss_averaged\": [^,]+, \"test_accuracy_averaged\": [^,]+" want "${evals}")
  train(2 0 --compressor a2sgd --eval-only --resume ${work}/ref_a2sgd/ckpt-000000100.h5 --metrics ${work}/eval.jsonl)
  file(STRINGS ${work}/eval.jsonl evals REGEX "\"event\": \"eval\"")
  string(REGEX MATCH "\"test_accuracy\": [^,]+, \"test_loss_averaged\": [^,]+, \"test_accuracy_averaged\": [^,]+" got "${evals}")
  if(NOT want STREQUAL got OR want STREQUAL "")
    message(FATAL_ERROR "--eval-only: '${got}', the run's final evaluation: '${want}'")
  endif()
  message(STATUS "--eval-only reproduces the final evaluation: ${got}")
  # Elastic: a 2-rank checkpoint continued on 4 ranks.
  file(COPY ${work}/ref_a2sgd/ckpt-000000050.h5 DESTINATION ${work}/elastic)
  train(4 0 --compressor a2sgd --steps 40 --checkpoint-dir ${work}/elastic --resume auto --metrics ${work}/elastic.jsonl)
  file(STRINGS ${work}/elastic.jsonl resumed REGEX "\"event\": \"resume\".*\"from_world_size\": 2")
  if(resumed STREQUAL "" OR NOT EXISTS ${work}/elastic/ckpt-000000040.h5)
    message(FATAL_ERROR "elastic 2 -> 4 restart did not continue (step 50 on 2 ranks = step 25 on 4)")
  endif()
  message(STATUS "elastic 2 -> 4 restart continued")
  file(COPY ${work}/ref_diloco/ckpt-000000050.h5 DESTINATION ${work}/elastic_diloco)
  train(4 0 ${args_diloco} --steps 40 --checkpoint-dir ${work}/elastic_diloco --resume auto
        --metrics ${work}/elastic_diloco.jsonl)
  file(STRINGS ${work}/elastic_diloco.jsonl resumed REGEX "\"event\": \"resume\".*\"from_world_size\": 2")
  if(resumed STREQUAL "" OR NOT EXISTS ${work}/elastic_diloco/ckpt-000000040.h5)
    message(FATAL_ERROR "elastic 2 -> 4 restart of the outer optimizer did not continue")
  endif()
  message(STATUS "elastic 2 -> 4 restart with the outer optimizer continued")
elseif(MODE STREQUAL "fault")
  train(2 0 --compressor a2sgd ${ref_args} --checkpoint-dir ${work}/ref)
  foreach(fault "step@60" "checkpoint-write@75")
    string(REGEX REPLACE "[@-]" "_" tag "${fault}")
    set(ENV{A2SGD_FAULT_INJECT} "${fault}:1")
    execute_process(COMMAND ${MPIEXEC} ${NPFLAG} 2 ${_preflags} -x A2SGD_FAULT_INJECT ${EXE} ${syn}
                            --compressor a2sgd ${ref_args} --checkpoint-dir ${work}/${tag}
                    RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
    unset(ENV{A2SGD_FAULT_INJECT})
    if(rc EQUAL 0)
      message(FATAL_ERROR "${fault}: the killed run reported success")
    endif()
    if(EXISTS ${work}/${tag}/ckpt-000000100.h5 OR NOT EXISTS ${work}/${tag}/ckpt-000000050.h5)
      message(FATAL_ERROR "${fault}: unexpected checkpoints after the kill")
    endif()
    if(tag STREQUAL "checkpoint_write_75")
      # A damaged file under a checkpoint's name, newer than the last good one: skipped.
      execute_process(COMMAND head -c 3000 ${work}/${tag}/ckpt-000000050.h5 OUTPUT_FILE ${work}/${tag}/ckpt-000000070.h5)
    endif()
    train(2 0 --compressor a2sgd ${ref_args} --checkpoint-dir ${work}/${tag} --resume auto --metrics ${work}/${tag}.jsonl)
    same_checkpoint(${work}/ref/ckpt-000000100.h5 ${work}/${tag}/ckpt-000000100.h5)
    if(tag STREQUAL "checkpoint_write_75")
      if(NOT last_err MATCHES "warning: skipping .*ckpt-000000070.h5")
        message(FATAL_ERROR "no warning for the damaged checkpoint:\n${last_err}")
      endif()
      file(STRINGS ${work}/${tag}.jsonl resumed REGEX "\"event\": \"resume\", \"step\": 50,")
      if(resumed STREQUAL "")
        message(FATAL_ERROR "--resume auto did not fall back to step 50")
      endif()
      message(STATUS "damaged newest checkpoint skipped with a warning")
    endif()
  endforeach()
elseif(MODE STREQUAL "signal")
  train(2 0 --compressor a2sgd ${ref_args} --checkpoint-dir ${work}/ref)
  function(signalled tag faults expect_rc)
    set(ENV{A2SGD_FAULT_INJECT} "${faults}")
    execute_process(COMMAND ${MPIEXEC} ${NPFLAG} 2 ${_preflags} -x A2SGD_FAULT_INJECT ${EXE} ${syn} --compressor a2sgd
                            ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    unset(ENV{A2SGD_FAULT_INJECT})
    if(NOT rc EQUAL expect_rc)
      message(FATAL_ERROR "${tag} (${faults}): exit code ${rc}, expected ${expect_rc}\n${out}${err}")
    endif()
    set(last_err "${err}" PARENT_SCOPE)
  endfunction()
  # A signal raised after step s is in the agreement started at step s and acted on at step s + 1.
  foreach(case "usr1|step@60:1=USR1|61" "term|step@37:0=TERM|38")
    string(REPLACE "|" ";" case "${case}")
    list(GET case 0 tag)
    list(GET case 1 fault)
    list(GET case 2 stop)
    set(dir ${work}/${tag})
    signalled(${tag} ${fault} 75 ${ref_args} --checkpoint-dir ${dir} --metrics ${dir}.jsonl)
    string(LENGTH "${stop}" len)
    math(EXPR pad "9 - ${len}")
    string(REPEAT "0" ${pad} zeros)
    set(stop_ckpt ${dir}/ckpt-${zeros}${stop}.h5)
    if(NOT EXISTS ${stop_ckpt} OR EXISTS ${dir}/ckpt-000000100.h5)
      file(GLOB have ${dir}/*)
      message(FATAL_ERROR "${tag}: expected the checkpoint of step ${stop} and no final one; found ${have}")
    endif()
    if(NOT last_err MATCHES "stopped by signal [0-9]+ .*state saved in .*ckpt-${zeros}${stop}.h5")
      message(FATAL_ERROR "${tag}: no report of the stop on standard error:\n${last_err}")
    endif()
    train(2 0 --compressor a2sgd ${ref_args} --checkpoint-dir ${dir} --resume auto --metrics ${dir}.jsonl)
    same_checkpoint(${work}/ref/ckpt-000000100.h5 ${dir}/ckpt-000000100.h5)
    # One log across the restart: the stop, the resume at that step and the final summary.
    file(STRINGS ${dir}.jsonl events REGEX "\"event\": \"(stopped|resume|summary)\"")
    list(LENGTH events count)
    if(NOT count EQUAL 3 OR NOT events MATCHES "\"event\": \"stopped\", \"step\": ${stop},.*\"event\": \"resume\", \"step\": ${stop},")
      message(FATAL_ERROR "${tag}: metrics log across the restart:\n${events}")
    endif()
    message(STATUS "${tag}: stopped at step ${stop} on every rank, resumed to the uninterrupted final state")
  endforeach()

  # A second signal before the agreed stop: out at once (128 + SIGUSR1), no checkpoint written.
  signalled(twice "step@60:1=USR1,step@61:1=USR1" 138 ${ref_args} --checkpoint-dir ${work}/twice)
  if(EXISTS ${work}/twice/ckpt-000000061.h5 OR NOT EXISTS ${work}/twice/ckpt-000000050.h5
     OR NOT last_err MATCHES "second stop signal")
    message(FATAL_ERROR "second signal: wrong outcome\n${last_err}")
  endif()
  signalled(nodir "step@20:1=USR1" 75 --steps 100)
  if(NOT last_err MATCHES "without a checkpoint directory: the progress of this run is not saved")
    message(FATAL_ERROR "no warning for a stop without a checkpoint directory:\n${last_err}")
  endif()
  message(STATUS "second signal: immediate exit; no checkpoint directory: warning")
elseif(MODE STREQUAL "invalid")
  train(2 0 --compressor a2sgd --steps 10 --checkpoint-dir ${work}/good)
  set(good ${work}/good/ckpt-000000010.h5)
  file(SHA256 ${good} before)
  execute_process(COMMAND head -c 20000 ${good} OUTPUT_FILE ${work}/truncated.h5)  # the first 20 kB
  file(WRITE ${work}/text.h5 "not a checkpoint\n")
  foreach(case
          "--hidden;16;--resume;${good}|was written for model 'mlp 64-256-256-4'"
          "--compressor;dense;--resume;${good}|holds the state of compressor 'a2sgd'"
          "--optimizer;adam;--resume;${good}|holds the state of optimizer 'sgd'"
          "--resume;${work}/truncated.h5|truncated"
          "--resume;${work}/text.h5|not an HDF5 file"
          "--resume;${work}/none.h5|does not exist")
    string(REPLACE "|" ";" parts "${case}")
    list(GET parts -1 pattern)
    list(REMOVE_AT parts -1)
    train(2 2 --steps 20 ${parts})  # the default compressor (a2sgd) unless the case sets one
    if(NOT last_err MATCHES "${pattern}")
      message(FATAL_ERROR "${parts}: message does not name the problem ('${pattern}'):\n${last_err}")
    endif()
    message(STATUS "exit 2: ${parts}")
  endforeach()
  file(SHA256 ${good} after)
  if(NOT before STREQUAL after)
    message(FATAL_ERROR "a failed load modified ${good}")
  endif()
  # The batch size changes the math: refused unless the user says so.
  string(REPLACE "--batch-size;32" "--batch-size;16" syn "${syn}")
  train(2 2 --steps 20 --resume ${good})
  if(NOT last_err MATCHES "batch size per rank '32'; this run has '16' \\(the resume override 'batch-size'")
    message(FATAL_ERROR "a changed batch size was not refused with the override named:\n${last_err}")
  endif()
  train(2 0 --steps 20 --resume ${good} --resume-override batch-size)
  if(NOT last_err MATCHES "as the resume override 'batch-size' allows")
    message(FATAL_ERROR "--resume-override batch-size did not warn:\n${last_err}")
  endif()
  string(REPLACE "--batch-size;16" "--batch-size;32" syn "${syn}")
  # One damaged byte in the middle of the file (the replicas' data): verify and resume refuse it.
  execute_process(COMMAND ${CKPT} verify ${good} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "^ok: .*format 2, [0-9]+ datasets, [0-9]+ rows with their checksums verified")
    message(FATAL_ERROR "verify of a sound file: exit ${rc}\n${out}${err}")
  endif()
  file(SIZE ${good} size)
  math(EXPR middle "${size} / 2")
  file(COPY_FILE ${good} ${work}/damaged.h5)
  file(WRITE ${work}/byte.bin "Z")
  execute_process(COMMAND dd if=${work}/byte.bin of=${work}/damaged.h5 bs=1 seek=${middle} conv=notrunc
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  execute_process(COMMAND ${CKPT} verify ${work}/damaged.h5 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "damaged: .*damaged.h5: dataset /replicas/[a-z_/]+ row [01] fails its checksum")
    message(FATAL_ERROR "verify of a damaged file: exit ${rc}\n${out}${err}")
  endif()
  train(2 2 --steps 20 --resume ${work}/damaged.h5)
  if(NOT last_err MATCHES "fails its checksum: the file is damaged")
    message(FATAL_ERROR "a damaged checkpoint was not refused:\n${last_err}")
  endif()
  message(STATUS "verify and resume refuse a damaged byte: ${err}")
  # The I/O benchmark writes a checkpoint without per-rank values and reads it back cold.
  file(MAKE_DIRECTORY ${work}/bench)
  execute_process(COMMAND ${MPIEXEC} ${NPFLAG} 2 ${_preflags} ${CKPT} bench --params 100000 --repeats 1 --dir
                          ${work}/bench RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "read  0.001 GB: checkpoint restart .* reads are cold")
    message(FATAL_ERROR "a2sgd-checkpoint bench: exit ${rc}\n${out}${err}")
  endif()
  message(STATUS "a2sgd-checkpoint bench:\n${out}")
elseif(MODE STREQUAL "diskfull")
  set(disk ${work}/disk)
  file(MAKE_DIRECTORY ${disk})
  # 3 MiB: the first checkpoint (1.7 MB, 2.7 MB claimed while written) fits, the second does not.
  # (A2SGD without the MLP's default average and its outer state, whose two [p, n] datasets would
  # make the first one too large already.)
  execute_process(COMMAND mount -t tmpfs -o size=3m tmpfs ${disk} RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(STATUS "SKIPPED: cannot mount a small tmpfs here (${err})")
    return()
  endif()
  set(failures "")
  function(full_disk tag)
    execute_process(COMMAND ${MPIEXEC} ${NPFLAG} 2 ${_preflags} ${EXE} ${syn} --average-every 0 --steps 40
                            --checkpoint-every 10 --checkpoint-dir ${disk} ${ARGN}
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
    file(GLOB tmp_files ${disk}/.*.tmp)
    if(NOT rc EQUAL 74 OR NOT err MATCHES "checkpoint ${disk}/ckpt-000000020.h5: .*No space left on device" OR tmp_files)
      set(failures "${failures}\n${tag}: exit ${rc}, temporary files '${tmp_files}'\n${err}" PARENT_SCOPE)
    else()
      message(STATUS "${tag}: exit 74, ${err}")
    endif()
  endfunction()
  full_disk("claim refused")
  full_disk("resume on the full disk" --resume auto)
  set(ENV{A2SGD_FAULT_NO_RESERVE} 1)
  full_disk("full inside HDF5" --resume auto)
  unset(ENV{A2SGD_FAULT_NO_RESERVE})
  execute_process(COMMAND ${CKPT} verify ${disk}/ckpt-000000010.h5 RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    set(failures "${failures}\nthe previous checkpoint does not verify: ${out}${err}")
  endif()
  execute_process(COMMAND umount ${disk})
  if(failures)
    message(FATAL_ERROR "${failures}")
  endif()
endif()
