// The platform layer (platform.h) on Windows: UTF-16 paths, file mappings, VirtualAlloc'd pages.
#define WIN32_LEAN_AND_MEAN
#define NOMINMAX
#include <windows.h>
#include <psapi.h>
#include <shellapi.h>

#include <utility>
#include <vector>

#include "lib/util/platform.h"
#include "lib/util/status.h"

namespace llm42::platform {
namespace {

std::wstring Wide(const std::string& utf8) {
  if (utf8.empty()) return std::wstring();
  const int n = ::MultiByteToWideChar(CP_UTF8, 0, utf8.data(), static_cast<int>(utf8.size()), nullptr, 0);
  std::wstring w(static_cast<size_t>(n), L'\0');
  ::MultiByteToWideChar(CP_UTF8, 0, utf8.data(), static_cast<int>(utf8.size()), w.data(), n);
  return w;
}

std::string Narrow(const std::wstring& w) {
  if (w.empty()) return std::string();
  const int n = ::WideCharToMultiByte(CP_UTF8, 0, w.data(), static_cast<int>(w.size()), nullptr, 0, nullptr, nullptr);
  std::string s(static_cast<size_t>(n), '\0');
  ::WideCharToMultiByte(CP_UTF8, 0, w.data(), static_cast<int>(w.size()), s.data(), n, nullptr, nullptr);
  return s;
}

std::string LastErrorText() {
  const DWORD err = ::GetLastError();
  wchar_t* text = nullptr;
  ::FormatMessageW(FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS,
                   nullptr, err, 0, reinterpret_cast<wchar_t*>(&text), 0, nullptr);
  std::string s = text != nullptr ? Narrow(text) : absl::StrCat("error ", err);
  if (text != nullptr) ::LocalFree(text);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == '.')) s.pop_back();
  return s;
}

std::filesystem::path ModuleFile(HMODULE module) {
  std::vector<wchar_t> buf(MAX_PATH);
  for (;;) {
    const DWORD n = ::GetModuleFileNameW(module, buf.data(), static_cast<DWORD>(buf.size()));
    if (n == 0) return {};
    if (n < buf.size()) return std::filesystem::path(std::wstring(buf.data(), n));
    buf.resize(buf.size() * 2);
  }
}

// AtThreadExit's calls, per thread, in a fiber-local slot whose callback runs them when the
// thread ends. The slot is freed when the module unloads (FlsFree runs the callback for the
// threads that still hold calls), so no callback points into unloaded code.
struct ExitCalls {
  std::vector<std::pair<void (*)(void*), void*>> calls;
};

void WINAPI RunExitCalls(void* p) {
  auto* c = static_cast<ExitCalls*>(p);
  if (c == nullptr) return;
  for (auto it = c->calls.rbegin(); it != c->calls.rend(); ++it) it->first(it->second);
  delete c;
}

struct ExitSlot {
  DWORD index = ::FlsAlloc(RunExitCalls);
  ~ExitSlot() {
    if (index != FLS_OUT_OF_INDEXES) ::FlsFree(index);
  }
};

}  // namespace

std::filesystem::path Utf8Path(const std::string& utf8) { return std::filesystem::path(Wide(utf8)); }

std::string PathUtf8(const std::filesystem::path& path) { return Narrow(path.wstring()); }

std::FILE* OpenFile(const std::string& utf8_path, const char* mode) {
  return ::_wfopen(Wide(utf8_path).c_str(), Wide(mode).c_str());
}

absl::StatusOr<FileView> MapFile(const std::string& path) {
  HANDLE file = ::CreateFileW(Wide(path).c_str(), GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_DELETE, nullptr,
                              OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, nullptr);
  if (file == INVALID_HANDLE_VALUE) {
    const DWORD err = ::GetLastError();
    if (err == ERROR_FILE_NOT_FOUND || err == ERROR_PATH_NOT_FOUND) {
      return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    }
    return IoError(path, ": ", LastErrorText());
  }
  LARGE_INTEGER size;
  BY_HANDLE_FILE_INFORMATION info;
  if (!::GetFileInformationByHandle(file, &info) || (info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) != 0 ||
      !::GetFileSizeEx(file, &size)) {
    ::CloseHandle(file);
    return IoError(path, ": not a regular file");
  }
  FileView view;
  view.size = static_cast<size_t>(size.QuadPart);
  if (view.size == 0) {
    ::CloseHandle(file);
    static const uint8_t kEmpty = 0;
    view.data = &kEmpty;
    return view;
  }
  HANDLE mapping = ::CreateFileMappingW(file, nullptr, PAGE_READONLY, 0, 0, nullptr);
  ::CloseHandle(file);  // the mapping keeps the file open
  if (mapping == nullptr) return IoError(path, ": CreateFileMapping failed: ", LastErrorText());
  void* p = ::MapViewOfFile(mapping, FILE_MAP_READ, 0, 0, 0);
  ::CloseHandle(mapping);  // the view keeps the mapping
  if (p == nullptr) return IoError(path, ": MapViewOfFile failed: ", LastErrorText());
  view.data = static_cast<const uint8_t*>(p);
  return view;
}

