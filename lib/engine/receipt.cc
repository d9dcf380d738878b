#include "lib/engine/receipt.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/text_format.h"
#include "lib/util/version.h"
#include "lib/util/status.h"
#include "lib/util/logging.h"

namespace llm42 {
namespace {

constexpr uint32_t kFormat = 1;

// The text parser reports errors through this instead of protobuf's log (stderr is the host's).
class SilentErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int, int, const std::string&) override {}
};

std::string Serialize(const Receipt& r) {
  std::string out;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  r.SerializeToCodedStream(&coded);
  coded.Trim();
  return out;
}

// The digest of a receipt: SHA-256 of its serialization with the digest field empty.
std::string DigestOf(Receipt r) {
  r.clear_digest();
  const std::string bytes = Serialize(r);
  return Sha256(bytes.data(), bytes.size());
}


// Every field a receipt carries either changes its replay or, where it could not (a value no
// writer makes, or one that contradicts another field), makes the receipt malformed: a receipt
// never claims what its replay ignores (docs/receipts.md).
absl::Status CheckConsistent(const Receipt& r) {
  auto bad = [](const auto&... why) { return absl::DataLossError(absl::StrCat("the receipt is inconsistent: ", why...)); };
  if (r.finish_reason() != RECEIPT_FINISH_STOP && r.finish_reason() != RECEIPT_FINISH_LENGTH) {
    return bad("finish_reason ", r.finish_reason(), " (a receipt is of a request that ended by a stop or its length)");
  }
  const Sampling& p = r.sampling();
  switch (p.grammar_kind()) {
    case OUTPUT_GRAMMAR_NONE:
      if (!p.grammar().empty()) return bad("an output grammar with grammar_kind NONE");
      break;
    case OUTPUT_GRAMMAR_GBNF:
    case OUTPUT_GRAMMAR_JSON_SCHEMA:
      if (p.grammar().empty()) return bad("grammar_kind ", OutputGrammarKind_Name(p.grammar_kind()), " without a grammar");
      break;
    default:
      return bad("grammar_kind ", p.grammar_kind(), " is no kind of output grammar");
  }
  // The penalties are written all four when any is on (repetition_penalty is then > 0), else none.
  const bool recorded = p.repetition_penalty() != 0;
  if (!recorded && (p.penalty_last_n() != 0 || p.frequency_penalty() != 0 || p.presence_penalty() != 0)) {
    return bad("frequency, presence penalties or penalty_last_n without repetition_penalty");
  }
  if (recorded && p.repetition_penalty() == 1 && p.frequency_penalty() == 0 && p.presence_penalty() == 0) {
    return bad("penalties recorded, none of them on");
  }
  for (int i = 1; i < p.logit_bias_size(); ++i) {
    if (p.logit_bias(i).token() <= p.logit_bias(i - 1).token()) {
      return bad("logit biases not in ascending token order (token ", p.logit_bias(i).token(), " after ",
                 p.logit_bias(i - 1).token(), ")");
    }
  }
  return absl::OkStatus();
}

}  // namespace

ReceiptContext::ReceiptContext(std::shared_ptr<const GgufFile> file, int threads, ReceiptSetup setup, bool all_fixed)
    : file_(std::move(file)), threads_(threads), all_fixed_(all_fixed), setup_(std::move(setup)) {
  if (const GgufValue* name = file_->Find("general.name"); name != nullptr) setup_.model_name = name->string_value;
}

const ModelFingerprintValue& ReceiptContext::Fingerprint() {
  MutexLock lock(&mu_);
  if (setup_.model.sha256.empty()) {
    const absl::Time start = absl::Now();
    setup_.model = FingerprintModel(*file_, threads_);
    Log(LogLevel::kInfo, "model fingerprint ", setup_.model.sha256, ": ", setup_.model.tensor_bytes, " bytes in ",
        absl::ToDoubleMilliseconds(absl::Now() - start), " ms");
  }
  return setup_.model;
}

ReceiptSetup ReceiptContext::Setup() {
  Fingerprint();
  MutexLock lock(&mu_);
  return setup_;
}

