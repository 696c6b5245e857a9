// PyTorch checkpoints as torch.save writes them (.pth, .pt): a zip archive (io/zip_archive.h) holding
// <folder>/data.pkl, a protocol-2 pickle of the state dict (io/pickle.h), and one entry <folder>/data/<key> per
// storage. <folder> is whatever the writer chose (torch names it after the file; "archive" for a buffer).
//
// The tensors are the state dict's: nested dicts are flattened with "." ("enc": {"w": t} gives "enc.w"), and a
// wrapping dict is unwrapped when the tensors sit under one of its keys ({"state_dict": ...}, {"model": ...},
// with non-tensor siblings such as an epoch count ignored). A contiguous tensor is a view into the mapped file; a
// strided view (a transpose, a slice) is copied into memory the PthFile owns, once per tensor. Legacy (pre-1.6,
// non-zip) files are refused with a message saying how to re-save them.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/tensor_entry.h"
#include "io/zip_archive.h"

namespace ms {

class PthFile {
 public:
  // Opens, maps and validates path; throws ms::Error naming path and the problem.
  static PthFile open(const std::string& path);

  // Whether path names a PyTorch checkpoint rather than a safetensors file: a .pth or .pt name, or a file that
  // starts like a zip archive (a cheap test for loaders that take both).
  static bool is_pth(const std::string& path);

  const std::string& path() const { return archive_.path(); }
  const std::vector<TensorEntry>& entries() const { return entries_; }  // in the pickle's order
  const TensorEntry* find(const std::string& name) const;               // null if absent

 private:
  ZipArchive archive_;
  std::vector<TensorEntry> entries_;
  std::map<std::string, size_t> index_;
  std::vector<std::unique_ptr<uint8_t[]>> copies_;  // the contiguous copies of strided views
};

}  // namespace ms
