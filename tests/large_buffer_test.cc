#include "lib/util/large_buffer.h"

#include <cstddef>

#include "gtest/gtest.h"
#include "lib/util/platform.h"

namespace llm42 {
namespace {

// Pages of b that are resident (mincore on Linux, the working set on Windows).
int64_t ResidentPages(const LargeBuffer& b) { return platform::ResidentPages(b.data(), b.size()); }

// Fails where Prefault does nothing (the pages stay out, as Allocate leaves them) or where it
// changes what the buffer holds: checked with Prefault returning at once, and with its loop
// writing a 1 instead of the byte there (the madvise taken out).
TEST(LargeBuffer, PrefaultMakesEveryPageResidentAndKeepsTheContents) {
  const size_t page = platform::PageSize();
  const size_t pages = 3 * (size_t{2} << 20) / page + 5;  // three huge pages' worth and a tail
  LargeBuffer b = LargeBuffer::Allocate(pages * page - 100);
  ASSERT_TRUE(b);
  ASSERT_GE(ResidentPages(b), 0) << "the platform layer could not say which pages are resident";
  EXPECT_EQ(ResidentPages(b), 0) << "Allocate maps its pages lazily";
  b.data()[page + 1] = 7;  // one page stored into before the prefault
  EXPECT_TRUE(b.Prefault());
  EXPECT_EQ(ResidentPages(b), static_cast<int64_t>(pages));
  for (size_t i = 0; i < b.size(); ++i) {
    if (b.data()[i] != (i == page + 1 ? 7 : 0)) FAIL() << "byte " << i << " changed to " << int{b.data()[i]};
  }
  LargeBuffer empty;
  EXPECT_TRUE(empty.Prefault());  // nothing to do, and no crash
}

}  // namespace
}  // namespace llm42
