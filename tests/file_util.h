// Test files: whole-file reads and writes, and the committed fixtures' folders (tests/data).
#pragma once
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace ms::test {

inline const std::string kT5Data = std::string(MEGASLIDE_TEST_DATA) + "/t5/";
inline const std::string kVaeData = std::string(MEGASLIDE_TEST_DATA) + "/vae/";
// The tiny Wan VAE fixture and its config, as `megaslide` options.
inline const std::string kVaeArgs = "--vae " + kVaeData + "tiny_vae.pth --vae-config " + kVaeData + "tiny_config.json";

inline std::string read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_bytes(const std::filesystem::path& p, std::string_view bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
}

inline nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

}  // namespace ms::test
