# `llm42 generate` with --json_schema, --grammar, --logit_bias and the penalties, run for real:
#   -DCLI=llm42 -DMODEL=m.gguf -DDIR=scratch
# The schema's output is JSON with the schema's fields (CMake's own JSON parser reads it) and a
# deterministic one's receipt, which records the schema, bias and penalties, is REPRODUCED; a GBNF
# grammar's output matches it; a malformed grammar, an unsupported schema keyword and a malformed
# --logit_bias exit 1 naming the problem.
file(MAKE_DIRECTORY ${DIR})
file(WRITE ${DIR}/mood.json [=[{"type": "object", "properties": {"mood": {"enum": ["happy", "sad"]},
  "n": {"type": "integer", "minimum": 1, "maximum": 9}}, "required": ["mood", "n"]}]=])
file(WRITE ${DIR}/yesno.gbnf "root ::= (\"yes\" | \"no\") \"!\"\n")
file(WRITE ${DIR}/bad.gbnf "root ::= (\"a\" | \"b\"\n")
file(WRITE ${DIR}/email.json [=[{"type": "string", "format": "email"}]=])
set(gen ${CLI} generate --model ${MODEL} --prompt "Once upon a time" --max-tokens 120 --temperature 0.8
    --seed 5 --threads 2 --stats=false)
include(${CMAKE_CURRENT_LIST_DIR}/cli_run.cmake)

run(0 "receipt written" ${gen} --json_schema ${DIR}/mood.json --logit_bias 100=-inf,200=1.5 --repeat_penalty 1.2
    --repeat_last_n 32 --frequency_penalty 0.1 --presence_penalty 0.1 --deterministic --receipt ${DIR}/mood.txtpb)
string(REPLACE "Once upon a time" "" json "${out}")
string(JSON mood ERROR_VARIABLE bad GET "${json}" mood)
string(JSON n ERROR_VARIABLE bad_n GET "${json}" n)
if(bad OR bad_n OR NOT mood MATCHES "^(happy|sad)$" OR n LESS 1 OR n GREATER 9)
  message(FATAL_ERROR "not the schema's JSON: '${json}' (${bad} ${bad_n})")
endif()
file(READ ${DIR}/mood.txtpb receipt)
if(NOT receipt MATCHES "grammar_kind: OUTPUT_GRAMMAR_JSON_SCHEMA" OR NOT receipt MATCHES "frequency_penalty: 0.1"
   OR NOT receipt MATCHES "token: 100")
  message(FATAL_ERROR "the receipt does not record the schema, penalties and bias:\n${receipt}")
endif()
run(0 "^REPRODUCED" ${CLI} verify --model ${MODEL} ${DIR}/mood.txtpb)
run(0 "^Once upon a time(yes|no)!\n?$" ${gen} --grammar ${DIR}/yesno.gbnf)
run(1 "grammar line 1, column 10: unbalanced" ${gen} --grammar ${DIR}/bad.gbnf)
run(1 "the format 'email'" ${gen} --json_schema ${DIR}/email.json)
run(1 "--logit_bias takes ID=BIAS" ${gen} --logit_bias 7)
message(STATUS "${json}")
