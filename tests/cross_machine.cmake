# The fixed schedule's and the sampler's bits must not depend on the machine (docs/design.md §7).
# A deterministic sampled generation runs twice: as this machine runs it, and in a child whose
# glibc believes the CPU has no AVX2 and no FMA (GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA:
# libm's exp, log, sin, cos, pow switch implementations, which differ in the last bit on about
# 1 input in 1500) and whose llm42 kernels are the portable ones (LLM42_CPU_SIMD=off). Token ids
# and logprob bits must be equal. This is the end-to-end check; it rarely sees a one-ulp libm
# difference through float logits and logprobs, so the proof that the mask matters and that our
# math ignores it is portable_math_test's DigestsIgnoreGlibcDispatch (which fails with
# std::exp in PortableExp, and has a control showing that libm's bits do change).
#   -DCLI=llm42 -DMODEL=m.gguf [-DARGS="a;b;..."]
set(cmd ${CLI} generate --model ${MODEL} --print-ids --print-logprobs --stats=false --deterministic ${ARGS})
execute_process(COMMAND ${cmd} OUTPUT_VARIABLE native RESULT_VARIABLE rc1)
execute_process(COMMAND ${CMAKE_COMMAND} -E env GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA LLM42_CPU_SIMD=off ${cmd}
                OUTPUT_VARIABLE masked RESULT_VARIABLE rc2)
if(NOT rc1 EQUAL 0 OR NOT rc2 EQUAL 0)
  message(FATAL_ERROR "a run failed (${rc1}, ${rc2})")
endif()
if(NOT native STREQUAL masked)
  message(FATAL_ERROR "the masked run differs:\n${masked}\nfrom the native run:\n${native}")
endif()
message(STATUS "identical:\n${native}")
