#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "tilelab/part.h"

namespace tilelab {
namespace {

TEST(ExitCodes, TableIsCompleteAndUnambiguous) {
  std::set<int> codes;
  std::set<std::string> names;
  for (const ExitCodeInfo& info : kExitCodeTable) {
    EXPECT_TRUE(codes.insert(to_int(info.code)).second) << "duplicate code " << to_int(info.code);
    EXPECT_TRUE(names.insert(info.name).second) << "duplicate name " << info.name;
    EXPECT_EQ(exit_code_info(info.code).name, std::string(info.name));
    EXPECT_FALSE(std::string(info.meaning).empty());
  }
  // 1 is what an unhandled failure of any program returns: never one of ours.
  EXPECT_EQ(codes.count(1), 0u);
  EXPECT_EQ(codes.count(0), 1u);
}

TEST(ExitCodes, CudaErrorsMapToTheirKind) {
  EXPECT_EQ(exit_code_for_cuda_error(cudaErrorIllegalAddress), ExitCode::kKernelFault);
  EXPECT_EQ(exit_code_for_cuda_error(cudaErrorAssert), ExitCode::kKernelFault);
  EXPECT_EQ(exit_code_for_cuda_error(cudaErrorInvalidConfiguration), ExitCode::kLaunchError);
  EXPECT_EQ(exit_code_for_cuda_error(cudaErrorLaunchOutOfResources), ExitCode::kLaunchError);
  EXPECT_EQ(exit_code_for_cuda_error(cudaErrorNoDevice), ExitCode::kNoDevice);
  EXPECT_EQ(exit_code_for_cuda_error(cudaErrorMemoryAllocation), ExitCode::kCudaApiError);
  EXPECT_EQ(exit_code_for_cuda_error(cudaSuccess), ExitCode::kOk);
}

}  // namespace
}  // namespace tilelab

namespace tilelab {
namespace {

// docs/harness.md repeats the table for readers; it must not drift.
TEST(ExitCodes, DocumentedTableMatchesTheEnum) {
  std::ifstream in(std::string(TILELAB_SOURCE_DIR) + "/docs/harness.md");
  ASSERT_TRUE(in) << "cannot open docs/harness.md";
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const ExitCodeInfo& info : kExitCodeTable) {
    const std::string row = "| " + std::to_string(to_int(info.code)) + " | " + info.name + " |";
    EXPECT_NE(doc.find(row), std::string::npos) << "docs/harness.md lacks the row " << row;
  }
}

}  // namespace
}  // namespace tilelab
