// The PyTorch-zip reader against files torch.save wrote (tests/data/pth, made by tools/make_pth_fixtures.py with
// Debian's python3-torch 1.13; the expected values are torch's own, in expected.json) and against hostile files
// that must be refused with a clear message.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "core/check.h"
#include "core/text.h"
#include "file_util.h"
#include "io/pickle.h"
#include "io/pth.h"
#include "io/weight_files.h"
#include "temp_dir.h"

namespace ms::test {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const fs::path kPthData = fs::path(MEGASLIDE_TEST_DATA) / "pth";

// Whether every byte of a message is printable ASCII or part of a well-formed UTF-8 character: escaping it changes
// nothing but its backslashes, which it doubles.
bool clean_text(const std::string& m) {
  std::string doubled;
  for (char c : m) doubled += c == '\\' ? std::string("\\\\") : std::string(1, c);
  return escape_text(m, m.size()) == doubled;
}

TEST(Pth, ReadsWhatTorchSaveWrote) {
  const json expected = read_json(kPthData / "expected.json");
  ASSERT_GE(expected.size(), 11u);
  for (const auto& [file, want] : expected.items()) {
    SCOPED_TRACE(file);
    const PthFile f = PthFile::open((kPthData / file).string());
    ASSERT_EQ(f.entries().size(), want["tensors"].size());
    for (const auto& [name, t] : want["tensors"].items()) {
      SCOPED_TRACE(name);
      const TensorEntry* e = f.find(name);
      ASSERT_NE(e, nullptr);
      EXPECT_EQ(dtype_name(e->dtype), t["dtype"].get<std::string>());
      EXPECT_EQ(e->shape, t["shape"].get<Shape>());
      const std::vector<double> values = t["values"].get<std::vector<double>>();
      ASSERT_EQ(numel(e->shape), int64_t(values.size()));
      std::vector<float> got(values.size());
      read_as_f32(*e, got.data());
      for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(double(got[i]), values[i]) << "element " << i;  // exact
    }
  }
}

TEST(Pth, ViewsShareOneStorageAndStridedViewsAreCopied) {
  const PthFile f = PthFile::open((kPthData / "views.pth").string());
  const TensorEntry *base = f.find("base"), *t = f.find("t"), *s = f.find("s");
  ASSERT_TRUE(base && t && s);
  std::vector<float> b(24), tt(24), ss(9);
  read_as_f32(*base, b.data());
  read_as_f32(*t, tt.data());
  read_as_f32(*s, ss.data());
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j) EXPECT_EQ(tt[size_t(j * 4 + i)], b[size_t(i * 6 + j)]);  // t = base.T
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(ss[size_t(i * 3 + j)], b[size_t((i + 1) * 6 + 2 + j)]);  // s = base[1:, 2:5]
  // The contiguous base is read in place from the mapping; the transposed view cannot be.
  EXPECT_NE(base->data, t->data);
}

TEST(Pth, WeightFilesOpensPthFilesAndDirectories) {
  const WeightFiles w = WeightFiles::open((kPthData / "model_wrap.pth").string());
  EXPECT_EQ(w.names(), (std::vector<std::string>{"x.bias", "x.weight"}));
  TempDir dir;
  fs::copy_file(kPthData / "f16.pth", dir.file("a.pth"));
  fs::copy_file(kPthData / "f64_i64.pth", dir.file("b.pt"));
  EXPECT_TRUE(WeightFiles::has_weights(dir.path.string()));
  EXPECT_EQ(WeightFiles::open(dir.path.string()).names(), (std::vector<std::string>{"d", "i", "w"}));
}

TEST(Pth, LegacyFormatAsksForResave) {
  try {
    PthFile::open((kPthData / "legacy.pth").string());
    FAIL() << "opened a legacy checkpoint";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("legacy"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("torch.save"), std::string::npos) << e.what();
  }
}

// What each hostile file's message must say (one of the phrases), besides naming the file.
const std::map<std::string, std::vector<std::string>> kRefusals = {
    {"hostile_os_system.pth", {"global 'os.system' is not allowed"}},
    {"hostile_builtins_eval.pth", {"global 'builtins.eval' is not allowed"}},
    {"hostile_builtin_eval_py2.pth", {"global '__builtin__.eval' is not allowed"}},
    {"hostile_subprocess.pth", {"global 'subprocess.Popen' is not allowed"}},
    {"hostile_other_reduce.pth", {"global 'collections.defaultdict' is not allowed"}},
    {"hostile_torch_class.pth", {"global 'torch.nn.modules.linear.Linear' is not allowed"}},
    {"hostile_opcode_inst.pth", {"opcode 0x69 ('i') is not one"}},
    {"hostile_opcode_proto4.pth", {"pickle protocol 4 is not supported"}},
    {"hostile_persid_not_storage.pth", {"persistent id that is not a storage"}},
    {"hostile_view_past_storage.pth", {"shape [100] at offset 0 reaches past its storage '0' of 15 elements"}},
    {"hostile_offset_past_storage.pth", {"shape [3, 5] at offset 14 reaches past its storage"}},
    {"hostile_storage_size_mismatch.pth", {"should hold 15 elements of F32 but its entry has 40 bytes"}},
    {"hostile_missing_storage.pth", {"storage '7', which the archive lacks"}},
    {"hostile_huge_numel.pth", {"should hold 4611686018427387904 elements"}},
    {"hostile_nested_lists.pth", {"nest deeper than 256"}},
    {"hostile_shared_lists.pth", {"share items so often"}},
    {"hostile_self_append.pth", {"placed inside itself"}},
    {"hostile_compressed.pth", {"is compressed (zip method 8)"}},
    {"hostile_encrypted.pth", {"is encrypted"}},
    {"hostile_overlap.pth", {"local header names another entry", "overlaps"}},
    {"hostile_entry_past_end.pth", {"runs past the end of the file"}},
    {"hostile_truncated.pth", {"no zip end-of-central-directory record"}},
    {"hostile_no_pickle.pth", {"no <folder>/data.pkl"}},
    {"hostile_big_endian.pth", {"byte order 'big'"}},
    {"hostile_repeated_view.pth", {"more memory than the file's size"}},
    {"hostile_long_key.pth", {"a dict key of 5000 bytes"}},
    {"hostile_stride0_huge.pth", {"shape [9223372036854775807, 9223372036854775807] at offset 0 reaches past"}},
    {"hostile_empty_huge.pth", {"too large to describe"}},
};

