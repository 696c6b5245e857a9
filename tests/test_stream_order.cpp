// The streamed step's copies are ordered: every two copies on different streams that touch the same bytes, one of
// them writing, are ordered by the streams and events the scheduler sets up, whatever the timing. Checked with
// vector clocks over a backend that forwards to the CPU backend; a race that a run happens to get right (a copy
// into a slot still being read) fails here every time.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/dtype.h"
#include "core/rng.h"
#include "model/config.h"
#include "model/param_table.h"
#include "registry/registry.h"
#include "runtime/streamed_model.h"

namespace ms::test {
namespace {

using Clock = std::vector<int64_t>;  // per stream: how many of its ops are known to come before

void merge(Clock& into, const Clock& from) {
  if (into.size() < from.size()) into.resize(from.size());
  for (size_t i = 0; i < from.size(); ++i) into[i] = std::max(into[i], from[i]);
}

// The CPU backend, recording for every copy the bytes it reads and writes and the vector clock of its stream:
// copy x (op n of stream s) happens before copy y iff y's clock holds at least n for s.
class OrderChecker final : public Backend {
 public:
  struct Access {
    std::string name;
    int stream;
    int64_t op;   // the copy's place on its stream, from 1
    Clock clock;  // its stream's clock when enqueued
    uintptr_t lo, hi;
    bool write;
  };

  BackendKind kind() const override { return inner_.kind(); }
  int64_t default_device_memory() const override { return inner_.default_device_memory(); }
  void* alloc_device(size_t bytes) override { return inner_.alloc_device(bytes); }
  void free_device(void* p) override { inner_.free_device(p); }
  int create_stream(const std::string& name, StreamKind kind) override {
    const int s = inner_.create_stream(name, kind);
    clocks_.resize(size_t(s) + 1);
    return s;
  }
  void pin_host(void* p, size_t bytes) override { inner_.pin_host(p, bytes); }
  void unpin_host(void* p) override { inner_.unpin_host(p); }
  void launch(int stream, const char* name, std::function<void()> fn) override {
    tick(stream);
    inner_.launch(stream, name, std::move(fn));
  }
  void copy_h2d(int stream, void* dst, const void* src, size_t bytes, const char* name) override {
    copied(stream, name, src, bytes, dst, bytes);
    inner_.copy_h2d(stream, dst, src, bytes, name);
  }
  void copy_d2h(int stream, void* dst, const void* src, size_t bytes, const char* name) override {
    copied(stream, name, src, bytes, dst, bytes);
    inner_.copy_d2h(stream, dst, src, bytes, name);
  }
  void upload_weights(int stream, void* slot, const uint16_t* bf16, int64_t n, const char* name) override {
    copied(stream, name, bf16, size_t(n) * 2, slot, size_t(n * weight_bytes()));
    inner_.upload_weights(stream, slot, bf16, n, name);
  }
  int weight_bytes() const override { return inner_.weight_bytes(); }
  Event record(int stream) override {
    const Event e = inner_.record(stream);
    events_[{e.stream, e.seq}] = clock(stream);
    return e;
  }
  void wait(int stream, Event e) override {
    if (e.stream >= 0) merge(clocks_[size_t(stream)], events_.at({e.stream, e.seq}));
    inner_.wait(stream, e);
  }
  void sync(Event e) override {  // what the host enqueues next comes after e
    if (e.stream >= 0) merge(host_, events_.at({e.stream, e.seq}));
    inner_.sync(e);
  }
  void sync_all() override {
    for (size_t s = 0; s < clocks_.size(); ++s) merge(host_, clock(int(s)));
    inner_.sync_all();
  }

  // The pairs of copies that touch the same bytes, one writing, with neither ordered before the other.
  std::vector<std::string> races() const {
    std::vector<std::string> out;
    auto before = [](const Access& x, const Access& y) {
      return size_t(x.stream) < y.clock.size() && y.clock[size_t(x.stream)] >= x.op;
    };
    for (size_t i = 0; i < accesses_.size(); ++i)
      for (size_t j = i + 1; j < accesses_.size(); ++j) {
        const Access &x = accesses_[i], &y = accesses_[j];
        if (x.stream == y.stream || !(x.write || y.write) || x.hi <= y.lo || y.hi <= x.lo) continue;
        if (!before(x, y) && !before(y, x))
          out.push_back(x.name + (x.write ? " (write)" : " (read)") + " and " + y.name +
                        (y.write ? " (write)" : " (read)"));
      }
    return out;
  }
  size_t copies() const { return accesses_.size() / 2; }

