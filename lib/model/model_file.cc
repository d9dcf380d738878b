#include "lib/model/model_file.h"

#include "lib/format/hf_loader.h"
#include "lib/model/arch/architecture.h"

namespace llm42 {

absl::StatusOr<std::unique_ptr<GgufFile>> OpenModel(const std::string& path) {
  return OpenModelFile(path, HfFamilies());
}

}  // namespace llm42