TEST(Pth, RefusesHostileFilesClearly) {
  const json hostile = read_json(kPthData / "hostile.json");
  ASSERT_EQ(hostile.size(), kRefusals.size());
  for (const auto& [file, description] : hostile.items()) {
    SCOPED_TRACE(file + ": " + description.get<std::string>());
    ASSERT_TRUE(kRefusals.count(file));
    try {
      PthFile::open((kPthData / file).string());
      ADD_FAILURE() << "opened without error";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(file), std::string::npos) << m;
      bool said = false;
      for (const std::string& phrase : kRefusals.at(file)) said |= m.find(phrase) != std::string::npos;
      EXPECT_TRUE(said) << m;
      EXPECT_TRUE(clean_text(m)) << m;
    }
  }
}

TEST(Pth, EveryTruncationAndCorruptionIsAnErrorOrAValidFile) {
  TempDir dir;
  const std::string path = dir.file("cut.pth");
  for (const char* name : {"f32.pth", "zip64.pth", "parameter.pth"}) {
    const std::string bytes = read_bytes(kPthData / name);
    for (size_t n = 0; n < bytes.size(); ++n) {  // every prefix is refused
      write_bytes(path, std::string_view(bytes).substr(0, n));
      EXPECT_THROW(PthFile::open(path), Error) << name << " cut to " << n << " bytes";
    }
    std::mt19937 rng(7);
    for (int trial = 0; trial < 300; ++trial) {  // flipped bytes: an error, or a file whose tensors all read
      std::string mutated = bytes;
      for (int k = 0; k < 3; ++k) mutated[rng() % mutated.size()] ^= char(1 + rng() % 255);
      write_bytes(path, mutated);
      try {
        const PthFile f = PthFile::open(path);
        for (const TensorEntry& e : f.entries()) {
          std::vector<float> out(size_t(numel(e.shape)));
          read_as_f32(e, out.data());
        }
      } catch (const Error& e) {
        EXPECT_TRUE(clean_text(e.what())) << e.what();
      }
    }
  }
}

// A pickle built here, opcode by opcode, for the interpreter's own limits.
TEST(Pickle, LimitsAndMalformedStreams) {
  using namespace std::string_literals;  // "..."s keeps the NUL bytes of a pickle
  auto refused = [](const std::string& bytes, const std::string& phrase) {
    try {
      pickle::load(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "test.pkl");
      ADD_FAILURE() << "accepted; expected " << phrase;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
    }
  };
  refused("\x80\x02", "ends in the middle");                  // no STOP
  refused("\x80\x02.", "malformed stack");                    // STOP on an empty stack
  refused("\x80\x02h\x05.", "never stored");                  // GET of an unset memo entry
  refused("\x80\x02(}.", "malformed stack");                  // a MARK left open
  refused("\x80\x02}K\x01s.", "SETITEM on an empty stack");   // SETITEM with one item
  refused("\x80\x02\x8a\x04\x01\x02", "ends in the middle");  // LONG1 of 4 bytes, truncated
  refused("\x80\x02\x8a\x09\x01\x02\x03\x04\x05\x06\x07\x08\x09.", "9 bytes");
  // A list placed in a dict, then appended to through the memo.
  refused(
      "\x80\x02}K\x01]q\x00sh\x00K\x02"
      "a."s,
      "changed after it was used");
  // Negative LONG1 and BININT decode as Python does.
  const std::string ints = std::string("\x80\x02(\x8a\x01\xff", 6) + "J\xfe\xff\xff\xff" + "M\x34\x12t.";
  const pickle::ValuePtr v = pickle::load(reinterpret_cast<const uint8_t*>(ints.data()), ints.size(), "ints");
  ASSERT_EQ(v->items.size(), 3u);
  EXPECT_EQ(v->items[0]->integer, -1);
  EXPECT_EQ(v->items[1]->integer, -2);
  EXPECT_EQ(v->items[2]->integer, 0x1234);
}

}  // namespace
}  // namespace ms::test
