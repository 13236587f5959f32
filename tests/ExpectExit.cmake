# Shared by the app checks run with `cmake -P`: expect_exit(<ranks> <code> <pattern> <tool> args...)
# runs ${EXE} on <ranks> ranks with args. The exit code must be <code>. A successful run's output
# (stdout and stderr) must match <pattern>; a failing run's stderr must match it and hold exactly
# one "<tool>: " report (one message, not one per rank). A hang is reported as such after 300 s
# (rc then holds the timeout's text), not left to the test's TIMEOUT. The output is left in
# `last_out` in the caller's scope.
separate_arguments(_preflags UNIX_COMMAND "${PREFLAGS}")

function(expect_exit ranks code pattern tool)
  execute_process(COMMAND ${MPIEXEC} ${NPFLAG} ${ranks} ${_preflags} ${EXE} ${ARGN} TIMEOUT 300
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL code)
    message(FATAL_ERROR "'${ARGN}': exit code ${rc}, expected ${code}\n${out}${err}")
  endif()
  if(code EQUAL 0)
    set(checked "${out}${err}")
  else()
    set(checked "${err}")
    string(REGEX MATCHALL "${tool}: " reports "${err}")
    list(LENGTH reports n)
    if(NOT n EQUAL 1)
      message(FATAL_ERROR "'${ARGN}': expected one report, got ${n}:\n${err}")
    endif()
  endif()
  if(NOT "${checked}" MATCHES "${pattern}")
    message(FATAL_ERROR "'${ARGN}': output does not match '${pattern}':\n${out}${err}")
  endif()
  message(STATUS "ok (${rc}): ${ARGN}")
  set(last_out "${out}" PARENT_SCOPE)
endfunction()
