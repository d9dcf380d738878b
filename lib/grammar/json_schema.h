#ifndef LLM42_GRAMMAR_JSON_SCHEMA_H_
#define LLM42_GRAMMAR_JSON_SCHEMA_H_

// JSON Schema to GBNF: a grammar whose sentences are JSON texts valid under the schema.
//
// Supported: `type` (string, number, integer, boolean, null, object, array, or a list of them),
// `properties`, `required`, `additionalProperties` (false, true or a schema; when absent, an
// object with `properties` or `required` gets no others, one without any members), `items`, `prefixItems`, `minItems`/`maxItems`,
// `enum`, `const`, `anyOf`/`oneOf` (oneOf's exclusivity is not enforced: an output may match
// several), `$ref` to `#`, `#/$defs/NAME` or `#/definitions/NAME` (recursion allowed), `minLength`/
// `maxLength`, `minimum`/`maximum`/`exclusiveMinimum`/`exclusiveMaximum` on integers (|x| <= 1e18),
// `pattern`, and `format` date, time, date-time and uuid. `{}` and `true` mean any JSON value.
// Annotations ($schema, $id, $comment, title, description, default, examples, deprecated,
// readOnly, writeOnly) are allowed and change nothing; any other keyword is refused by name.
//
// Properties are generated in the schema's order; whitespace between tokens is limited to one
// space or a newline and up to 20 indentation characters (so that a model cannot pad forever);
// numbers to 16 integer digits and exponents of 2 digits (so that every number generated is a
// finite double: a JSON parser refuses or overflows 1e864).
//
// `pattern` is read as an ECMA-262 regular expression of this subset, matched against the whole
// string (what matches wholly also matches the schema's search anywhere): literals, `.`, classes
// `[...]` and `[^...]` with ranges, the escapes \d \D \w \W \s \S \n \r \t \f \v \\ \uHHHH and
// escaped punctuation, groups `(...)` and `(?:...)`, `|`, and the greedy quantifiers ? * + {n}
// {n,} {n,m}; `^` and `$` only at the ends. Refused: backreferences, lookaround, lazy
// quantifiers, word boundaries, named groups. Characters a JSON string must escape are generated
// escaped (\" and \\); control characters are never generated.
//
// Errors are INVALID_ARGUMENT, and name the JSON pointer of the offending schema.
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace llm42 {

absl::StatusOr<std::string> JsonSchemaToGbnf(std::string_view schema);

// For a grammar holding several schemas' sentences (a tool call's arguments, per tool): the
// schema's rules as `name ::= ...` and the rules that needs, each named `name`-N; they refer to
// the helper rules JsonGbnfHelpers() holds (ws, value, string, number, ...), which the grammar
// includes once.
absl::StatusOr<std::string> JsonSchemaToGbnfRules(std::string_view schema, std::string_view name);
std::string_view JsonGbnfHelpers();

}  // namespace llm42

#endif  // LLM42_GRAMMAR_JSON_SCHEMA_H_
