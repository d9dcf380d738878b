# The Windows build's tests (tools/build-windows.sh test), run under Wine through the toolchain's
# CMAKE_CROSSCOMPILING_EMULATOR: the C ABI, the kernels at every SIMD level, the determinism
# acceptance suite and its neighbours, and the cross-OS receipts (with c_api_test and cli_generate,
# which tests/CMakeLists.txt defines for both). Each executable is one ctest entry (a Wine start
# costs more than most single test cases).
function(llm42_windows_gtest name)
  llm42_gtest_executable(${name} ${ARGN})
  add_test(NAME ${name} COMMAND ${name} --gtest_filter=-*/cuda)
  set_tests_properties(${name} PROPERTIES TIMEOUT ${LLM42_TEST_TIMEOUT})
endfunction()

foreach(unit cpu_kernels_test backend_ops_test portable_math_test fixed_schedule_test
             receipt_test kv_cache_test scheduler_test sampling_test tokenizer_test engine_test
             saved_conversation_test large_buffer_test thread_pool_test grammar_test token_grammar_test)
  llm42_windows_gtest(${unit})
endforeach()
# The acceptance suite (eight models, every item) in eight shards of its own ctest entries, so
# that none nears a minute under Wine on a loaded machine (whole, it took 63-109 s; in six shards,
# two at a time, 22-33 s each).
set(_llm42_determinism_shards 8)
math(EXPR _llm42_last_shard "${_llm42_determinism_shards} - 1")
llm42_gtest_executable(determinism_test)
foreach(shard RANGE ${_llm42_last_shard})
  add_test(NAME determinism_test_${shard} COMMAND determinism_test --gtest_filter=-*/cuda)
  set_tests_properties(determinism_test_${shard} PROPERTIES TIMEOUT ${LLM42_TEST_TIMEOUT}
    ENVIRONMENT "GTEST_TOTAL_SHARDS=${_llm42_determinism_shards};GTEST_SHARD_INDEX=${shard}")
endforeach()
# The kernels under each SIMD level this CPU has: AVX-512 (where present), AVX2, portable.
foreach(unit cpu_kernels_test backend_ops_test portable_math_test)
  add_test(NAME ${unit}_avx2 COMMAND ${unit} --gtest_filter=-*/cuda)
  add_test(NAME ${unit}_portable COMMAND ${unit} --gtest_filter=-*/cuda)
  set_tests_properties(${unit}_avx2 PROPERTIES ENVIRONMENT LLM42_CPU_SIMD=avx2 TIMEOUT ${LLM42_TEST_TIMEOUT})
  set_tests_properties(${unit}_portable PROPERTIES ENVIRONMENT LLM42_CPU_SIMD=off TIMEOUT ${LLM42_TEST_TIMEOUT})
endforeach()

# The same bits and receipts on Linux and Windows (tests/cross_os.cmake): needs the Linux CLI,
# which tools/build-windows.sh builds and names.
set(LLM42_LINUX_CLI "" CACHE FILEPATH "The Linux llm42 CLI, for the cross-OS receipt test")
if(LLM42_LINUX_CLI)
  add_test(NAME determinism_cross_os
    COMMAND ${CMAKE_COMMAND} -DLINUX_CLI=${LLM42_LINUX_CLI} -DWINDOWS_CLI=$<TARGET_FILE:llm42_cli>
      "-DWINE=${CMAKE_CROSSCOMPILING_EMULATOR}" -DSTORIES=${LLM42_STORIES} -DVOCAB=${LLM42_STORIES}
      -DDIR=${CMAKE_CURRENT_BINARY_DIR}/tmp/cross_os -P ${CMAKE_CURRENT_SOURCE_DIR}/cross_os.cmake)
  set_tests_properties(determinism_cross_os PROPERTIES TIMEOUT ${LLM42_TEST_TIMEOUT})
endif()
