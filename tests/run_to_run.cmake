# DETERMINISM_TESTS.md item 6: ten fresh processes, the same bytes. Each run samples a
# deterministic request at temperature 0.8 on 1 or 2 threads; the digests must all agree.
set(first "")
foreach(i RANGE 1 10)
  math(EXPR threads "1 + ${i} % 2")
  execute_process(
    COMMAND ${CLI} generate --model ${MODEL} --prompt "Once upon a time" --max-tokens 64
            --temperature 0.8 --top-p 0.95 --deterministic --print-ids --threads ${threads} --stats=false
    OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "run ${i} failed (${rc})")
  endif()
  string(SHA256 digest "${out}")
  message(STATUS "run ${i} (${threads} threads): ${digest}")
  if(first STREQUAL "")
    set(first "${digest}")
    set(first_out "${out}")
  elseif(NOT digest STREQUAL first)
    message(FATAL_ERROR "run ${i} differs:\n${out}\nfrom run 1:\n${first_out}")
  endif()
endforeach()