absl::StatusOr<std::string> ReceiptContext::Make(const Request& r) {
  if (!r.finished()) return absl::FailedPreconditionError("the request has not finished");
  if (!r.options().deterministic && !all_fixed_) {
    return absl::FailedPreconditionError(
        "receipts are for deterministic requests (or any request of a batch_invariant session): this one's output "
        "depends on what ran beside it");
  }
  const FinishReason reason = r.finish_reason();
  if (reason != FinishReason::kStop && reason != FinishReason::kLength) {
    return absl::FailedPreconditionError("the request was cancelled or failed: there is no output to vouch for");
  }
  return MakeReceipt(Setup(), r.prompt(), r.options(), r.seed(), r.output_tokens(), r.logprobs(), reason);
}

std::string MakeReceipt(const ReceiptSetup& setup, const std::vector<int32_t>& prompt, const RequestOptions& options,
                        uint64_t seed, const std::vector<int32_t>& output, const std::vector<float>& logprobs,
                        FinishReason reason) {
  Receipt r;
  r.set_format(kFormat);
  r.set_llm42_version(std::string(kLibraryVersion));
  ModelFingerprint* m = r.mutable_model();
  m->set_sha256(setup.model.sha256);
  m->set_tensor_bytes(setup.model.tensor_bytes);
  m->set_tensors(setup.model.tensors);
  m->set_name(setup.model_name);
  ScheduleFingerprint* s = r.mutable_schedule();
  s->set_schedule_version(setup.schedule_version);
  s->set_backend(setup.backend);
  s->set_device(setup.device);
  s->set_kv_dtype(setup.kv_dtype);
  s->set_tensor_parallel(setup.tensor_parallel);
  r.mutable_prompt_tokens()->Add(prompt.begin(), prompt.end());
  Sampling* p = r.mutable_sampling();
  p->set_temperature(options.sampling.temperature);
  p->set_top_k(options.sampling.top_k);
  p->set_top_p(options.sampling.top_p);
  p->set_min_p(options.sampling.min_p);
  p->set_seed(seed);
  p->set_max_tokens(options.max_tokens);
  p->set_ignore_eos(options.ignore_eos);
  for (const std::string& stop : options.stops) p->add_stops(stop);
  p->set_max_sequence(options.SequenceLimit(setup.max_sequence));
  for (const auto& [token, bias] : options.controls.bias) {
    LogitBias* b = p->add_logit_bias();
    b->set_token(token);
    b->set_bias(bias);
  }
  if (options.controls.penalizes()) {  // (unset otherwise: a receipt without them keeps its bytes)
    p->set_repetition_penalty(options.controls.repetition_penalty);
    p->set_penalty_last_n(options.controls.penalty_last_n);
    p->set_frequency_penalty(options.controls.frequency_penalty);
    p->set_presence_penalty(options.controls.presence_penalty);
  }
  if (options.output_grammar) {
    p->set_grammar_kind(options.output_grammar->kind == RequestOptions::OutputGrammar::Kind::kGbnf
                            ? OUTPUT_GRAMMAR_GBNF
                            : OUTPUT_GRAMMAR_JSON_SCHEMA);
    p->set_grammar(options.output_grammar->source);
  }
  r.mutable_output_tokens()->Add(output.begin(), output.end());
  r.mutable_logprobs()->Add(logprobs.begin(), logprobs.end());
  r.set_finish_reason(reason == FinishReason::kStop ? RECEIPT_FINISH_STOP : RECEIPT_FINISH_LENGTH);
  return SealReceipt(std::move(r));
}

std::string SealReceipt(Receipt r) {
  r.set_digest(DigestOf(r));
  return Serialize(r);
}

