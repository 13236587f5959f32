# Runs a library example (least_squares: a hand-written loop; custom_model: a user's model and
# data source trained by a2sgd::train::Trainer) on 2 ranks with A2SGD and with dense exchange;
# each must cut the loss by at least 100x, and A2SGD must hand 16 bytes (2 doubles) per step to
# MPI.
separate_arguments(_preflags UNIX_COMMAND "${PREFLAGS}")
foreach(method a2sgd dense)
  execute_process(COMMAND ${MPIEXEC} ${NPFLAG} 2 ${_preflags} ${EXE} --method ${method}
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  message("${out}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "example (${method}) exited with ${rc}: ${err}")
  endif()
  if(NOT out MATCHES "final loss [0-9.e+-]+ \\(initial [0-9.e+-]+, ratio ([0-9.e+-]+)\\)")
    message(FATAL_ERROR "example (${method}): no final loss line")
  endif()
  set(ratio ${CMAKE_MATCH_1})
  if(NOT ratio LESS 0.01)  # if() compares numbers as doubles
    message(FATAL_ERROR "example (${method}): loss fell only by a factor 1/${ratio}")
  endif()
  if(method STREQUAL "a2sgd" AND NOT out MATCHES "per step per rank: 16.0\n")
    message(FATAL_ERROR "example (a2sgd): expected 16 bytes per step per rank")
  endif()
endforeach()
