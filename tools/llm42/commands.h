#ifndef LLM42_TOOLS_LLM42_COMMANDS_H_
#define LLM42_TOOLS_LLM42_COMMANDS_H_

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

}  // namespace llm42::cli

#endif  // LLM42_TOOLS_LLM42_COMMANDS_H_
