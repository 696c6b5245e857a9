// cuDNN loaded at run time (backend/cuda/cudnn.h): the version names and the minimum, a missing library, a library that
// is not cuDNN, and the toolkit's own libcudnn.so.9 where the machine has one. None needs a GPU (cudnnGetVersion runs
// without one), so they run here, in CUDA builds, rather than among the GPU tests.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/check.h"
#ifdef MEGASLIDE_HAVE_CUDA
#include "backend/cuda/cudnn.h"
#endif

namespace ms::test {
namespace {

#ifndef MEGASLIDE_HAVE_CUDA
TEST(Cudnn, LoaderNeedsACudaBuild) { GTEST_SKIP() << "a CPU-only build has no CUDA backend, and so no cuDNN loader"; }
#else

std::string cudnn_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Cudnn, VersionsAndTheMinimum) {
  EXPECT_EQ(cuda::cudnn_version_name(91900), "9.19.0");
  EXPECT_EQ(cuda::cudnn_version_name(90102), "9.1.2");
  EXPECT_EQ(cuda::cudnn_version_name(8907), "8.9.7");
  EXPECT_EQ(cudnn_error_of([] { cuda::check_cudnn_version(90000, "x"); }), "no error");
  const std::string old = cudnn_error_of([] { cuda::check_cudnn_version(8907, "/opt/libcudnn.so.8"); });
  EXPECT_NE(old.find("/opt/libcudnn.so.8 is cuDNN 8.9.7; megaslide's fused attention needs 9.0.0 or newer"),
            std::string::npos)
      << old;
}

TEST(Cudnn, AMissingLibraryOrAnotherOneIsAClearError) {
  const std::string missing = cudnn_error_of([] { cuda::open_cudnn("/nonexistent/libcudnn.so.9"); });
  EXPECT_NE(missing.find("/nonexistent/libcudnn.so.9, which cannot be loaded"), std::string::npos) << missing;
  EXPECT_NE(missing.find("MEGASLIDE_CUDNN_LIBRARY"), std::string::npos) << missing;
  const std::string other = cudnn_error_of([] { cuda::open_cudnn("libm.so.6"); });
  EXPECT_NE(other.find("libm.so.6 has no cudnnGetVersion: it is not cuDNN"), std::string::npos) << other;
}

// The machine's cuDNN (the toolkit's libcudnn.so.9, or $MEGASLIDE_CUDNN_LIBRARY): every function the attention graphs
// use resolves, and its version is 9 or newer. Skipped, saying why, where there is none.
TEST(Cudnn, TheMachinesLibraryLoads) {
  const cuda::CudnnApi* api = nullptr;
  try {
    api = &cuda::load_cudnn();
  } catch (const Error& e) {
    GTEST_SKIP() << e.what();
  }
  EXPECT_GE(api->version, cuda::kCudnnMinVersion);
  EXPECT_EQ(api->get_version(), api->version);
  EXPECT_NE(api->execute, nullptr);
  EXPECT_STREQ(api->get_error_string(cuda::CudnnApi::kSuccess), "CUDNN_STATUS_SUCCESS");
}
#endif

}  // namespace
}  // namespace ms::test
