# run(EXPECTED_RC PATTERN COMMAND...), for the CLI test scripts: runs the command, fails unless it
# exits EXPECTED_RC and its output (stdout then stderr) matches PATTERN; prints the output and
# leaves stdout in `out`.
function(run expect_rc pattern)
  execute_process(COMMAND ${ARGN} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL expect_rc)
    message(FATAL_ERROR "${ARGN}\nexited ${rc}, expected ${expect_rc}\n${out}\n${err}")
  endif()
  if(NOT "${out}${err}" MATCHES "${pattern}")
    message(FATAL_ERROR "${ARGN}\nprinted no match for '${pattern}':\n${out}\n${err}")
  endif()
  message(STATUS "${out}${err}")
  set(out "${out}" PARENT_SCOPE)
endfunction()
