#include "io/pickle.h"

#include <cstring>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "core/check.h"
#include "core/text.h"

namespace ms::pickle {

namespace {

constexpr const char* kNotAllowed =
    "megaslide loads only tensors and the dicts, lists and numbers of a state dict, as "
    "torch.load(weights_only=True) does; save the weights alone with torch.save(model.state_dict(), path)";
constexpr const char* kCorrupt = "the file is corrupt or truncated";
constexpr size_t kMaxGlobalName = 256;
constexpr size_t kMaxDims = 64;

struct Global {
  std::string_view module, name;
};

// The storage classes torch.save names (torch/storage.py's _dtype_to_storage_type_map) that megaslide reads.
constexpr struct {
  const char* name;
  DType dtype;
} kStorages[] = {{"FloatStorage", DType::f32}, {"DoubleStorage", DType::f64}, {"HalfStorage", DType::f16},
                 {"BFloat16Storage", DType::bf16}, {"LongStorage", DType::i64}, {"IntStorage", DType::i32},
                 {"ByteStorage", DType::u8}};

constexpr std::pair<const char*, Function> kFunctions[] = {{"_rebuild_tensor_v2", Function::rebuild_tensor_v2},
                                                           {"_rebuild_tensor_v3", Function::rebuild_tensor_v3},
                                                           {"_rebuild_parameter", Function::rebuild_parameter}};

// The torch.<dtype> globals a _rebuild_tensor_v3 names (fp8 tensors are pickled that way, over an UntypedStorage).
constexpr struct {
  const char* name;
  DType dtype;
} kDtypes[] = {{"float32", DType::f32},         {"float", DType::f32},          {"float64", DType::f64},
               {"double", DType::f64},          {"float16", DType::f16},        {"half", DType::f16},
               {"bfloat16", DType::bf16},       {"int64", DType::i64},          {"long", DType::i64},
               {"int32", DType::i32},           {"int", DType::i32},            {"uint8", DType::u8},
               {"float8_e4m3fn", DType::f8_e4m3}, {"float8_e5m2", DType::f8_e5m2}};

class Machine {
 public:
  Machine(const uint8_t* bytes, size_t n, const std::string& source) : p_(bytes), n_(n), source_(source) {}

  ValuePtr run() {
    for (;;) {
      op_at_ = pos_;
      const uint8_t op = take(1)[0];
      switch (op) {
        case 0x80: {  // PROTO
          const uint8_t proto = take(1)[0];
          if (proto > 2)
            fail(cat("pickle protocol ", int(proto), " is not supported (torch.save writes protocol 2)"),
                 "save the file again with torch.save and its default pickle_protocol");
          break;
        }
        case '.': {  // STOP
          if (!marks_.empty() || stack_.size() != 1) fail("the pickle ends with a malformed stack", kCorrupt);
          return stack_.back();
        }
        case 'c': push(global());
          break;
        case 'R': reduce();
          break;
        case 'Q': push(persistent(pop()));
          break;
        case '(': marks_.push_back(stack_.size());
          break;
        case 't': push(container(Kind::tuple, pop_mark()));
          break;
        case ')': push(container(Kind::tuple, {}));
          break;
        case 0x85:
        case 0x86:
        case 0x87: {  // TUPLE1, TUPLE2, TUPLE3
          const size_t k = op - 0x84;
          if (stack_.size() < mark_floor() + k) fail("TUPLE takes more items than the stack holds", kCorrupt);
          std::vector<ValuePtr> items(stack_.end() - long(k), stack_.end());
          stack_.resize(stack_.size() - k);
          push(container(Kind::tuple, std::move(items)));
          break;
        }
        case ']': push(container(Kind::list, {}));
          break;
        case '}': push(container(Kind::dict, {}));
          break;
        case 'a': {  // APPEND
          ValuePtr v = pop();
          adopt(top(Kind::list, "APPEND"), v);
          break;
        }
        case 'e': {  // APPENDS
          std::vector<ValuePtr> items = pop_mark();
          Value& list = top(Kind::list, "APPENDS");
          for (const ValuePtr& v : items) adopt(list, v);
          break;
        }
        case 's': {  // SETITEM
          ValuePtr v = pop(), k = pop();
          Value& dict = top(Kind::dict, "SETITEM");
          adopt(dict, k);
          adopt(dict, v);
          break;
        }
        case 'u': {  // SETITEMS
          std::vector<ValuePtr> items = pop_mark();
          if (items.size() % 2) fail("SETITEMS with a key and no value", kCorrupt);
          Value& dict = top(Kind::dict, "SETITEMS");
          for (const ValuePtr& v : items) adopt(dict, v);
          break;
        }
        case 'b': {  // BUILD: a dict's attributes (an OrderedDict state dict's _metadata), not needed here
          pop();
          top(Kind::dict, "BUILD");
          break;
        }
        case 'q': remember(take_le(1));
          break;
        case 'r': remember(take_le(4));
          break;
        case 'h': push(recall(take_le(1)));
          break;
        case 'j': push(recall(take_le(4)));
          break;
        case 'J': push(integer(int64_t(int32_t(uint32_t(take_le(4))))));
          break;
        case 'K': push(integer(int64_t(take_le(1))));
          break;
        case 'M': push(integer(int64_t(take_le(2))));
          break;
        case 0x8a: push(integer(long1()));
          break;
        case 'G': {  // BINFLOAT, big-endian
          const uint8_t* b = take(8);
          uint64_t u = 0;
          for (int i = 0; i < 8; ++i) u = u << 8 | b[i];
          auto v = std::make_shared<Value>();
          v->kind = Kind::real;
          std::memcpy(&v->real, &u, 8);
          push(std::move(v));
          break;
        }
        case 'X': push(string(take_le(4)));
          break;
        case 'U': push(string(take_le(1)));
          break;
        case 'N': push(std::make_shared<Value>());
          break;
        case 0x88:
        case 0x89: {  // NEWTRUE, NEWFALSE
          auto v = std::make_shared<Value>();
          v->kind = Kind::boolean;
          v->flag = op == 0x88;
          push(std::move(v));
          break;
        }
        default: {
          const std::string shown = op >= 0x20 && op < 0x7f ? cat(" ('", char(op), "')") : std::string();
          fail(cat("pickle opcode 0x", hex(op), shown, " is not one a PyTorch state dict uses"), kNotAllowed);
        }
      }
    }
  }

