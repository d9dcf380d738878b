#include "tools/llm42/commands.h"

#include <chrono>
#include <filesystem>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "lib/model/fingerprint.h"
#include "lib/format/gguf_reader.h"
#include "lib/model/model_file.h"
#include "lib/model/model_config.h"
#include "lib/util/platform.h"
#include "lib/maker/model_maker.h"
#include "llm42/llm42.hpp"
#include "llm42/llm42_testing.h"

ABSL_FLAG(std::string, model, "", "Path of a GGUF model file");
ABSL_FLAG(std::string, prompt, "", "Prompt text");
ABSL_FLAG(int32_t, max_tokens, 128, "Tokens to generate");
ABSL_FLAG(float, temperature, 0.0f, "Sampling temperature; 0 = greedy");
ABSL_FLAG(int32_t, top_k, 0, "Keep the k most likely tokens; 0 = off");
ABSL_FLAG(float, top_p, 1.0f, "Nucleus sampling mass; 1 = off");
ABSL_FLAG(float, min_p, 0.0f, "Drop tokens below min_p times the best probability; 0 = off");
ABSL_FLAG(std::string, seed, "random",
          "Sampling seed, 0 to 18446744073709551615 (2^64 - 1), or 'random' (the default; -1 also means it): a "
          "deterministic request then uses the session's default seed, any other draws one");
ABSL_FLAG(std::string, grammar, "", "Constrain the output to the GBNF grammar in this file (llama.cpp's syntax)");
ABSL_FLAG(std::string, json_schema, "", "Constrain the output to JSON valid under the JSON Schema in this file");
ABSL_FLAG(std::vector<std::string>, logit_bias, {},
          "Comma-separated ID=BIAS pairs added to the tokens' logits (BIAS -inf bans the token)");
ABSL_FLAG(float, repeat_penalty, 1.0f, "llama.cpp's repetition penalty over the last --repeat_last_n tokens; 1 = off");
ABSL_FLAG(int32_t, repeat_last_n, 64, "Tokens the penalties look back over, the prompt's included; 0 = all");
ABSL_FLAG(float, frequency_penalty, 0.0f, "Lower a token's logit by this times its count in the window; 0 = off");
ABSL_FLAG(float, presence_penalty, 0.0f, "Lower the logit of every token in the window by this; 0 = off");
ABSL_FLAG(int32_t, threads, 0, "Worker threads; 0 = all cores");
ABSL_FLAG(int32_t, context, 0, "Context length; 0 = the model's (at most 4096)");
ABSL_FLAG(std::vector<std::string>, stop, {}, "Comma-separated stop strings");
ABSL_FLAG(bool, ignore_eos, false, "Keep generating after the end-of-sequence token");
ABSL_FLAG(bool, print_ids, false, "Print the generated token ids after the text");
ABSL_FLAG(bool, deterministic, false,
          "Bitwise-reproducible output (verified against the fixed schedule; default seed 42)");
ABSL_FLAG(std::string, draft, "none",
          "A deterministic request's draft source: ngram (prompt lookup; the output is the same bits) or none");
ABSL_FLAG(bool, print_logprobs, false,
          "Print each generated token's logprob as a hexadecimal float (every bit) after the text");
ABSL_FLAG(double, fast_path_noise, 0.0,
          "Testing hook: add N(0, x) noise to fast-path logits (keyed at random per process)");
ABSL_FLAG(std::string, backend, "auto", "Where to run: auto (CUDA when a usable GPU exists), cpu or cuda");
ABSL_FLAG(bool, prefix_caching, true,
          "Reuse cached KV blocks for prompts that start with the same tokens (bitwise exact for deterministic requests)");
ABSL_FLAG(bool, kv_prefault, false,
          "Make the whole KV cache resident at startup, so that no generation step waits on the system "
          "zeroing fresh pages (llm42 bench always does, as llama.cpp's tools)");
ABSL_FLAG(std::string, kv_dtype, "auto",
          "KV cache element type: auto (the backend's), f32, f16 or bf16 (half the memory and attention reads)");
