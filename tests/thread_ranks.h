// N ranks of a distributed run as threads of one process (runtime/communicator.h), for tests that check the
// collectives' users without MPI, under every sanitizer: each collective publishes every rank's buffer, waits for
// all, copies, and waits again.
#pragma once
#include <barrier>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "runtime/communicator.h"

namespace ms::test {

class ThreadRanks {
 public:
  explicit ThreadRanks(int n) : n_(n), posted_(size_t(n)), sync_(n) {}

  class Rank final : public Communicator {
   public:
    Rank(ThreadRanks& all, int r) : all_(all), r_(r) {}
    int rank() const override { return r_; }
    int size() const override { return all_.n_; }
    int local_rank() const override { return r_; }
    int local_size() const override { return all_.n_; }
    void allgather(Channel, void* buf, size_t bytes) override {
      exchange(buf, [&](int j, const char* theirs) {
        if (j != r_) std::memcpy(static_cast<char*>(buf) + j * bytes, theirs + j * bytes, bytes);
      });
    }
    void alltoall(Channel, const void* send, void* recv, size_t bytes) override {
      exchange(const_cast<void*>(send), [&](int j, const char* theirs) {
        std::memcpy(static_cast<char*>(recv) + j * bytes, theirs + r_ * bytes, bytes);
      });
    }
    [[noreturn]] void abort(int) noexcept override { std::abort(); }

   private:
    template <class F>
    void exchange(void* mine, F copy) {
      all_.posted_[size_t(r_)] = static_cast<char*>(mine);
      all_.sync_.arrive_and_wait();
      for (int j = 0; j < all_.n_; ++j) copy(j, all_.posted_[size_t(j)]);
      all_.sync_.arrive_and_wait();
    }
    ThreadRanks& all_;
    int r_;
  };

  // Runs fn(rank) on every rank at once.
  template <class F>
  void run(F fn) {
    std::vector<std::thread> threads;
    for (int r = 0; r < n_; ++r)
      threads.emplace_back([&, r] {
        Rank rank(*this, r);
        fn(rank);
      });
    for (auto& t : threads) t.join();
  }

 private:
  int n_;
  std::vector<char*> posted_;
  std::barrier<> sync_;
};

}  // namespace ms::test
