// What a machine without a usable GPU says when asked for one: the backend, `bench cuda` and the compute
// verbs name the reason and the way out (--backend cpu), in a build with or without CUDA.
#include "cli_util.h"
#include "test_util.h"

#ifdef MEGASLIDE_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device.h"
#endif

namespace ms::test {
namespace {

#ifdef MEGASLIDE_HAVE_CUDA
// No GPU (CI, the developers' machines): the backend and the verbs say so and what to do.
TEST(NoGpu, BackendAndVerbsNameTheReason) {
  if (cuda::unusable_reason().empty()) GTEST_SKIP() << "a GPU is present: this checks the machine without one";
  const std::string e = error_of([] { CudaBackend be; });
  EXPECT_NE(e.find("no usable CUDA GPU"), std::string::npos) << e;
  EXPECT_NE(e.find("--backend cpu"), std::string::npos) << e;
  const CliResult r = run_cli("bench cuda");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("no usable CUDA GPU"), std::string::npos) << r.output;
  const CliResult t = run_cli("train --backend cuda --steps 1");
  EXPECT_NE(t.code, 0);
  EXPECT_NE(t.output.find("no usable CUDA GPU on this machine"), std::string::npos) << t.output;
  const CliResult s =
      run_cli("sample --model tiny --prompt x --frames 2 --height 8 --width 8 --backend cuda --out never.safetensors");
  EXPECT_NE(s.code, 0);
  EXPECT_NE(s.output.find("--backend cuda: no usable CUDA GPU on this machine"), std::string::npos) << s.output;
}

#else
TEST(NoGpu, BenchCudaSaysTheBuildHasNoCudaBackend) {
  const CliResult r = run_cli("bench cuda");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("no CUDA backend"), std::string::npos) << r.output;
  const CliResult s =
      run_cli("sample --model tiny --prompt x --frames 2 --height 8 --width 8 --backend cuda --out never.safetensors");
  EXPECT_NE(s.code, 0);
  EXPECT_NE(s.output.find("no CUDA backend"), std::string::npos) << s.output;
}
#endif

}  // namespace
}  // namespace ms::test