ABSL_FLAG(std::string, decode_path, "auto",
          "How deterministic requests decode: auto (cheaper by measured cost), verify "
          "(fast, then verified) or fixed (fixed schedule, nothing to verify)");
ABSL_FLAG(bool, stats, true, "Print timing to stderr at the end");
ABSL_FLAG(std::string, receipt, "",
          "generate: write the request's reproducibility receipt here (needs --deterministic; text "
          "format for .txtpb/.textproto/.txt, else binary); check it with `llm42 verify`");
ABSL_FLAG(bool, print_prompt_logprobs, false,
          "generate: also print the logprob of each prompt token after the ones before it (hex floats)");
ABSL_FLAG(int32_t, top_logprobs, 0,
          "generate: also print the N most likely tokens and their logprobs at every position (0..20)");
ABSL_FLAG(bool, fingerprint, false, "info: also print the model's SHA-256 fingerprint (reads every weight byte)");
ABSL_FLAG(std::string, system, "", "chat: system message");
ABSL_FLAG(bool, no_bos, false, "tokenize: do not add the model's BOS/EOS tokens");
ABSL_FLAG(bool, ids, false, "tokenize: print only the ids, separated by spaces");
ABSL_FLAG(std::string, preset, "tiny", "make-model: a preset's name (tiny, llama-110m, ...; an unknown name lists them all)");
ABSL_FLAG(std::string, dtype, "f32", "make-model: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k ... q6_k, iq4_nl, iq4_xs or mxfp4");
ABSL_FLAG(std::string, out, "", "make-model: output GGUF path");
ABSL_FLAG(std::string, chat_template, "", "make-model: Jinja chat template file to embed");
ABSL_FLAG(std::string, vocab, "",
          "make-model: GGUF whose vocabulary the model gets (default: the Llama 2 vocabulary in "
          "$LLM42_SHARED_DIR/vocab, or in the shared/vocab folder beside the llm42 checkout)");