 private:
  Clock clock(int stream) {
    Clock c = clocks_[size_t(stream)];
    merge(c, host_);
    return c;
  }
  void tick(int stream) {
    Clock& c = clocks_[size_t(stream)];
    merge(c, host_);
    if (c.size() <= size_t(stream)) c.resize(size_t(stream) + 1);
    ++c[size_t(stream)];
  }
  void copied(int stream, const char* name, const void* src, size_t read, void* dst, size_t written) {
    tick(stream);
    const Clock& c = clocks_[size_t(stream)];
    const auto at = [](const void* p) { return reinterpret_cast<uintptr_t>(p); };
    accesses_.push_back({name, stream, c[size_t(stream)], c, at(src), at(src) + read, false});
    accesses_.push_back({name, stream, c[size_t(stream)], c, at(dst), at(dst) + written, true});
  }

  CpuBackend inner_;
  std::vector<Clock> clocks_;
  Clock host_;  // ops the host has waited for: everything enqueued later comes after them
  std::map<std::pair<int, int64_t>, Clock> events_;
  std::vector<Access> accesses_;
};

// Two streamed steps of two shapes (the second's inputs uploaded during the first) of an 8-block model through the
// checker.
std::vector<std::string> step_races(int prefetch, bool offload_activations, size_t* copies) {
  ModelConfig c = preset_config("tiny");
  c.num_layers = 8;  // checkpoints 0..4 come back from the host with offload_activations
  const ModelDims dims[2] = {ModelDims::make(c, 1, 2, 6, 10, c.text_len), ModelDims::make(c, 2, 1, 4, 4, c.text_len)};
  const StepShapes shapes({dims[0], dims[1]});
  OrderChecker be;
  StreamedModel m(c, shapes, be, StreamOptions{.prefetch = prefetch, .offload_activations = offload_activations},
                  make_stage_runner(be, c, shapes));
  const ParamTable table(c);
  Rng rng(7);
  std::vector<uint16_t> weights(size_t(table.total()));
  for (auto& w : weights) w = f32_to_bf16(float(0.05 * rng.uniform(-1, 1)));
  std::vector<std::vector<float>> xt(2), target(2), context(2), t(2);
  for (int s = 0; s < 2; ++s) {
    const ModelDims& d = dims[s];
    const int64_t video = d.B * d.F * d.H * d.W;
    for (auto [v, n] : {std::pair{&xt[size_t(s)], video * c.in_dim}, std::pair{&target[size_t(s)], video * c.out_dim},
                        std::pair{&context[size_t(s)], d.B * d.Lt * c.text_dim}, std::pair{&t[size_t(s)], d.B}}) {
      v->resize(size_t(n));
      for (auto& x : *v) x = float(rng.uniform(0, 1));
    }
  }
  std::vector<float> grads(size_t(table.total()));  // a host buffer per stage
  GradRoute route{[&](int, int s) { return grads.data() + table.stages()[size_t(s)].offset; },
                  [](int) { return Event{}; }, [](int, int, float*, Event) {}};
  m.enqueue_inputs(dims[0], xt[0].data(), t[0].data(), context[0].data(), target[0].data());
  for (int s = 0; s < 2; ++s) {
    m.enqueue_step(weights.data(), route, [](int) { return Event{}; });
    if (s == 0) m.enqueue_inputs(dims[1], xt[1].data(), t[1].data(), context[1].data(), target[1].data());
    m.finish();
  }
  *copies = be.copies();
  return be.races();
}

TEST(StreamOrder, EveryTwoCopiesOfTheSameBytesAreOrdered) {
  for (int prefetch : {2, 3, 6})
    for (bool offload : {false, true}) {
      size_t copies = 0;
      const std::vector<std::string> races = step_races(prefetch, offload, &copies);
      EXPECT_GT(copies, size_t(30));  // weights, inputs, gradients (and checkpoints) of two steps were seen
      for (const std::string& r : races)
        ADD_FAILURE() << "prefetch " << prefetch << (offload ? ", offloaded activations" : "") << ": " << r
                      << " are not ordered";
    }
}

}  // namespace
}  // namespace ms::test
