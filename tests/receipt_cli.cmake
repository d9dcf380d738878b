# `llm42 generate --deterministic --receipt` and `llm42 verify`, run for real:
#   -DCLI=llm42 -DMODEL=m.gguf -DDIR=scratch
# A binary and a text receipt are REPRODUCED (exit 0); an edited text receipt is refused by its
# digest, a replay with another KV type is OTHER SCHEDULE, and a plain request gets no receipt
# (exit 1 each, with the reason). A receipt cut short by its context replays to the same end.
file(MAKE_DIRECTORY ${DIR})
set(gen ${CLI} generate --model ${MODEL} --prompt "Once upon a time" --max-tokens 24 --temperature 0.8
    --seed 11 --threads 2 --stats=false)
include(${CMAKE_CURRENT_LIST_DIR}/cli_run.cmake)

run(0 "receipt written" ${gen} --deterministic --print-logprobs --receipt ${DIR}/r.bin)
run(0 "^REPRODUCED: 24 tokens and their logprob bits" ${CLI} verify --model ${MODEL} ${DIR}/r.bin)
run(0 "receipt written" ${gen} --deterministic --receipt ${DIR}/r.txtpb)
run(0 "^REPRODUCED: 24 tokens of model" ${CLI} verify --model ${MODEL} ${DIR}/r.txtpb)
run(1 "OTHER SCHEDULE: .*KV type" ${CLI} verify --model ${MODEL} --kv_dtype f16 ${DIR}/r.bin)

file(READ ${DIR}/r.txtpb text)
string(REGEX MATCH "output_tokens: ([0-9]+)" first "${text}")
math(EXPR changed "${CMAKE_MATCH_1} + 1")
string(FIND "${text}" "${first}" at)
string(LENGTH "${first}" len)
string(SUBSTRING "${text}" 0 ${at} head)
math(EXPR tail_at "${at} + ${len}")
string(SUBSTRING "${text}" ${tail_at} -1 tail)
file(WRITE ${DIR}/edited.txtpb "${head}output_tokens: ${changed}${tail}")
run(1 "digest does not match" ${CLI} verify --model ${MODEL} ${DIR}/edited.txtpb)

run(1 "deterministic" ${gen} --receipt ${DIR}/plain.bin)

# An output cut short by a 64-position context: its receipt replays to the same end in verify's
# default context, and a context too small to hold it is refused by name.
run(0 "receipt written" ${gen} --deterministic --context 64 --max-tokens 200 --ignore_eos --receipt ${DIR}/short.bin)
run(0 "^REPRODUCED: [0-9]+ tokens of model" ${CLI} verify --model ${MODEL} ${DIR}/short.bin)
run(1 "context of at least 64" ${CLI} verify --model ${MODEL} --context 48 ${DIR}/short.bin)

# The full unsigned range of seeds (issue 55): 2^64 - 1 is taken and recorded, and its receipt
# replays; one past it, and a negative seed other than -1 (random, as the signed flag had it),
# are refused by name.
run(0 "receipt written" ${CLI} generate --model ${MODEL} --prompt "Once upon a time" --max-tokens 12 --temperature 0.8
    --seed 18446744073709551615 --threads 2 --stats=false --deterministic --receipt ${DIR}/max_seed.txtpb)
file(READ ${DIR}/max_seed.txtpb text)
if(NOT text MATCHES "seed: 18446744073709551615")
  message(FATAL_ERROR "the receipt does not record seed 2^64 - 1:\n${text}")
endif()
run(0 "^REPRODUCED: 12 tokens of model" ${CLI} verify --model ${MODEL} ${DIR}/max_seed.txtpb)
run(1 "--seed must be an integer from 0 to 18446744073709551615 or 'random', not '18446744073709551616'"
    ${CLI} generate --model ${MODEL} --prompt x --seed 18446744073709551616)
run(1 "not '-2'" ${CLI} generate --model ${MODEL} --prompt x --seed -2)