 private:
  [[noreturn]] void fail(const std::string& problem, const char* remedy) const {
    MS_FAIL(source_, ": ", problem, " (at byte ", op_at_, " of the pickle); ", remedy);
  }

  static std::string hex(uint8_t b) {
    static const char* digits = "0123456789abcdef";
    return {digits[b >> 4], digits[b & 15]};
  }

  const uint8_t* take(size_t k) {
    if (k > n_ - pos_) fail("the pickle ends in the middle of an instruction", kCorrupt);
    const uint8_t* at = p_ + pos_;
    pos_ += k;
    return at;
  }
  uint64_t take_le(int k) {
    const uint8_t* b = take(size_t(k));
    uint64_t v = 0;
    for (int i = k - 1; i >= 0; --i) v = v << 8 | b[i];
    return v;
  }

  size_t mark_floor() const { return marks_.empty() ? 0 : marks_.back(); }
  void push(ValuePtr v) { stack_.push_back(std::move(v)); }
  ValuePtr pop() {
    if (stack_.size() <= mark_floor()) fail("an instruction takes more items than the stack holds", kCorrupt);
    ValuePtr v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  std::vector<ValuePtr> pop_mark() {
    if (marks_.empty()) fail("an instruction needs a MARK that is not there", kCorrupt);
    std::vector<ValuePtr> items(stack_.begin() + long(marks_.back()), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }
  Value& top(Kind kind, const char* op) {
    if (stack_.size() <= mark_floor()) fail(cat(op, " on an empty stack"), kCorrupt);
    Value& v = *stack_.back();
    if (v.kind != kind) fail(cat(op, " on a value that is not a ", kind == Kind::list ? "list" : "dict"), kNotAllowed);
    return v;
  }

  // Places child inside parent. A container that has been placed may not change any more: so no value can hold
  // itself, nesting depth is known when a container is placed, and a value tree is freed without deep recursion.
  void adopt(Value& parent, const ValuePtr& child) {
    if (parent.frozen) fail("a container is changed after it was used (a recursive pickle)", kNotAllowed);
    if (child.get() == &parent) fail("a container is placed inside itself (a recursive pickle)", kNotAllowed);
    child->frozen = true;
    parent.depth = std::max(parent.depth, child->depth + 1);
    if (parent.depth > kMaxDepth) fail(cat("containers nest deeper than ", kMaxDepth, " levels"), kNotAllowed);
    parent.items.push_back(child);
  }
  ValuePtr container(Kind kind, std::vector<ValuePtr> items) {
    auto v = std::make_shared<Value>();
    v->kind = kind;
    v->depth = 1;
    for (const ValuePtr& item : items) adopt(*v, item);
    return v;
  }

  void remember(uint64_t index) {
    if (stack_.size() <= mark_floor()) fail("PUT on an empty stack", kCorrupt);
    memo_[index] = stack_.back();
  }
  ValuePtr recall(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) fail(cat("GET of memo entry ", index, ", which was never stored"), kCorrupt);
    return it->second;
  }

  static ValuePtr integer(int64_t i) {
    auto v = std::make_shared<Value>();
    v->kind = Kind::integer;
    v->integer = i;
    return v;
  }
  int64_t long1() {  // LONG1: a byte count, then a little-endian two's-complement integer
    const size_t k = take(1)[0];
    if (k > 8) fail(cat("an integer of ", k, " bytes is larger than megaslide reads (8)"), kCorrupt);
    const uint8_t* b = take(k);
    uint64_t u = 0;
    for (size_t i = k; i-- > 0;) u = u << 8 | b[i];
    if (k > 0 && k < 8 && (b[k - 1] & 0x80)) u |= ~uint64_t(0) << (8 * k);  // sign-extend
    return int64_t(u);
  }
  ValuePtr string(uint64_t len) {
    auto v = std::make_shared<Value>();
    v->kind = Kind::string;
    if (len > n_ - pos_) fail("a string runs past the end of the pickle", kCorrupt);
    v->text.assign(reinterpret_cast<const char*>(take(size_t(len))), size_t(len));
    return v;
  }

  std::string_view line() {
    const size_t start = pos_;
    while (pos_ < n_ && p_[pos_] != '\n') {
      if (pos_ - start >= kMaxGlobalName) fail("a GLOBAL name longer than any PyTorch uses", kCorrupt);
      ++pos_;
    }
    if (pos_ == n_) fail("the pickle ends in the middle of a GLOBAL", kCorrupt);
    return {reinterpret_cast<const char*>(p_ + start), pos_++ - start};
  }

  ValuePtr global() {
    const Global g{line(), line()};
    auto v = std::make_shared<Value>();
    if (g.module == "collections" && g.name == "OrderedDict") {
      v->kind = Kind::function;
      v->function = Function::ordered_dict;
      return v;
    }
    if (g.module == "torch._utils")
      for (const auto& [name, function] : kFunctions)
        if (g.name == name) {
          v->kind = Kind::function;
          v->function = function;
          return v;
        }
    if ((g.module == "torch" || g.module == "torch.storage") && g.name == "UntypedStorage") {
      v->kind = Kind::storage_type;
      v->untyped = true;
      return v;
    }
    if (g.module == "torch") {
      for (const auto& s : kStorages)
        if (g.name == s.name) {
          v->kind = Kind::storage_type;
          v->dtype = s.dtype;
          return v;
        }
      for (const auto& d : kDtypes)
        if (g.name == d.name) {
          v->kind = Kind::dtype;
          v->dtype = d.dtype;
          return v;
        }
      for (const char* prefix : {"uint", "int", "bool", "complex", "float8_", "bits", "qint", "quint"})
        if (g.name.starts_with(prefix) || g.name.ends_with("Storage"))
          fail(cat("torch.", escape_text(g.name), " is a dtype megaslide does not read"),
               "convert the tensor to float32, bfloat16 or float16 before saving");
    }
    fail(cat("global ", quote_text(cat(g.module, ".", g.name)), " is not allowed"), kNotAllowed);
  }

  // BINPERSID: ('storage', storage type, key, location, numel), as torch.save's persistent_id writes it.
  ValuePtr persistent(const ValuePtr& pid) {
    const auto& t = pid->items;
    if (pid->kind != Kind::tuple || t.empty() || t[0]->kind != Kind::string || t[0]->text != "storage")
      fail("a persistent id that is not a storage", kNotAllowed);
    if (t.size() != 5 || t[1]->kind != Kind::storage_type || t[2]->kind != Kind::string ||
        t[3]->kind != Kind::string || t[4]->kind != Kind::integer || t[4]->integer < 0)
      fail("a storage id that is not ('storage', type, key, location, size)", kCorrupt);
    auto s = std::make_shared<StorageRef>();
    s->key = t[2]->text;
    s->dtype = t[1]->dtype;
    s->untyped = t[1]->untyped;
    s->numel = t[4]->integer;
    auto v = std::make_shared<Value>();
    v->kind = Kind::storage;
    v->storage = std::move(s);
    return v;
  }

  void reduce() {
    ValuePtr args = pop();
    if (stack_.size() <= mark_floor()) fail("REDUCE with no callable", kCorrupt);
    ValuePtr& slot = stack_.back();
    if (slot->kind != Kind::function) fail("REDUCE of something that is not an allowed function", kNotAllowed);
    if (args->kind != Kind::tuple) fail("REDUCE with arguments that are not a tuple", kCorrupt);
    const auto& a = args->items;
    switch (slot->function) {
      case Function::ordered_dict:
        if (!a.empty()) fail("OrderedDict called with arguments", kNotAllowed);
        slot = container(Kind::dict, {});
        return;
      case Function::rebuild_parameter:  // (tensor, requires_grad, backward_hooks)
        if (a.size() != 3 || a[0]->kind != Kind::tensor) fail("_rebuild_parameter without a tensor", kCorrupt);
        slot = a[0];
        return;
      case Function::rebuild_tensor_v2:  // (storage, offset, size, stride, requires_grad, hooks[, metadata])
      case Function::rebuild_tensor_v3:  // (storage, offset, size, stride, requires_grad, hooks, dtype[, metadata])
        slot = tensor(a, slot->function == Function::rebuild_tensor_v3);
        return;
    }
  }

  // An integer tuple (a size or a stride) into out; false if it is not one.
  static bool ints(const Value& v, Shape* out) {
    if (v.kind != Kind::tuple || v.items.size() > kMaxDims) return false;
    for (const ValuePtr& i : v.items) {
      if (i->kind != Kind::integer || i->integer < 0) return false;
      out->push_back(i->integer);
    }
    return true;
  }

  ValuePtr tensor(const std::vector<ValuePtr>& a, bool v3) {
    const size_t fixed = v3 ? 7 : 6;
    if (a.size() != fixed && a.size() != fixed + 1) fail("a tensor rebuild with the wrong number of arguments", kCorrupt);
    if (a[0]->kind != Kind::storage) fail("a tensor rebuilt from something that is not a storage", kCorrupt);
    auto view = std::make_shared<TensorView>();
    view->storage = a[0]->storage;
    const StorageRef& s = *view->storage;
    if (v3) {
      if (a[6]->kind != Kind::dtype) fail("_rebuild_tensor_v3 without a dtype", kCorrupt);
      view->dtype = a[6]->dtype;
      if (!s.untyped && s.dtype != view->dtype)
        fail(cat("a ", dtype_name(view->dtype), " tensor over a ", dtype_name(s.dtype), " storage"), kCorrupt);
    } else {
      if (s.untyped) fail("_rebuild_tensor_v2 over an untyped storage", kCorrupt);
      view->dtype = s.dtype;
    }
    if (a[1]->kind != Kind::integer || a[1]->integer < 0) fail("a tensor with a negative storage offset", kCorrupt);
    view->offset = a[1]->integer;
    if (!ints(*a[2], &view->shape) || !ints(*a[3], &view->stride) || view->shape.size() != view->stride.size())
      fail("a tensor whose size and stride are not matching tuples of non-negative integers", kCorrupt);
    if (a[4]->kind != Kind::boolean || a[5]->kind != Kind::dict) fail("a tensor rebuild with malformed flags", kCorrupt);

    // The view must stay inside its storage: offset + sum (size - 1) * stride < elements, without overflow; and its
    // size in bytes (the product of its nonzero sizes, for an empty view too) must fit int64.
    const int64_t elements = s.untyped ? s.numel / dtype_size(view->dtype) : s.numel;
    int64_t last = view->offset, bytes = dtype_size(view->dtype);
    bool empty = false, overflow = false;
    for (size_t i = 0; i < view->shape.size(); ++i) {
      if (view->shape[i] == 0) empty = true;
      int64_t step;
      overflow |= view->shape[i] > 0 && (__builtin_mul_overflow(view->shape[i] - 1, view->stride[i], &step) ||
                                         __builtin_add_overflow(last, step, &last) ||
                                         __builtin_mul_overflow(bytes, view->shape[i], &bytes));
    }
    if (overflow && empty) fail(cat("an empty tensor of shape ", shape_str(view->shape), " too large to describe"), kCorrupt);
    if (!empty && (overflow || last >= elements))
      fail(cat("tensor of shape ", shape_str(view->shape), " at offset ", view->offset, " reaches past its storage '",
               escape_text(s.key), "' of ", elements, " elements"),
           kCorrupt);
    if (empty && view->offset > elements) fail("an empty tensor whose offset lies past its storage", kCorrupt);
    auto v = std::make_shared<Value>();
    v->kind = Kind::tensor;
    v->tensor = std::move(view);
    return v;
  }

  const uint8_t* p_;
  size_t n_, pos_ = 0, op_at_ = 0;
  const std::string& source_;
  std::vector<ValuePtr> stack_;
  std::vector<size_t> marks_;  // stack sizes at each open MARK
  std::unordered_map<uint64_t, ValuePtr> memo_;
};

}  // namespace

ValuePtr load(const uint8_t* bytes, size_t n, const std::string& source) { return Machine(bytes, n, source).run(); }

}  // namespace ms::pickle