namespace llm42::cli {
namespace {

using Clock = std::chrono::steady_clock;

bool RequireModel() {
  if (!absl::GetFlag(FLAGS_model).empty()) return true;
  std::cerr << "llm42: --model PATH is required\n";
  return false;
}

constexpr char kDefaultVocab[] = "ggml-vocab-llama-spm.gguf";

// The default vocabulary of make-model: $LLM42_SHARED_DIR/vocab/..., else shared/vocab/...
// in the nearest ancestor of this executable's folder that has one (the checkout's parent,
// where ../shared lives), so that make-model works from any directory.
std::string DefaultVocabPath() {
  namespace fs = std::filesystem;
  if (const char* dir = std::getenv("LLM42_SHARED_DIR"); dir != nullptr) {
    const fs::path p = fs::path(dir) / "vocab" / kDefaultVocab;
    return fs::exists(p) ? platform::PathUtf8(p) : std::string();
  }
  for (fs::path a = platform::ExecutablePath().parent_path(); !a.empty(); a = a.parent_path()) {
    const fs::path p = a / "shared" / "vocab" / kDefaultVocab;
    if (fs::exists(p)) return platform::PathUtf8(p);
    if (a == a.root_path()) break;
  }
  return std::string();
}

llm42_decode_path DecodePathFromFlag() {
  const std::string path = absl::GetFlag(FLAGS_decode_path);
  if (path == "auto") return LLM42_DECODE_PATH_AUTO;
  if (path == "verify") return LLM42_DECODE_PATH_VERIFY;
  if (path == "fixed") return LLM42_DECODE_PATH_FIXED;
  throw api::Error(LLM42_INVALID_ARGUMENT, "--decode_path must be auto, verify or fixed, not '" + path + "'");
}


// --seed: a seed, or none for 'random' (and -1, which meant it when the flag was signed).
std::optional<uint64_t> SeedFlag() {
  const std::string text = absl::GetFlag(FLAGS_seed);
  if (text == "random" || text == "-1") return std::nullopt;
  uint64_t seed = 0;
  if (text.empty() || text[0] == '-' || text[0] == '+' || !absl::SimpleAtoi(text, &seed)) {
    throw api::Error(LLM42_INVALID_ARGUMENT,
                     "--seed must be an integer from 0 to 18446744073709551615 or 'random', not '" + text + "'");
  }
  return seed;
}

// Length, sampling, seed and determinism from the flags.
void ApplyGenerationFlags(api::RequestOptions& ro) {
  ro.SetMaxTokens(absl::GetFlag(FLAGS_max_tokens))
      .SetTemperature(absl::GetFlag(FLAGS_temperature))
      .SetTopK(absl::GetFlag(FLAGS_top_k))
      .SetTopP(absl::GetFlag(FLAGS_top_p))
      .SetMinP(absl::GetFlag(FLAGS_min_p))
      .SetDeterministic(absl::GetFlag(FLAGS_deterministic))
      .SetDraft(absl::GetFlag(FLAGS_draft))
      .SetLogprobs(absl::GetFlag(FLAGS_print_logprobs))
      .SetTopLogprobs(absl::GetFlag(FLAGS_top_logprobs))
      .SetPromptLogprobs(absl::GetFlag(FLAGS_print_prompt_logprobs));
  if (const std::optional<uint64_t> seed = SeedFlag()) ro.SetSeed(*seed);
  ro.SetRepetitionPenalty(absl::GetFlag(FLAGS_repeat_penalty), absl::GetFlag(FLAGS_repeat_last_n))
      .SetFrequencyPenalty(absl::GetFlag(FLAGS_frequency_penalty))
      .SetPresencePenalty(absl::GetFlag(FLAGS_presence_penalty));
  for (const std::string& pair : absl::GetFlag(FLAGS_logit_bias)) {
    const size_t eq = pair.find('=');
    int32_t id = 0;
    float bias = 0;
    const std::string value = eq == std::string::npos ? "" : pair.substr(eq + 1);
    const bool ok = eq != std::string::npos && absl::SimpleAtoi(pair.substr(0, eq), &id) &&
                    (value == "-inf" || absl::SimpleAtof(value, &bias));
    if (!ok) throw api::Error(LLM42_INVALID_ARGUMENT, "--logit_bias takes ID=BIAS pairs, not '" + pair + "'");
    ro.SetLogitBias(id, value == "-inf" ? -INFINITY : bias);
  }
  for (const auto& [flag, path] : {std::pair{"--grammar", absl::GetFlag(FLAGS_grammar)},
                                   std::pair{"--json_schema", absl::GetFlag(FLAGS_json_schema)}}) {
    if (path.empty()) continue;
    const std::optional<std::string> text = ReadFileBytes(path);
    if (!text) throw api::Error(LLM42_NOT_FOUND, std::string(flag) + ": cannot read " + path);
    if (std::string_view(flag) == "--grammar") {
      ro.SetGrammar(*text);
    } else {
      ro.SetJsonSchema(*text);
    }
  }
}

// Runs a command that needs --model, turning an API failure into a message and exit code 1.
template <typename Body>
int WithModel(Body body) {
  if (!RequireModel()) return 2;
  try {
    return body();
  } catch (const api::Error& e) {
    std::cerr << "llm42: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace

std::optional<std::string> ReadFileBytes(const std::string& path) {
  std::ifstream in(platform::Utf8Path(path), std::ios::binary);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

api::SessionOptions SessionOptionsFromFlags() {
  api::SessionOptions so;
  so.SetModelPath(absl::GetFlag(FLAGS_model))
      .SetThreads(absl::GetFlag(FLAGS_threads))
      .SetBackend(absl::GetFlag(FLAGS_backend))
      .SetKvDtype(absl::GetFlag(FLAGS_kv_dtype))
      .SetPrefixCaching(absl::GetFlag(FLAGS_prefix_caching))
      .SetKvPrefault(absl::GetFlag(FLAGS_kv_prefault));
  if (absl::GetFlag(FLAGS_context) > 0) so.SetContextLength(absl::GetFlag(FLAGS_context));
  api::DeterminismPolicy policy;
  policy.SetDecodePath(DecodePathFromFlag());
  api::detail::Check(llm42_determinism_set_fast_path_noise(policy.get(), absl::GetFlag(FLAGS_fast_path_noise)));
  so.SetDeterminism(policy);
  return so;
}

int RunWithModel(const std::function<int()>& body) { return WithModel(body); }

int Generate() {
  return WithModel([] {
    api::Session session(SessionOptionsFromFlags());
    api::RequestOptions ro;
    ro.SetPrompt(absl::GetFlag(FLAGS_prompt)).SetIgnoreEos(absl::GetFlag(FLAGS_ignore_eos));
    ApplyGenerationFlags(ro);
    for (const std::string& s : absl::GetFlag(FLAGS_stop)) {
      if (!s.empty()) ro.AddStop(s);
    }

    const auto start = Clock::now();
    api::Request request = session.Submit(ro);
    std::cout << absl::GetFlag(FLAGS_prompt) << std::flush;
    Clock::time_point last = start;
    try {
      while (const std::optional<std::string> piece = request.ReadText(-1)) {
        last = Clock::now();
        std::cout << *piece << std::flush;
      }
    } catch (const api::Error& e) {  // the request ended in an error (or was cancelled)
      std::cout << "\n";
      std::cerr << "llm42: generation failed: " << e.what() << "\n";
      return 1;
    }
    std::cout << "\n";
    const std::vector<int32_t> ids = request.OutputTokens();
    if (absl::GetFlag(FLAGS_print_ids)) std::cout << absl::StrJoin(ids, " ") << "\n";
    if (absl::GetFlag(FLAGS_print_logprobs)) {
      for (float lp : request.Logprobs()) std::cout << absl::StrFormat("%a ", lp);
      std::cout << "\n";
    }
    if (absl::GetFlag(FLAGS_print_prompt_logprobs)) {
      std::cout << "prompt:";
      for (float lp : request.PromptLogprobs()) std::cout << absl::StrFormat(" %a", lp);
      std::cout << "\n";
    }
    if (const int32_t top = absl::GetFlag(FLAGS_top_logprobs); top > 0) {
      const std::vector<std::pair<int32_t, float>> entries = request.TopLogprobs();
      for (size_t i = 0; i + static_cast<size_t>(top) <= entries.size(); i += static_cast<size_t>(top)) {
        std::cout << "#" << i / static_cast<size_t>(top) << " " << ids[i / static_cast<size_t>(top)] << ":";
        for (size_t j = i; j < i + static_cast<size_t>(top); ++j) {
          std::cout << absl::StrFormat(" %d '%s' %.4f", entries[j].first, session.Detokenize({entries[j].first}),
                                       entries[j].second);
        }
        std::cout << "\n";
      }
    }
    if (!absl::GetFlag(FLAGS_receipt).empty() && !WriteReceiptFile(request, absl::GetFlag(FLAGS_receipt))) return 1;
    if (absl::GetFlag(FLAGS_stats)) {
      const int64_t n = static_cast<int64_t>(ids.size());
      const double ttft_ms = request.Stat(LLM42_STAT_TIME_TO_FIRST_TOKEN_US) / 1000.0;
      // The tokens after the first, from the request's own first-token time (measured from its
      // submission) to the last text's arrival: a deterministic request's tokens arrive a
      // verified window at a time, so the first chunk's arrival would overstate the rate.
      const double decode_s = std::chrono::duration<double>(last - start).count() - ttft_ms / 1000.0;
      const double total_s = std::chrono::duration<double>(Clock::now() - start).count();
      const std::string decode = n > 1 && decode_s > 0 ? absl::StrFormat("%.1f tokens/s", static_cast<double>(n - 1) / decode_s)
                                                       : std::string("n/a (one token, or all with the first)");
      std::cerr << absl::StrFormat(
          "llm42: %d prompt tokens, %d generated; first token %.2f ms; decode %s; total %.3f s; finish %s; seed %d\n",
          request.Stat(LLM42_STAT_PREFILL_TOKENS), n, ttft_ms, decode, total_s,
          request.FinishReason() == LLM42_FINISH_STOP ? "stop" : "length", request.EffectiveSeed());
      if (request.Stat(LLM42_STAT_DRAFT_TOKENS) > 0) {
        std::cerr << absl::StrFormat("llm42: %d tokens drafted, %d accepted; %d verify passes\n",
                                     request.Stat(LLM42_STAT_DRAFT_TOKENS), request.Stat(LLM42_STAT_DRAFT_TOKENS_ACCEPTED),
                                     request.Stat(LLM42_STAT_VERIFY_PASSES));
      }
    }
    return 0;
  });
}

// Each turn continues the last (llm42_request_options_set_parent): the conversation is rendered
// again, and its history's K/V come from the prefix cache instead of a prefill.
int Chat() {
  return WithModel([] {
    api::Session session(SessionOptionsFromFlags());
    std::unique_ptr<api::Request> last;  // the conversation so far
    std::cerr << "llm42 chat: type a message; /reset starts over, /exit (or end of input) quits\n";
    for (std::string line;;) {
      std::cerr << "> " << std::flush;
      if (!std::getline(std::cin, line) || line == "/exit") break;
      if (line == "/reset") {
        last.reset();
        continue;
      }
      if (line.empty()) continue;
      api::RequestOptions ro;
      if (last) {
        ro.SetParent(*last);
      } else if (!absl::GetFlag(FLAGS_system).empty()) {
        ro.AddMessage("system", absl::GetFlag(FLAGS_system));
      }
      ro.AddMessage("user", line);
      ApplyGenerationFlags(ro);
      try {
        api::Request request = session.Submit(ro);
        while (const std::optional<std::string> piece = request.ReadText(-1)) std::cout << *piece << std::flush;
        std::cout << "\n" << std::flush;
        last = std::make_unique<api::Request>(std::move(request));
      } catch (const api::Error& e) {
        std::cerr << "llm42: " << e.what() << "\n";
        if (e.status() == LLM42_UNSUPPORTED) return 1;  // every turn would fail the same way
        std::cerr << "llm42: the turn is dropped (/reset if the context is full)\n";
      }
    }
    return 0;
  });
}

int Tokenize() {
  return WithModel([] {
    api::SessionOptions so;
    so.SetModelPath(absl::GetFlag(FLAGS_model)).SetVocabOnly();
    api::Session session(so);
    const std::string text{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
    const std::vector<int32_t> ids = session.Tokenize(text, !absl::GetFlag(FLAGS_no_bos));
    if (absl::GetFlag(FLAGS_ids)) {
      std::cout << absl::StrJoin(ids, " ") << "\n";
    } else {
      for (int32_t id : ids) std::cout << id << "\t'" << session.Detokenize({id}) << "'\n";
    }
    return 0;
  });
}

int Info() {
  if (!RequireModel()) return 2;
  auto file = OpenModel(absl::GetFlag(FLAGS_model));
  if (!file.ok()) {
    std::cerr << "llm42: " << file.status().message() << "\n";
    return 1;
  }
  const GgufFile& f = **file;
  const std::string format = std::filesystem::is_directory(platform::Utf8Path(f.path()))
                                 ? std::string("Hugging Face directory, as GGUF")
                                 : absl::StrCat("GGUF v", f.version());
  std::cout << absl::StrFormat("file:        %s (%.2f MiB, %s, %d tensors, %d metadata keys)\n",
                               f.path(), f.file_size() / 1048576.0, format, f.tensors().size(),
                               f.metadata().size());
  auto config = ModelConfig::FromGguf(f);
  if (config.ok()) {
    const ModelConfig& c = *config;
    int64_t params = 0;
    std::map<std::string, int64_t> by_type;
    for (const GgufTensorInfo& t : f.tensors()) {
      params += t.n_elements();
      by_type[std::string(GetGgmlTypeInfo(static_cast<uint32_t>(t.type))->name)] += 1;
    }
    std::vector<std::string> types;
    for (const auto& [name, count] : by_type) types.push_back(absl::StrCat(name, " x", count));
    std::cout << absl::StrFormat(
        "model:       %s '%s', %d parameters (%s)\n"
        "shape:       %d layers, n_embd %d, n_ff %d, %d heads, %d KV heads, head dim %d\n"
        "rope:        %d dims, base %g%s; rms eps %g; trained context %d\n",
        c.architecture, c.name, params, absl::StrJoin(types, ", "), c.n_layer, c.n_embd, c.n_ff,
        c.n_head, c.n_head_kv, c.head_dim, c.n_rot, c.rope_freq_base,
        c.yarn.factor > 0 ? absl::StrFormat(", YaRN x%g over %g positions", c.yarn.factor, c.yarn.original_context)
        : c.rope_freq_scale != 1.0f ? absl::StrFormat(", linear x%g", 1.0 / c.rope_freq_scale)
                                    : std::string(),
        c.rms_eps, c.n_ctx_train);
    if (c.n_expert > 0) {
      std::cout << absl::StrFormat("experts:     %d of width %d, %d per token%s\n", c.n_expert, c.n_ff_exp,
                                   c.routing.n_used,
                                   f.FindTensor("blk.0.ffn_gate_inp_shexp.weight") != nullptr
                                       ? absl::StrFormat(", and a shared one of width %d", c.n_ff_shexp)
                                       : std::string());
    }
  } else {
    std::cout << "model:       not runnable here: " << config.status().message() << "\n";
  }
  if (absl::GetFlag(FLAGS_fingerprint)) {
    const ModelFingerprintValue fp = FingerprintModel(f, static_cast<int>(std::thread::hardware_concurrency()));
    std::cout << absl::StrFormat("fingerprint: %s (SHA-256 over %d tensors, %d bytes, and the metadata)\n", fp.sha256,
                                 fp.tensors, fp.tensor_bytes);
  }
  std::cout << "metadata:\n";
  for (const auto& [key, value] : f.metadata()) {
    std::cout << absl::StrFormat("  %-44s %s\n", key, value.DebugString());
  }
  return 0;
}

int MakeModel() {
  const std::string name = absl::GetFlag(FLAGS_preset);
  const ModelPreset* preset = nullptr;
  for (const ModelPreset& p : ModelPresets()) {
    if (p.name == name) preset = &p;
  }
  if (preset == nullptr) {
    std::string names;
    for (const ModelPreset& p : ModelPresets()) names += (names.empty() ? "" : ", ") + p.name;
    std::cerr << "llm42 make-model: unknown preset '" << name << "' (" << names << ")\n";
    return 2;
  }
  const std::string dtype = absl::GetFlag(FLAGS_dtype);
  const std::optional<GgmlType> parsed = GgmlTypeByName(dtype);
  if (!parsed) {
    std::cerr << "llm42 make-model: unknown dtype '" << dtype << "'\n";
    return 2;
  }
  const GgmlType type = *parsed;
  if (absl::GetFlag(FLAGS_out).empty()) {
    std::cerr << "llm42 make-model: --out FILE is required\n";
    return 2;
  }
  std::optional<uint64_t> seed;
  try {
    seed = SeedFlag();
  } catch (const api::Error& e) {
    std::cerr << "llm42 make-model: " << e.what() << "\n";
    return 2;
  }
  std::string chat_template;
  if (!absl::GetFlag(FLAGS_chat_template).empty()) {
    const std::optional<std::string> text = ReadFileBytes(absl::GetFlag(FLAGS_chat_template));
    if (!text) {
      std::cerr << "llm42 make-model: cannot read " << absl::GetFlag(FLAGS_chat_template) << "\n";
      return 1;
    }
    chat_template = *text;
  }
  std::string vocab = absl::GetFlag(FLAGS_vocab);
  if (vocab.empty()) vocab = DefaultVocabPath();
  if (vocab.empty()) {
    std::cerr << "llm42 make-model: no --vocab given, and shared/vocab/" << kDefaultVocab
              << " is neither under $LLM42_SHARED_DIR nor beside the llm42 checkout\n";
    return 2;
  }
  const absl::Status s = llm42::MakeModel(*preset, type, vocab,
                                          seed.value_or(42),
                                          absl::GetFlag(FLAGS_out), chat_template);
  if (!s.ok()) {
    std::cerr << "llm42 make-model: " << s.message() << "\n";
    return 1;
  }
  std::cerr << "llm42: wrote " << absl::GetFlag(FLAGS_out) << " (" << name << ", " << dtype << ")\n";
  return 0;
}

}  // namespace llm42::cli
