// The library's version ("MAJOR.MINOR.PATCH"). Written once, as LLM42_VERSION_STRING in the public
// header; the build passes it to every target as LLM42_LIBRARY_VERSION (CMakeLists.txt), so the
// library's own code never includes the public C header for it.
#ifndef LLM42_UTIL_VERSION_H_
#define LLM42_UTIL_VERSION_H_


namespace llm42 {

inline constexpr char kLibraryVersion[] = LLM42_LIBRARY_VERSION;

}  // namespace llm42

#endif  // LLM42_UTIL_VERSION_H_