void UnmapFile(const FileView& view) {
  if (view.size != 0) ::UnmapViewOfFile(view.data);
}

// Reserved and committed at once: Windows charges committed memory against the commit limit
// but gives physical pages (zeroed) only at first touch, as Linux's MAP_NORESERVE mapping does.
// Large pages need a privilege an application rarely holds: not asked for.
void* AllocatePages(size_t bytes) {
  return ::VirtualAlloc(nullptr, bytes, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
}

void FreePages(void* p, size_t) { ::VirtualFree(p, 0, MEM_RELEASE); }

bool PopulatePages(void* p, size_t bytes) {
  volatile uint8_t* b = static_cast<uint8_t*>(p);
  for (size_t i = 0, page = PageSize(); i < bytes; i += page) b[i] = b[i];
  return true;
}

size_t PageSize() {
  SYSTEM_INFO info;
  ::GetSystemInfo(&info);
  return info.dwPageSize;
}

int64_t ResidentPages(const void* p, size_t bytes) {
  const size_t page = PageSize();
  std::vector<PSAPI_WORKING_SET_EX_INFORMATION> pages((bytes + page - 1) / page);
  for (size_t i = 0; i < pages.size(); ++i) pages[i].VirtualAddress = const_cast<char*>(static_cast<const char*>(p)) + i * page;
  if (!::QueryWorkingSetEx(::GetCurrentProcess(), pages.data(),
                           static_cast<DWORD>(pages.size() * sizeof(pages[0])))) {
    return -1;
  }
  int64_t n = 0;
  for (const auto& e : pages) n += e.VirtualAttributes.Valid;
  return n;
}

int64_t PhysicalMemoryBytes() {
  MEMORYSTATUSEX status;
  status.dwLength = sizeof(status);
  return ::GlobalMemoryStatusEx(&status) ? static_cast<int64_t>(status.ullTotalPhys) : 0;
}

std::vector<std::string> Utf8Arguments(int argc, char** argv) {
  int n = 0;
  wchar_t** wide = ::CommandLineToArgvW(::GetCommandLineW(), &n);
  if (wide == nullptr || n != argc) {  // not started from this process's command line
    if (wide != nullptr) ::LocalFree(wide);
    return std::vector<std::string>(argv, argv + argc);
  }
  std::vector<std::string> args;
  for (int i = 0; i < n; ++i) args.push_back(Narrow(wide[i]));
  ::LocalFree(wide);
  return args;
}

void UseUtf8Console() { ::SetConsoleOutputCP(CP_UTF8); }

bool StderrIsTerminal() {
  DWORD mode = 0;
  return ::GetConsoleMode(::GetStdHandle(STD_ERROR_HANDLE), &mode) != 0;
}

void AtThreadExit(void (*fn)(void*), void* arg) {
  static ExitSlot slot;
  if (slot.index == FLS_OUT_OF_INDEXES) return;  // no slot left: the memory stays until exit
  auto* c = static_cast<ExitCalls*>(::FlsGetValue(slot.index));
  if (c == nullptr) {
    c = new ExitCalls;
    ::FlsSetValue(slot.index, c);
  }
  c->calls.emplace_back(fn, arg);
}

std::filesystem::path ExecutablePath() { return ModuleFile(nullptr); }

std::filesystem::path ModulePathOf(const void* address) {
  HMODULE module = nullptr;
  if (!::GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                            reinterpret_cast<LPCWSTR>(address), &module)) {
    return {};
  }
  return ModuleFile(module);
}

uintptr_t OpenLibrary(const std::filesystem::path& path, std::string* error) {
  HMODULE h = ::LoadLibraryExW(path.c_str(), nullptr, LOAD_WITH_ALTERED_SEARCH_PATH);
  if (h == nullptr) *error = LastErrorText();
  return reinterpret_cast<uintptr_t>(h);
}

void* LibrarySymbol(uintptr_t library, const char* name) {
  return reinterpret_cast<void*>(::GetProcAddress(reinterpret_cast<HMODULE>(library), name));
}

void CloseLibrary(uintptr_t library) { ::FreeLibrary(reinterpret_cast<HMODULE>(library)); }

}  // namespace llm42::platform
