// llm42 — command-line front end: `llm42 COMMAND [flags]`.
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "lib/util/platform.h"
#include "tools/llm42/commands.h"

namespace {

constexpr char kUsage[] =
    "usage: llm42 COMMAND [flags]\n"
    "  generate --model PATH --prompt TEXT [--max_tokens N] [--temperature T] [--top_k K]\n"
    "           [--top_p P] [--min_p P] [--seed S] [--threads N] [--stop A,B] [--print_ids]\n"
    "           [--deterministic [--receipt FILE]] [--grammar GBNF_FILE | --json_schema FILE]\n"
    "           [--logit_bias ID=BIAS,...] [--repeat_penalty X [--repeat_last_n N]]\n"
    "           [--frequency_penalty X] [--presence_penalty X]\n"
    "           streams a completion to stdout; --receipt writes its reproducibility receipt\n"
    "  verify --model PATH RECEIPT\n"
    "           replays a receipt: REPRODUCED (exit 0), or what differs and where (exit 1)\n"
    "  info --model PATH [--fingerprint]\n"
    "           prints the model's metadata summary (and its SHA-256 fingerprint)\n"
    "  chat --model PATH [--system TEXT] [--deterministic] [sampling flags as generate]\n"
    "           interactive chat in the model's chat format; keeps the conversation\n"
    "  tokenize --model PATH [--no-bos] [--ids]\n"
    "           token ids of stdin's text (one 'id<TAB>piece' per line; --ids: ids only)\n"
    "  make-model --preset tiny|tiny-qwen2|tiny-qwen3|tiny-llama3|llama-110m|llama-1b|...\n           --dtype f32|f16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1|q2_k..q6_k|iq4_nl|iq4_xs|mxfp4 --out FILE\n"
    "           [--vocab GGUF] [--seed S] [--chat-template JINJA]   writes a random-weight GGUF\n"
    "  bench --model PATH [--concurrency 1,4,8,16] [--schedules fast,fixed]\n"
    "           [--prompt_tokens P] [--output_tokens O] [--threads N]\n"
    "           throughput and latency of concurrent requests, as a markdown table\n"
    "  bench --model PATH --pp N --tg N [--depth D]   llama-bench's pp/tg at a context depth\n"
    "  bench --model PATH --batched NPP,NTG,NPL,...   llama-batched-bench's columns\n"
    "  bench --model PATH --json_schema FILE [--output_tokens N] [--rounds R] [--deterministic]\n"
    "           grammar compile time, constrained vs unconstrained decode, mask time per token\n"
    "           (each with the FMA peak and read bandwidth measured in the same run)\n"
    "  bench-dvr --model PATH [--workload sharegpt|fixed] [--requests N] [--rate R] [--repeat N]\n"
    "           [--fractions 0.02,0.1,...] [--windows ...] [--groups ...] [--csv FILE]\n"
    "           modes off / batch_invariant / selective on a Poisson workload, and the W x G sweep\n"
    "  bench-chat --model PATH [--turns 20] [--system_tokens 1000] [--characters 8]\n"
    "           time to first token per chat turn and shared-persona prefill, prefix cache on/off\n"
    "  bench-template --template_file JINJA [--turns 20] [--tools 10] [--render_rounds 200]\n"
    "           rendering a conversation with tools through a chat template: median and slowest ms\n"
    "  bench-sampling [--vocab_sizes 32000,128256] [--rows 256] [--threads N] [--draw_backend cuda]\n"
    "           host-side draws: per draw, and a step's rows on one thread and on N\n"
    "Flags also accept dashes (--max-tokens). Run `llm42 COMMAND --help` for every flag.";

// absl flags are spelled with underscores; accept the dashed spellings people type.
std::vector<std::string> NormalizeFlags(std::vector<std::string> args) {
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& a = args[i];
    if (a.rfind("--", 0) != 0) continue;
    const size_t end = std::min(a.find('='), a.size());
    for (size_t j = 2; j < end; ++j) {
      if (a[j] == '-') a[j] = '_';
    }
  }
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  // --help lists flags under the file that defines them: its path from the source tree's
  // tools/llm42/ (the tool's own flags), else its name; never the build machine's path.
  absl::FlagsUsageConfig usage;
  usage.normalize_filename = [](absl::string_view path) {
    const size_t tool = path.rfind("tools/llm42/");
    if (tool != absl::string_view::npos) return std::string(path.substr(tool));
    const size_t slash = path.rfind('/');
    return std::string(slash == absl::string_view::npos ? path : path.substr(slash + 1));
  };
  // `llm42 COMMAND --help` lists the tool's own flags (absl's default picks the files named after
  // the program, and the command stands in argv[0]'s place, so it listed none).
  usage.contains_help_flags = [](absl::string_view path) { return absl::StartsWith(path, "tools/llm42/"); };
  absl::SetFlagsUsageConfig(usage);
  llm42::platform::UseUtf8Console();
  std::vector<std::string> args = llm42::platform::Utf8Arguments(argc, argv);
  if (args.size() < 2 || args[1] == "--help" || args[1] == "help") {
    std::cerr << kUsage << "\n";
    return args.size() < 2 ? 2 : 0;
  }
  const std::string command = args[1];
  // The command takes argv[0]'s place so absl parses only the flags after it.
  args = NormalizeFlags(std::vector<std::string>(args.begin() + 1, args.end()));
  std::vector<char*> ptrs;
  for (std::string& a : args) ptrs.push_back(a.data());
  const std::vector<char*> rest = absl::ParseCommandLine(static_cast<int>(ptrs.size()), ptrs.data());
  if (command == "verify") return llm42::cli::Verify(std::vector<std::string>(rest.begin() + 1, rest.end()));
  if (command == "generate") return llm42::cli::Generate();
  if (command == "info") return llm42::cli::Info();
  if (command == "tokenize") return llm42::cli::Tokenize();
  if (command == "chat") return llm42::cli::Chat();
  if (command == "make-model") return llm42::cli::MakeModel();
  if (command == "bench") return llm42::cli::Bench();
  if (command == "bench-dvr") return llm42::cli::BenchDvr();
  if (command == "bench-chat") return llm42::cli::BenchChat();
  if (command == "bench-template") return llm42::cli::BenchTemplate();
  if (command == "bench-sampling") return llm42::cli::BenchSampling();
  std::cerr << "llm42: unknown command '" << command << "'\n" << kUsage << "\n";
  return 2;
}
