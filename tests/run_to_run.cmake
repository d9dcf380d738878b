# docs/determinism-tests.md item 6: fresh processes, the same bytes (token ids and every logprob bit).
#   -DCLI=llm42 -DMODEL=m.gguf -DRUNS=N -DEXPECT=same|differ [-DARGS="a;b;..."]
# Each run alternates 1 and 2 threads. EXPECT=same: every digest agrees (a deterministic
# request). EXPECT=differ: at least two differ (the control: the same runs without
# --deterministic, with the fast path's noise keyed at random per process, must not all agree,
# or the `same` test proves nothing).
set(first "")
set(distinct 1)
foreach(i RANGE 1 ${RUNS})
  math(EXPR threads "1 + ${i} % 2")
  execute_process(
    COMMAND ${CLI} generate --model ${MODEL} --print-ids --print-logprobs --threads ${threads} --stats=false ${ARGS}
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
    if(EXPECT STREQUAL "same")
      message(FATAL_ERROR "run ${i} differs:\n${out}\nfrom run 1:\n${first_out}")
    endif()
    set(distinct 2)
  endif()
endforeach()
if(EXPECT STREQUAL "differ" AND distinct EQUAL 1)
  message(FATAL_ERROR "all ${RUNS} runs agree: the control shows no run-to-run variation")
endif()
