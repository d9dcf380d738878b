#include "lib/util/mapped_file.h"

#include "lib/util/platform.h"

namespace llm42 {

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  absl::StatusOr<platform::FileView> view = platform::MapFile(path);
  if (!view.ok()) return view.status();
  return std::unique_ptr<MappedFile>(new MappedFile(view->data, view->size, view->handle));
}

MappedFile::~MappedFile() { platform::UnmapFile(platform::FileView{data_, size_, handle_}); }

}  // namespace llm42