absl::StatusOr<Receipt> ParseReceipt(std::string_view bytes) {
  Receipt r;
  // The binary form ends with the digest (field 15, 32 bytes: tag 0x7a, length 0x20), which
  // covers every byte before it, so a byte-level change is caught even where it would parse
  // to the same message.
  constexpr size_t kDigestField = 2 + 32;
  const bool binary = r.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())) && r.format() != 0;
  if (binary) {
    const std::string_view body = bytes.substr(0, bytes.size() - std::min(bytes.size(), kDigestField));
    if (bytes.size() < kDigestField || static_cast<uint8_t>(bytes[body.size()]) != 0x7a ||
        static_cast<uint8_t>(bytes[body.size() + 1]) != 0x20 || Sha256(body.data(), body.size()) != r.digest()) {
      return absl::DataLossError("the receipt's digest does not match its bytes: it was altered or damaged");
    }
  } else {
    // The text form: its content, serialized canonically, must give the digest.
    r.Clear();
    google::protobuf::TextFormat::Parser text;
    text.AllowUnknownField(false);
    SilentErrors silent;
    text.RecordErrorsTo(&silent);
    if (!text.ParseFromString(std::string(bytes), &r)) {
      return absl::DataLossError("not a receipt: neither its binary nor its text form parses");
    }
  }
  if (r.format() != kFormat) {
    return absl::DataLossError(absl::StrCat("receipt format ", r.format(), " is not one this llm42 reads (", kFormat, ")"));
  }
  if (r.digest() != DigestOf(r)) {
    return absl::DataLossError("the receipt's digest does not match its contents: it was altered or damaged");
  }
  if (!r.logprobs().empty() && r.logprobs_size() != r.output_tokens_size()) {
    return absl::DataLossError("the receipt holds logprobs for some output tokens only");
  }
  LLM42_RETURN_IF_ERROR(CheckConsistent(r));
  return r;
}

std::string ReceiptText(const Receipt& receipt) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(receipt, &text);
  return text;
}

ReceiptCheck CompareSetup(const Receipt& receipt, const ReceiptSetup& here) {
  ReceiptCheck c;
  if (receipt.model().sha256() != here.model.sha256) {
    c.outcome = ReceiptCheck::Outcome::kOtherModel;
    c.detail = absl::StrCat("the receipt was made with model ", receipt.model().sha256(), " (", receipt.model().name(),
                            "); this session has ", here.model.sha256);
    return c;
  }
  // The fingerprint covers the name and the tensors: a receipt that pairs it with others is not
  // this model's (its other fields were written by hand).
  if (receipt.model().tensor_bytes() != here.model.tensor_bytes || receipt.model().tensors() != here.model.tensors ||
      receipt.model().name() != here.model_name) {
    c.outcome = ReceiptCheck::Outcome::kOtherModel;
    c.detail = absl::StrCat("the receipt pairs this model's fingerprint with ", receipt.model().tensors(), " tensors of ",
                            receipt.model().tensor_bytes(), " bytes named '", receipt.model().name(), "'; this model has ",
                            here.model.tensors, " of ", here.model.tensor_bytes, " named '", here.model_name, "'");
    return c;
  }
  const ScheduleFingerprint& s = receipt.schedule();
  auto other = [&](const char* what, const std::string& there, const std::string& mine) {
    c.outcome = ReceiptCheck::Outcome::kOtherSchedule;
    c.detail = absl::StrCat("the receipt was made with ", what, " ", there, "; this session has ", mine);
    return c;
  };
  if (s.schedule_version() != here.schedule_version) {
    return other("fixed-schedule version", absl::StrCat(s.schedule_version()), absl::StrCat(here.schedule_version));
  }
  if (s.backend() != here.backend) return other("backend", s.backend(), here.backend);
  if (s.device() != here.device) return other("device", s.device(), here.device);
  if (s.kv_dtype() != here.kv_dtype) return other("KV type", s.kv_dtype(), here.kv_dtype);
  if (s.tensor_parallel() != here.tensor_parallel) {
    return other("tensor-parallel degree", absl::StrCat(s.tensor_parallel()), absl::StrCat(here.tensor_parallel));
  }
  return c;
}

