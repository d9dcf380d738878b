// The platform layer (platform.h) on Linux. macOS would share all but the huge-page advice
// (MADV_HUGEPAGE, MADV_POPULATE_WRITE: Linux's), the executable path (/proc/self/exe:
// _NSGetExecutablePath there) and the memory query (sysctl hw.memsize).
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "lib/util/platform.h"
#include "lib/util/status.h"

namespace llm42::platform {

std::filesystem::path Utf8Path(const std::string& utf8) { return std::filesystem::path(utf8); }

std::string PathUtf8(const std::filesystem::path& path) { return path.string(); }

std::FILE* OpenFile(const std::string& utf8_path, const char* mode) {
  return std::fopen(utf8_path.c_str(), mode);
}

absl::StatusOr<FileView> MapFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return IoError(path, ": ", std::strerror(err));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return IoError(path, ": not a regular file");
  }
  FileView view;
  view.size = static_cast<size_t>(st.st_size);
  if (view.size == 0) {
    ::close(fd);
    static const uint8_t kEmpty = 0;
    view.data = &kEmpty;
    return view;
  }
  void* p = ::mmap(nullptr, view.size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) return IoError(path, ": mmap failed: ", std::strerror(err));
  view.data = static_cast<const uint8_t*>(p);
  return view;
}

void UnmapFile(const FileView& view) {
  if (view.size != 0) ::munmap(const_cast<uint8_t*>(view.data), view.size);
}

void* AllocatePages(size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
#if defined(MADV_HUGEPAGE)
  ::madvise(p, bytes, MADV_HUGEPAGE);  // advice only: without huge pages the memory works the same
#endif
  return p;
}

void FreePages(void* p, size_t bytes) { ::munmap(p, bytes); }

bool PopulatePages(void* p, size_t bytes) {
#if !defined(MADV_POPULATE_WRITE)
#define MADV_POPULATE_WRITE 23  // Linux 5.14's; older kernels refuse it (EINVAL) and we touch
#endif
  int rc;
  do {
    rc = ::madvise(p, bytes, MADV_POPULATE_WRITE);
  } while (rc != 0 && errno == EINTR);
  if (rc == 0) return true;
  // Out of memory (ENOMEM) or anything but an older kernel's refusal: touching the pages would
  // end in the OOM killer instead.
  if (errno != EINVAL) return false;
  // A write per page, of the byte already there.
  volatile uint8_t* b = static_cast<uint8_t*>(p);
  for (size_t i = 0, page = PageSize(); i < bytes; i += page) b[i] = b[i];
  return true;
}

size_t PageSize() { return static_cast<size_t>(::sysconf(_SC_PAGESIZE)); }

int64_t ResidentPages(const void* p, size_t bytes) {
  const size_t page = PageSize();
  std::vector<unsigned char> in((bytes + page - 1) / page);
  if (::mincore(const_cast<void*>(p), bytes, in.data()) != 0) return -1;
  int64_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return n;
}

int64_t PhysicalMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
}

std::vector<std::string> Utf8Arguments(int argc, char** argv) {
  return std::vector<std::string>(argv, argv + argc);
}

void UseUtf8Console() {}

bool StderrIsTerminal() { return ::isatty(STDERR_FILENO) != 0; }

void AtThreadExit(void (*fn)(void*), void* arg) {
  struct Calls {
    std::vector<std::pair<void (*)(void*), void*>> calls;
    ~Calls() {
      for (auto it = calls.rbegin(); it != calls.rend(); ++it) it->first(it->second);
    }
  };
  thread_local Calls calls;  // glibc runs thread_local destructors before freeing the thread's TLS
  calls.calls.emplace_back(fn, arg);
}

std::filesystem::path ExecutablePath() {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path() : p;
}

std::filesystem::path ModulePathOf(const void* address) {
  Dl_info info;
  if (::dladdr(address, &info) == 0 || info.dli_fname == nullptr) return {};
  return std::filesystem::path(info.dli_fname);
}

uintptr_t OpenLibrary(const std::filesystem::path& path, std::string* error) {
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* e = ::dlerror();
    *error = e != nullptr ? e : "dlopen failed";
  }
  return reinterpret_cast<uintptr_t>(h);
}

void* LibrarySymbol(uintptr_t library, const char* name) {
  return ::dlsym(reinterpret_cast<void*>(library), name);
}

void CloseLibrary(uintptr_t library) { ::dlclose(reinterpret_cast<void*>(library)); }

}  // namespace llm42::platform
