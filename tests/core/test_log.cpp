#include <gtest/gtest.h>

#include <string>

#include "inferlab/support/log.h"

namespace inferlab {
namespace {

TEST(Log, LevelFiltersAndFormat) {
  const log::Level saved = log::level();
  log::set_level(log::Level::kWarn);
  EXPECT_EQ(log::level(), log::Level::kWarn);
  ::testing::internal::CaptureStderr();
  log::info("hidden");
  log::warn("shown");
  log::error("also shown");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "[inferlab] warn: shown\n[inferlab] error: also shown\n");
  log::set_level(log::Level::kQuiet);
  ::testing::internal::CaptureStderr();
  log::error("nothing");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  log::set_level(saved);
}

}  // namespace
}  // namespace inferlab
