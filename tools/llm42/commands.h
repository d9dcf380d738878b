#ifndef LLM42_TOOLS_LLM42_COMMANDS_H_
#define LLM42_TOOLS_LLM42_COMMANDS_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace llm42::api {
class Request;
class SessionOptions;
}  // namespace llm42::api

namespace llm42::cli {

// Each returns the process exit code.
int Generate();
int Info();
int Tokenize();
int Chat();
int MakeModel();
int Bench();
int BenchDvr();
int BenchChat();
int BenchTemplate();
int BenchSampling();
// `llm42 bench --json_schema FILE` (grammar_bench.cc).
int BenchJsonSchema();
// `llm42 verify --model PATH RECEIPT` (args: the positional arguments after the command).
int Verify(const std::vector<std::string>& args);

// Shared by the commands (commands.cc).
api::SessionOptions SessionOptionsFromFlags();
// Runs `body` when --model is set (else a usage message and 2), turning an API failure into a
// message and 1.
int RunWithModel(const std::function<int()>& body);
// The whole file's bytes; nullopt when it cannot be read.
std::optional<std::string> ReadFileBytes(const std::string& path);
// Writes request's receipt to `path`: text format for .txtpb/.textproto/.txt, else binary.
bool WriteReceiptFile(api::Request& request, const std::string& path);

}  // namespace llm42::cli

#endif  // LLM42_TOOLS_LLM42_COMMANDS_H_
