// The "clocks" object of a timing result (core/gpu_clocks.h): which NVML
// reasons count as throttling, the violation counters' share, and what a
// host without NVML or a GPU reports. The readings are made up here (an H100
// SXM's boost clocks); tests/python/test_clocks.py reads the same shape.
#include "gpu_clocks.h"

#include <gtest/gtest.h>

#include "support.h"

namespace tilelab::test {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

ClockReading h100_reading(uint64_t reasons, uint64_t power_violation_ns) {
  ClockReading r;
  r.sm_mhz = 1980;
  r.memory_mhz = 2619;
  r.power_w = 412.5;
  r.temperature_c = 51;
  r.event_reasons = reasons;
  r.power_violation_ns = power_violation_ns;
  r.thermal_violation_ns = 0;
  return r;
}

TEST(GpuClocks, OnlyReasonsThatSlowAKernelCount) {
  // gpu_idle, applications_clocks_setting, sync_boost, display_clock_setting
  EXPECT_TRUE(slowing_reasons(0x1 | 0x2 | 0x10 | 0x100).empty());
  EXPECT_EQ(slowing_reasons(0x4), std::vector<std::string>{"sw_power_cap"});
  EXPECT_EQ(slowing_reasons(0x1 | 0x4 | 0x8 | 0x20 | 0x40 | 0x80),
            (std::vector<std::string>{"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
                                      "hw_power_brake_slowdown"}));
}

TEST(GpuClocks, AnIdleGpuBetweenReadingsIsNotThrottled) {
  ClockReading before = h100_reading(0x1, 5'000'000);
  ClockReading after = h100_reading(0x1, 5'000'000);
  after.at = before.at + milliseconds(800);
  const json c = clocks_json(before, after, "00000000:19:00.0");
  EXPECT_EQ(c.at("available"), true);
  EXPECT_EQ(c.at("throttled"), false);
  EXPECT_EQ(c.at("reasons"), json::array());
  EXPECT_EQ(c.at("before").at("sm_mhz"), 1980);
  EXPECT_EQ(c.at("after").at("memory_mhz"), 2619);
  EXPECT_DOUBLE_EQ(c.at("after").at("power_w").get<double>(), 412.5);
  EXPECT_EQ(c.at("before").at("event_reasons"), 1);
  EXPECT_NEAR(c.at("elapsed_ms").get<double>(), 800.0, 1e-6);
  EXPECT_DOUBLE_EQ(c.at("violation_ms").at("power").get<double>(), 0.0);
}

TEST(GpuClocks, AReasonAtEitherReadingThrottles) {
  ClockReading before = h100_reading(0x0, 0);
  ClockReading after = h100_reading(0x4 | 0x40, 0);
  after.at = before.at + milliseconds(800);
  const json c = clocks_json(before, after, "00000000:19:00.0");
  EXPECT_EQ(c.at("throttled"), true);
  EXPECT_EQ(c.at("reasons"), (json{"sw_power_cap", "hw_thermal_slowdown"}));
}

TEST(GpuClocks, AViolationCounterThrottlesOnlyPastItsShare) {
  ClockReading before = h100_reading(0x0, 1'000'000'000);
  ClockReading brief = h100_reading(0x0, 1'000'000'000 + 4'000'000);  // 4 ms of 1000 ms
  ClockReading long_held = h100_reading(0x0, 1'000'000'000 + 200'000'000);
  brief.at = long_held.at = before.at + milliseconds(1000);
  EXPECT_EQ(clocks_json(before, brief, "x").at("throttled"), false);
  const json c = clocks_json(before, long_held, "x");
  EXPECT_EQ(c.at("throttled"), true);
  EXPECT_EQ(c.at("reasons"), json{"power_violation"});
  EXPECT_NEAR(c.at("violation_ms").at("power").get<double>(), 200.0, 1e-9);
}

TEST(GpuClocks, UnreadFiguresAreNull) {
  ClockReading before, after;  // a device that supports none of the calls
  after.at = before.at + milliseconds(10);
  const json c = clocks_json(before, after, "x");
  EXPECT_TRUE(c.at("before").at("sm_mhz").is_null());
  EXPECT_TRUE(c.at("after").at("event_reasons").is_null());
  EXPECT_TRUE(c.at("violation_ms").at("thermal").is_null());
  EXPECT_EQ(c.at("throttled"), false);
}

TEST(GpuClocks, WithoutAGpuTheClocksAreUnavailableWithAReason) {
  if (gpu_available()) GTEST_SKIP() << "skipped: a CUDA device is present";
  const GpuClocks clocks = GpuClocks::of_current_device();
  EXPECT_FALSE(clocks.available());
  EXPECT_FALSE(clocks.message().empty());
  const json c = clocks_unavailable(clocks.message());
  EXPECT_EQ(c, (json{{"available", false}, {"message", clocks.message()}}));
}

TEST(GpuClocks, OnAGpuTheClocksAreRead) {
  TILELAB_REQUIRE_GPU();
  const GpuClocks clocks = GpuClocks::of_current_device();
  ASSERT_TRUE(clocks.available()) << clocks.message();
  const ClockReading r = clocks.read();
  EXPECT_TRUE(r.sm_mhz.has_value());
  EXPECT_TRUE(r.memory_mhz.has_value());
}

}  // namespace
}  // namespace tilelab::test
