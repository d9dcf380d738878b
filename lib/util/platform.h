#ifndef LLM42_UTIL_PLATFORM_H_
#define LLM42_UTIL_PLATFORM_H_

// Everything that differs between operating systems, behind one set of functions: file
// mapping, UTF-8 paths, anonymous pages (huge-page advice, residency), the machine's memory,
// the running executable, loadable libraries. platform_posix.cc implements it for Linux (and
// would for macOS, with its own huge-page and memory queries); platform_windows.cc for Windows.
// No other file includes an OS header. CPU features come from the compiler's own cpuid
// builtins (simd_targets.h) and timers from std::chrono, on every platform.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace llm42::platform {

// A path given as UTF-8 (what the C API takes everywhere), for std::filesystem and the
// standard streams: on Windows converted to UTF-16, so that non-ASCII names open.
std::filesystem::path Utf8Path(const std::string& utf8);
// The other way round: a path as UTF-8.
std::string PathUtf8(const std::filesystem::path& path);
// std::fopen with a UTF-8 path.
std::FILE* OpenFile(const std::string& utf8_path, const char* mode);

// A whole file mapped read-only. NOT_FOUND when the file does not exist, UNAVAILABLE (our
// IO_ERROR) when it cannot be opened or mapped. An empty file maps to size 0.
struct FileView {
  const uint8_t* data = nullptr;
  size_t size = 0;
  uintptr_t handle = 0;  // what UnmapFile needs besides the address
};
absl::StatusOr<FileView> MapFile(const std::string& utf8_path);
void UnmapFile(const FileView& view);

// Zero-filled, read-write pages reserved now and committed at first touch (or by
// PopulatePages), advised for transparent huge pages where the system offers them. nullptr
// when refused.
void* AllocatePages(size_t bytes);
void FreePages(void* p, size_t bytes);
// Makes every page resident now; false when the system has not the memory for all of it.
bool PopulatePages(void* p, size_t bytes);
// The system's page size, and how many pages of [p, p + bytes) are resident (-1: unknown).
size_t PageSize();
int64_t ResidentPages(const void* p, size_t bytes);

// The machine's physical memory in bytes; 0 when unknown.
int64_t PhysicalMemoryBytes();

// A program's arguments as UTF-8: argv itself on POSIX; on Windows, where argv holds the
// arguments in the ANSI code page, the UTF-16 command line converted.
std::vector<std::string> Utf8Arguments(int argc, char** argv);
// Has the console show UTF-8 output as text (Windows' consoles default to an OEM code page;
// nothing to do elsewhere). Bytes written to files and pipes are unchanged either way.
void UseUtf8Console();
// Whether stderr is a terminal (not a pipe or a file): long-running tools draw progress only there.
bool StderrIsTerminal();

// The running executable's path; empty when unknown.
std::filesystem::path ExecutablePath();
// The path of the shared library (or executable) that holds `address`; empty when unknown.
std::filesystem::path ModulePathOf(const void* address);

// Calls fn(arg) when the calling thread ends, the latest registered first. For per-thread
// caches (thread_scratch.h): on Windows this is a fiber-local-storage callback, which, unlike a
// thread_local object's destructor under MinGW's emulated TLS, never runs after the thread's
// TLS has been freed.
void AtThreadExit(void (*fn)(void*), void* arg);

// A shared library loaded at run time (backend plug-ins). Open returns 0 and sets *error on
// failure; the library stays loaded until Close.
uintptr_t OpenLibrary(const std::filesystem::path& path, std::string* error);
void* LibrarySymbol(uintptr_t library, const char* name);
void CloseLibrary(uintptr_t library);

}  // namespace llm42::platform

#endif  // LLM42_UTIL_PLATFORM_H_
