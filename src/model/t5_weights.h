// The text encoder's weights, read where they lie: Wan's models_t5_umt5-xxl-enc-bf16.pth, safetensors under Wan's
// names, or Hugging Face / ComfyUI UMT5EncoderModel files (names mapped by t5_config.h's wan_t5_name, a common
// leading prefix such as "text_encoder." stripped, a full model's decoder ignored). The files stay mapped; a layer's
// tensors are widened to float32 only while it runs (backend/cpu/t5_encoder.h), so the 5.7 B parameters never need
// more memory than their file's pages.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/weight_files.h"
#include "model/t5_config.h"

namespace ms {

class T5Weights {
 public:
  // path: a weights file, an index or a folder (io/weight_files.h); config_path: a JSON config (t5_config.h) or ""
  // for umT5-XXL's. Checks that every tensor is present with the shape the config implies; throws ms::Error naming
  // the file and the missing or mis-shaped tensor.
  static T5Weights load(const std::string& path, const std::string& config_path);

  // Random bfloat16 weights held in memory (tests, benchmarks at the real shape: 11 GB for umT5-XXL), scaled as
  // t5_ref.py's: attention logits and FFN activations of order one, norm gains 1 +- 0.1, embeddings and position
  // tables of unit variance (uniform draws of those standard deviations).
  static T5Weights random(const T5Config& config, uint64_t seed);

  T5Weights(T5Weights&&) noexcept;
  T5Weights& operator=(T5Weights&&) noexcept;
  ~T5Weights();

  const T5Config& config() const { return config_; }
  const std::string& source() const { return source_; }  // for log lines

  // name's rows [row0, row0 + rows) along dim 0 as float32 (fp8 scales applied), into dst; read() reads them all.
  void read_rows(const std::string& name, int64_t row0, int64_t rows, float* dst) const;
  void read(const std::string& name, float* dst) const;

 private:
  T5Weights() = default;

  T5Config config_;
  std::string source_;
  std::unique_ptr<WeightFiles> files_;         // load(): the mapped files, renamed to Wan's names
  std::vector<uint16_t> pool_;                 // random(): every tensor's bfloat16 values
  std::map<std::string, TensorEntry> random_;  // random(): views into pool_
};

// What every backend's forward of the encoder (runtime/t5_forward.h) reads and checks alike: the input rows x [L, dim]
// of ids [L], the token embedding's rows with no sqrt(dim) scale (throws for an id outside the vocabulary) ...
std::vector<float> t5_embed(const T5Weights& w, const std::vector<int64_t>& ids);
// ... and the output: throws naming w.source() when it holds inf or NaN.
void check_t5_output(const T5Weights& w, const std::vector<float>& out);

}  // namespace ms
