# Cross-OS reproducibility: the Linux CLI and the Windows CLI (llm42.exe, under Wine) give the same
# bits, and each verifies the other's receipts REPRODUCED.
#   -DLINUX_CLI=llm42 -DWINDOWS_CLI=llm42.exe -DWINE="env;...;wine64" -DSTORIES=m.gguf
#   -DVOCAB=vocab.gguf -DDIR=scratch
# For stories260K and random models the Linux CLI makes (Q4_K blocks, Qwen 3 with Q6_K, Gemma 2,
# a sliding window on every layer: the block loaders, per-head norms, soft-caps, windows): a
# deterministic sampled generation on each OS with --print-ids --print-logprobs (token ids and
# every logprob bit), the Windows one on the AVX2 kernels and the Linux one on the machine's best,
# must print the same bytes; the Linux receipt verifies REPRODUCED with llm42.exe, the Windows
# receipt with the Linux CLI; the Windows CLI's make-model writes the same bytes as the Linux one.
# The control: a receipt verified against another model is refused (the comparison can fail).
# Checked to fail with std::fma in PortableFmaf's non-glibc branch (MinGW's fmaf is not exact,
# and the AVX2 kernels' tails then round differently on Windows).
file(REMOVE_RECURSE ${DIR})
file(MAKE_DIRECTORY ${DIR})
function(run expect_rc out_var)
  execute_process(COMMAND ${ARGN} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL expect_rc)
    message(FATAL_ERROR "${ARGN}\nexited ${rc}, expected ${expect_rc}\n${out}\n${err}")
  endif()
  set(${out_var} "${out}${err}" PARENT_SCOPE)
endfunction()
set(win ${WINE} ${WINDOWS_CLI})

set(models ${STORIES})
foreach(spec "tiny-blocks;q4_k" "tiny-qwen3;q6_k" "tiny-gemma2;f32" "tiny-swa;f16")
  list(GET spec 0 preset)
  list(GET spec 1 dtype)
  set(m ${DIR}/${preset}-${dtype}.gguf)
  run(0 ignored ${LINUX_CLI} make-model --preset ${preset} --dtype ${dtype} --vocab ${VOCAB} --out ${m})
  run(0 ignored ${win} make-model --preset ${preset} --dtype ${dtype} --vocab ${VOCAB} --out ${m}.win)
  file(SHA256 ${m} linux_sum)
  file(SHA256 ${m}.win windows_sum)
  if(NOT linux_sum STREQUAL windows_sum)
    message(FATAL_ERROR "make-model --preset ${preset} --dtype ${dtype} wrote other bytes on Windows")
  endif()
  list(APPEND models ${m})
endforeach()

set(i 0)
foreach(m IN LISTS models)
  math(EXPR i "${i} + 1")
  set(gen generate --model ${m} --prompt "Once upon a time there was a little girl who loved the sea"
      --max-tokens 40 --temperature 0.9 --seed ${i}7 --deterministic --print-ids --print-logprobs
      --stats=false --threads 2)
  run(0 linux ${LINUX_CLI} ${gen} --receipt ${DIR}/linux-${i}.bin)
  run(0 windows ${CMAKE_COMMAND} -E env LLM42_CPU_SIMD=avx2 ${win} ${gen} --receipt ${DIR}/windows-${i}.bin)
  string(REGEX REPLACE "llm42: receipt written[^\n]*\n?" "" linux "${linux}")
  string(REGEX REPLACE "llm42: receipt written[^\n]*\n?" "" windows "${windows}")
  if(NOT linux STREQUAL windows)
    message(FATAL_ERROR "${m}: Windows printed\n${windows}\nwhere Linux printed\n${linux}")
  endif()
  run(0 out ${win} verify --model ${m} ${DIR}/linux-${i}.bin)
  if(NOT out MATCHES "^REPRODUCED: 40 tokens")
    message(FATAL_ERROR "llm42.exe verify of the Linux receipt for ${m}:\n${out}")
  endif()
  run(0 out ${LINUX_CLI} verify --model ${m} ${DIR}/windows-${i}.bin)
  if(NOT out MATCHES "^REPRODUCED: 40 tokens")
    message(FATAL_ERROR "Linux verify of the Windows receipt for ${m}:\n${out}")
  endif()
  message(STATUS "${m}: the same 40 tokens and logprob bits on both systems; both receipts REPRODUCED")
endforeach()

# Constrained output across systems: a deterministic generation under a JSON schema, a logit bias
# and penalties prints the same JSON, ids and logprob bits on both, and each receipt (which
# records the schema, bias and penalties) verifies on the other.
file(WRITE ${DIR}/npc.json [=[{"type": "object", "properties": {"line": {"type": "string", "maxLength": 24},
  "action": {"enum": ["talk", "give_item", "flee"]}}, "required": ["line", "action"]}]=])
set(gen generate --model ${STORIES} --prompt "The wizard answered:" --max-tokens 80 --temperature 0.9 --seed 9
    --deterministic --print-ids --print-logprobs --stats=false --threads 2 --json_schema ${DIR}/npc.json
    --logit_bias 100=-inf,300=2 --repeat_penalty 1.2 --frequency_penalty 0.1)
run(0 linux ${LINUX_CLI} ${gen} --receipt ${DIR}/linux-npc.bin)
run(0 windows ${CMAKE_COMMAND} -E env LLM42_CPU_SIMD=avx2 ${win} ${gen} --receipt ${DIR}/windows-npc.bin)
string(REGEX REPLACE "llm42: receipt written[^\n]*\n?" "" linux "${linux}")
string(REGEX REPLACE "llm42: receipt written[^\n]*\n?" "" windows "${windows}")
if(NOT linux STREQUAL windows OR NOT linux MATCHES "\"action\"")
  message(FATAL_ERROR "constrained: Windows printed\n${windows}\nwhere Linux printed\n${linux}")
endif()
run(0 out ${win} verify --model ${STORIES} ${DIR}/linux-npc.bin)
run(0 out2 ${LINUX_CLI} verify --model ${STORIES} ${DIR}/windows-npc.bin)
if(NOT out MATCHES "^REPRODUCED" OR NOT out2 MATCHES "^REPRODUCED")
  message(FATAL_ERROR "constrained receipts across systems:\n${out}\n${out2}")
endif()
message(STATUS "constrained output: the same JSON and bits on both systems; both receipts REPRODUCED")

# The control: another model's receipt is refused, on either system.
run(1 out ${win} verify --model ${STORIES} ${DIR}/linux-2.bin)
if(NOT out MATCHES "^OTHER MODEL")
  message(FATAL_ERROR "a receipt verified against another model was not refused by model:\n${out}")
endif()
