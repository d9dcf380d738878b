#include "lib/engine/options.h"

#include <fstream>
#include <filesystem>
#include <sstream>

#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "lib/backend/backend.h"
#include "lib/backend/backend_registry.h"
#include "lib/grammar/json_schema.h"
#include "lib/util/platform.h"
#include "lib/util/status.h"
#include "lib/util/utf8.h"
#include "proto/session_config.pb.h"

namespace llm42 {
namespace {

// Collects parse errors with their line and column instead of letting protobuf log them.
class ErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column,
                const std::string& message) override {
    if (first_.empty()) first_ = absl::StrCat("line ", line + 1, ":", column + 1, ": ", message);
  }
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

}  // namespace

absl::Status DeterminismPolicy::Validate() const {
  if (mode < DeterminismMode::kSelective || mode > DeterminismMode::kOff) {
    return InvalidArgument("unknown determinism mode ", static_cast<int32_t>(mode));
  }
  if (window < 1 || window > 4096) return OutOfRange("window = ", window, " (1..4096)");
  if (verify_group < 1 || verify_group > 1024) return OutOfRange("verify_group = ", verify_group, " (1..1024)");
  if (!(mismatch_injection >= 0 && mismatch_injection <= 1)) {
    return OutOfRange("mismatch_injection = ", mismatch_injection, " (0..1)");
  }
  if (decode_path < DecodePath::kAuto || decode_path > DecodePath::kFixed) {
    return InvalidArgument("unknown decode path ", static_cast<int32_t>(decode_path));
  }
  if (!(fast_path_noise >= 0 && fast_path_noise < 1e6)) {
    return OutOfRange("fast_path_noise = ", fast_path_noise, " (0..1e6)");
  }
  return absl::OkStatus();
}

absl::Status SessionOptions::Validate() const {
  if (!IsKnownBackendName(backend)) {
    std::string names;  // (Debian's Abseil joins no std::string_view)
    for (std::string_view name : KnownBackendNames()) names.append(names.empty() ? "" : ", ").append(name);
    return InvalidArgument("backend = '", backend, "' (", names, ")");
  }
  if (threads < 0 || threads > 1024) return OutOfRange("threads = ", threads, " (0..1024)");
  if (max_batch_tokens < 1) return OutOfRange("max_batch_tokens = ", max_batch_tokens, " (>= 1)");
  if (max_running_requests < 1) {
    return OutOfRange("max_running_requests = ", max_running_requests, " (>= 1)");
  }
  if (kv_cache_tokens < 0) return OutOfRange("kv_cache_tokens = ", kv_cache_tokens, " (>= 0)");
  if (!ParseKvDtype(kv_dtype)) return InvalidArgument("kv_dtype = '", kv_dtype, "' (auto, f32, f16 or bf16)");
  if (context_length < 0) return OutOfRange("context_length = ", context_length, " (>= 0)");
  return determinism.Validate();
}

