#include "lib/util/large_buffer.h"

#include <unistd.h>

#include <cstddef>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "gtest/gtest.h"

namespace llm42 {
namespace {

#if defined(__linux__)
// Pages of b that are resident, by mincore.
size_t ResidentPages(const LargeBuffer& b) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in((b.size() + page - 1) / page);
  if (mincore(b.data(), b.size(), in.data()) != 0) return 0;
  size_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return n;
}

// Fails where Prefault does nothing (the pages stay out, as Allocate leaves them) or where it
// changes what the buffer holds: checked with Prefault returning at once, and with its loop
// writing a 1 instead of the byte there (the madvise taken out).
TEST(LargeBuffer, PrefaultMakesEveryPageResidentAndKeepsTheContents) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t pages = 3 * (size_t{2} << 20) / page + 5;  // three huge pages' worth and a tail
  LargeBuffer b = LargeBuffer::Allocate(pages * page - 100);
  ASSERT_TRUE(b);
  EXPECT_EQ(ResidentPages(b), 0u) << "Allocate maps its pages lazily";
  b.data()[page + 1] = 7;  // one page stored into before the prefault
  EXPECT_TRUE(b.Prefault());
  EXPECT_EQ(ResidentPages(b), pages);
  for (size_t i = 0; i < b.size(); ++i) {
    if (b.data()[i] != (i == page + 1 ? 7 : 0)) FAIL() << "byte " << i << " changed to " << int{b.data()[i]};
  }
  LargeBuffer empty;
  EXPECT_TRUE(empty.Prefault());  // nothing to do, and no crash
}
#endif

}  // namespace
}  // namespace llm42