absl::StatusOr<RequestOptions> ReplayOptions(const Receipt& receipt) {
  RequestOptions o;
  o.prompt_tokens.assign(receipt.prompt_tokens().begin(), receipt.prompt_tokens().end());
  o.has_prompt_tokens = true;
  const Sampling& p = receipt.sampling();
  o.sampling.temperature = p.temperature();
  o.sampling.top_k = p.top_k();
  o.sampling.top_p = p.top_p();
  o.sampling.min_p = p.min_p();
  o.sampling.seed = p.seed();
  o.has_seed = true;
  o.max_tokens = p.max_tokens();
  o.ignore_eos = p.ignore_eos();
  o.stops.assign(p.stops().begin(), p.stops().end());
  o.max_sequence = p.max_sequence();
  for (const LogitBias& b : p.logit_bias()) o.controls.SetBias(b.token(), b.bias());
  if (p.repetition_penalty() != 0) {  // recorded: the request had a penalty (CheckConsistent)
    o.controls.repetition_penalty = p.repetition_penalty();
    o.controls.penalty_last_n = p.penalty_last_n();
    o.controls.frequency_penalty = p.frequency_penalty();
    o.controls.presence_penalty = p.presence_penalty();
  }
  if (p.grammar_kind() != OUTPUT_GRAMMAR_NONE) {
    const auto kind = p.grammar_kind() == OUTPUT_GRAMMAR_GBNF ? RequestOptions::OutputGrammar::Kind::kGbnf
                                                              : RequestOptions::OutputGrammar::Kind::kJsonSchema;
    absl::StatusOr<RequestOptions::OutputGrammar> g = RequestOptions::MakeOutputGrammar(kind, p.grammar());
    if (!g.ok()) return FormatError("the receipt's output grammar: ", g.status().message());
    o.output_grammar = *std::move(g);
  }
  if (absl::Status valid = o.Validate(); !valid.ok()) return FormatError("the receipt's request: ", valid.message());
  o.deterministic = true;
  o.logprobs = !receipt.logprobs().empty();
  return o;
}

ReceiptCheck CompareOutput(const Receipt& receipt, const std::vector<int32_t>& tokens,
                           const std::vector<float>& logprobs, FinishReason reason) {
  ReceiptCheck c;
  const auto n = static_cast<int64_t>(std::max<size_t>(tokens.size(), static_cast<size_t>(receipt.output_tokens_size())));
  for (int64_t i = 0; i < n; ++i) {
    const bool in_mine = i < static_cast<int64_t>(tokens.size()), in_theirs = i < receipt.output_tokens_size();
    if (!in_mine || !in_theirs) {
      c.outcome = ReceiptCheck::Outcome::kOtherOutput;
      c.first_difference = i;
      c.detail = absl::StrCat("the replay ", in_mine ? "goes on past" : "ends at", " output position ", i,
                              " where the receipt ", in_mine ? "ends" : "goes on");
      return c;
    }
    if (tokens[static_cast<size_t>(i)] != receipt.output_tokens(static_cast<int>(i))) {
      c.outcome = ReceiptCheck::Outcome::kOtherOutput;
      c.first_difference = i;
      c.detail = absl::StrCat("output position ", i, ": token ", tokens[static_cast<size_t>(i)], " where the receipt has ",
                              receipt.output_tokens(static_cast<int>(i)));
      return c;
    }
    if (!receipt.logprobs().empty()) {
      const float mine = logprobs[static_cast<size_t>(i)], theirs = receipt.logprobs(static_cast<int>(i));
      if (std::memcmp(&mine, &theirs, sizeof mine) != 0) {
        c.outcome = ReceiptCheck::Outcome::kOtherOutput;
        c.first_difference = i;
        c.detail = absl::StrCat("output position ", i, ": the same token with logprob ", mine, " where the receipt has ",
                                theirs, " (other bits)");
        return c;
      }
    }
  }
  const bool stopped = reason == FinishReason::kStop;
  if (stopped != (receipt.finish_reason() == RECEIPT_FINISH_STOP)) {
    c.outcome = ReceiptCheck::Outcome::kOtherOutput;
    c.first_difference = n;
    c.detail = absl::StrCat("the same tokens, but the replay finished by ", stopped ? "a stop" : "length");
  }
  return c;
}

}  // namespace llm42
