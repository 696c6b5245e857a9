#include "dist/mpi.h"

#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "core/check.h"
#include "dist/mpi_api.h"

namespace ms {
namespace {

const char* channel_name(Channel c) {
  switch (c) {
    case Channel::control:
      return "the step's control values";
    case Channel::weights:
      return "a weight all-gather";
    case Channel::grads:
      return "a gradient reduce-scatter";
  }
  return "?";
}

std::string plugin_path() {
  if (const char* p = std::getenv("MEGASLIDE_MPI_PLUGIN")) return p;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ((ec ? std::filesystem::path(".") : exe.parent_path()) / "libmegaslide_mpi.so").string();
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(const MsMpiApi* api, double timeout_s) : api_(api), timeout_s_(timeout_s) {
    char err[512] = "";
    if (api_->init(kChannels, &rank_, &size_, &local_rank_, &local_size_, err, sizeof err) != ms_mpi_ok)
      MS_FAIL("MPI did not start: ", err);
  }
  ~MpiCommunicator() override { api_->finalize(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  void allgather(Channel c, void* buf, size_t bytes) override { exchange(c, nullptr, buf, bytes, true); }
  void alltoall(Channel c, const void* send, void* recv, size_t bytes) override {
    exchange(c, send, recv, bytes, false);
  }
  [[noreturn]] void abort(int code) noexcept override {
    api_->abort(code);
    std::_Exit(code);
  }

 private:
  void exchange(Channel c, const void* send, void* recv, size_t bytes, bool gather) {
    char err[512] = "";
    std::vector<int> missing(size_t(size_), 0);
    const auto t0 = std::chrono::steady_clock::now();
    const int rc = api_->exchange(int(c), send, recv, bytes, gather, timeout_s_, missing.data(), err, sizeof err);
    count(c, int64_t(bytes) * (size_ - 1),
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (rc == ms_mpi_ok) return;
    if (rc == ms_mpi_timeout) {
      std::string silent;
      for (int j = 0; j < size_; ++j)
        if (missing[size_t(j)]) silent += (silent.empty() ? "" : ", ") + std::to_string(j);
      MS_FAIL("rank ", rank_, " of ", size_, ": rank", silent.find(',') == std::string::npos ? " " : "s ", silent,
              " did not take part in ", channel_name(c), " within ", timeout_s_,
              " s (--collective-timeout): it died, hangs or is far behind. Every rank stops; the last complete "
              "checkpoint is intact");
    }
    MS_FAIL("rank ", rank_, " of ", size_, ": MPI failed in ", channel_name(c), ": ", err);
  }

  const MsMpiApi* api_;
  double timeout_s_;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
};

int positive(const char* value) {
  char* end = nullptr;
  const long n = std::strtol(value, &end, 10);
  return end && *end == 0 && n > 0 && n < (1 << 20) ? int(n) : 0;
}

}  // namespace

Launch detect_launch() {
  auto var = [](const char* name) -> const char* { return std::getenv(name); };
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* v = var(name)) return {positive(v), name};
  if (var("PMIX_RANK"))
    if (const char* v = var("SLURM_NTASKS")) return {positive(v), "SLURM_NTASKS"};
  return {};
}

std::unique_ptr<Communicator> connect_ranks(double timeout_s) {
  const Launch launch = detect_launch();
  if (!launch.by.empty() && launch.ranks == 0)
    MS_FAIL("the launcher's ", launch.by, " is not a world size (a positive number)");
  if (launch.ranks <= 1) return std::make_unique<SingleProcess>();
  const std::string path = plugin_path();
  // RTLD_GLOBAL: Open MPI loads its own components, which need libmpi's symbols.
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!lib)
    MS_FAIL("launched as one of ", launch.ranks, " ranks (", launch.by, "), but the MPI plugin ", path,
            " cannot be loaded: ", dlerror(),
            ". Build megaslide with MPI (tools/setup.sh installs Debian's OpenMPI; cmake finds it) or set "
            "MEGASLIDE_MPI_PLUGIN to the plugin's path");
  auto get = reinterpret_cast<MsMpiApiGetter>(dlsym(lib, "ms_mpi_api"));
  const MsMpiApi* api = get ? get() : nullptr;
  if (!api || api->version != ms_mpi_api_version)
    MS_FAIL(path, " is not the MPI plugin of this megaslide (", get ? "another version" : "no ms_mpi_api",
            "); rebuild them together");
  return std::make_unique<MpiCommunicator>(api, timeout_s);  // the library stays loaded for the process's life
}

}  // namespace ms
