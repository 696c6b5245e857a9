// A restricted unpickler for PyTorch state dicts (the protocol-2 pickle inside a torch.save zip).
//
// It builds values only: None, bools, integers, floats, strings, tuples, lists, dicts, and the tensor pieces that
// torch.save writes. The only globals it resolves are those PyTorch's weights_only loader allows for a state dict
// (docs/formats.md): collections.OrderedDict, torch._utils._rebuild_tensor_v2 / _rebuild_tensor_v3 / _rebuild_parameter,
// the typed storage classes torch.<Type>Storage, torch.storage.UntypedStorage, and the torch.<dtype> names; REDUCE
// applies only those; persistent ids must be storages. Everything else (another global, another opcode, a
// malformed stream, nesting deeper than kMaxDepth, a container changed after it was used) is an ms::Error naming
// the source; nothing from the stream is ever executed. Work and memory are linear in the stream's length.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace ms::pickle {

struct Value;
using ValuePtr = std::shared_ptr<Value>;

enum class Kind : uint8_t {
  none,
  boolean,
  integer,
  real,
  string,
  tuple,
  list,
  dict,
  function,      // an allow-listed callable (see Function)
  storage_type,  // torch.FloatStorage, ... (dtype) or UntypedStorage (untyped)
  dtype,         // torch.float32, ...
  storage,       // a persistent storage reference
  tensor,
};

enum class Function : uint8_t { ordered_dict, rebuild_tensor_v2, rebuild_tensor_v3, rebuild_parameter };

// A storage of the archive, named by its key (the entry <folder>/data/<key>).
struct StorageRef {
  std::string key;
  DType dtype = DType::u8;  // element type; u8 for an untyped storage
  bool untyped = false;
  int64_t numel = 0;  // elements of dtype (bytes when untyped)
};

// A strided view of a storage, as _rebuild_tensor_v2/v3 describe it; validated to stay inside the storage.
struct TensorView {
  std::shared_ptr<const StorageRef> storage;
  DType dtype;
  int64_t offset;  // elements of dtype
  Shape shape, stride;
};

struct Value {
  Kind kind = Kind::none;
  bool flag = false;                 // boolean
  int64_t integer = 0;               // integer
  double real = 0;                   // real
  std::string text;                  // string
  std::vector<ValuePtr> items;       // tuple, list; dict: key, value, key, value, ... in insertion order
  Function function{};               // function
  DType dtype = DType::u8;           // storage_type, dtype
  bool untyped = false;              // storage_type
  std::shared_ptr<const StorageRef> storage;  // storage
  std::shared_ptr<const TensorView> tensor;   // tensor
  int depth = 0;        // containers below this one, counting itself (0 for a leaf)
  bool frozen = false;  // a container that has been placed inside another, which may no longer change
};

constexpr int kMaxDepth = 256;

// Unpickles `bytes`; `source` names the stream in messages ("model.pth: archive/data.pkl").
ValuePtr load(const uint8_t* bytes, size_t n, const std::string& source);

}  // namespace ms::pickle