absl::Status RequestOptions::Validate() const {
  if (max_tokens < 1) return OutOfRange("max_tokens = ", max_tokens, " (>= 1)");
  if (max_sequence < 0) return OutOfRange("max_sequence = ", max_sequence, " (>= 0)");
  const SamplingParams& p = sampling;
  if (!(p.temperature >= 0 && p.temperature <= kMaxTemperature)) {
    return OutOfRange("temperature = ", p.temperature, " (0..", kMaxTemperature, ")");
  }
  if (p.top_k < 0) return OutOfRange("top_k = ", p.top_k, " (>= 0)");
  if (!(p.top_p > 0 && p.top_p <= 1)) return OutOfRange("top_p = ", p.top_p, " (in (0, 1])");
  if (!(p.min_p >= 0 && p.min_p < 1)) return OutOfRange("min_p = ", p.min_p, " (in [0, 1))");
  if (top_logprobs < 0 || top_logprobs > kMaxTopLogprobs) {
    return OutOfRange("top_logprobs = ", top_logprobs, " (0..", kMaxTopLogprobs, ")");
  }
  if (stops.size() > kMaxStops) return OutOfRange(stops.size(), " stop strings (at most ", kMaxStops, ")");
  LLM42_RETURN_IF_ERROR(controls.Validate());
  for (const std::string& stop : stops) {
    if (stop.empty()) return InvalidArgument("a stop string is empty");
    if (!IsValidUtf8(stop)) return InvalidArgument("a stop string is not valid UTF-8");
  }
  if (!IsValidUtf8(prompt_text)) return InvalidArgument("the prompt is not valid UTF-8");
  for (const auto& [role, content] : messages) {
    if (!IsValidUtf8(role) || !IsValidUtf8(content)) {
      return InvalidArgument("a chat message's role or content is not valid UTF-8");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<RequestOptions::OutputGrammar> RequestOptions::MakeOutputGrammar(OutputGrammar::Kind kind,
                                                                             std::string_view source) {
  if (!IsValidUtf8(source)) return InvalidArgument("the grammar or schema is not valid UTF-8");
  OutputGrammar g{kind, std::string(source), nullptr};
  if (kind == OutputGrammar::Kind::kGbnf) {
    absl::StatusOr<Grammar> parsed = ParseGbnf(source);
    if (!parsed.ok()) return parsed.status();  // "grammar line L, column C: ..."
    g.grammar = std::make_shared<const Grammar>(*std::move(parsed));
  } else {
    absl::StatusOr<std::string> gbnf = JsonSchemaToGbnf(source);
    if (!gbnf.ok()) return InvalidArgument("JSON schema: ", gbnf.status().message());
    absl::StatusOr<Grammar> parsed = ParseGbnf(*gbnf);
    if (!parsed.ok()) return absl::InternalError(absl::StrCat("the schema's grammar: ", parsed.status().message()));
    g.grammar = std::make_shared<const Grammar>(*std::move(parsed));
  }
  return g;
}

absl::Status SessionOptions::LoadConfig(const std::string& path) {
  std::ifstream in(platform::Utf8Path(path), std::ios::binary);
  if (!in) {
    std::error_code ec;
    if (!std::filesystem::exists(platform::Utf8Path(path), ec)) {
      return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    }
    return IoError(path, ": cannot read");
  }
  std::stringstream text;
  text << in.rdbuf();
  SessionConfig config;
  google::protobuf::TextFormat::Parser parser;
  ErrorCollector errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text.str(), &config)) {
    return FormatError(path, ": ", errors.first().empty() ? "not a SessionConfig" : errors.first());
  }
  SessionOptions o = *this;
  if (config.has_model_path()) o.model_path = config.model_path();
  if (config.has_backend()) o.backend = config.backend();
  if (config.has_threads()) o.threads = config.threads();
  if (config.has_max_batch_tokens()) o.max_batch_tokens = config.max_batch_tokens();
  if (config.has_max_running_requests()) o.max_running_requests = config.max_running_requests();
  if (config.has_kv_cache_tokens()) o.kv_cache_tokens = config.kv_cache_tokens();
  if (config.has_kv_dtype()) o.kv_dtype = config.kv_dtype();
  if (config.has_prefix_caching()) o.prefix_caching = config.prefix_caching();
  if (config.has_kv_prefault()) o.kv_prefault = config.kv_prefault();
  if (config.has_context_length()) o.context_length = config.context_length();
  if (config.has_determinism()) {
    const DeterminismConfig& d = config.determinism();
    o.determinism.mode = static_cast<DeterminismMode>(d.mode());
    if (d.has_window()) o.determinism.window = d.window();
    if (d.has_verify_group()) o.determinism.verify_group = d.verify_group();
    if (d.has_default_seed()) o.determinism.default_seed = d.default_seed();
    if (d.has_mismatch_injection()) o.determinism.mismatch_injection = d.mismatch_injection();
    if (d.has_fast_path_noise()) o.determinism.fast_path_noise = d.fast_path_noise();
    if (d.has_decode_path()) o.determinism.decode_path = static_cast<DecodePath>(d.decode_path());
  }
  if (absl::Status valid = o.Validate(); !valid.ok()) return FormatError(path, ": ", valid.message());
  *this = o;
  return absl::OkStatus();
}

}  // namespace llm42
