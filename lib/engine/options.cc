#include "lib/engine/options.h"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "lib/backend/backend.h"
#include "lib/util/status.h"
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

absl::Status SessionOptions::Validate() const {
  if (threads < 0 || threads > 1024) return InvalidArgument("threads = ", threads, " (0..1024)");
  if (max_batch_tokens < 1) return InvalidArgument("max_batch_tokens = ", max_batch_tokens, " (>= 1)");
  if (max_running_requests < 1) {
    return InvalidArgument("max_running_requests = ", max_running_requests, " (>= 1)");
  }
  if (kv_cache_tokens < 0) return InvalidArgument("kv_cache_tokens = ", kv_cache_tokens, " (>= 0)");
  if (!ParseKvDtype(kv_dtype)) return InvalidArgument("kv_dtype = '", kv_dtype, "' (auto, f32, f16 or bf16)");
  if (context_length < 0) return InvalidArgument("context_length = ", context_length, " (>= 0)");
  const DeterminismPolicy& d = determinism;
  if (d.mode < DeterminismMode::kSelective || d.mode > DeterminismMode::kOff) {
    return InvalidArgument("unknown determinism mode");
  }
  if (d.window < 1 || d.window > 4096) return InvalidArgument("window = ", d.window, " (1..4096)");
  if (d.verify_group < 1 || d.verify_group > 1024) {
    return InvalidArgument("verify_group = ", d.verify_group, " (1..1024)");
  }
  if (!(d.mismatch_injection >= 0 && d.mismatch_injection <= 1)) {
    return InvalidArgument("mismatch_injection = ", d.mismatch_injection, " (0..1)");
  }
  if (d.decode_path < DecodePath::kAuto || d.decode_path > DecodePath::kFixed) {
    return InvalidArgument("unknown decode path");
  }
  if (!(d.fast_path_noise >= 0)) return InvalidArgument("fast_path_noise = ", d.fast_path_noise, " (>= 0)");
  return absl::OkStatus();
}

absl::Status SessionOptions::LoadConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (::access(path.c_str(), F_OK) != 0) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
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
