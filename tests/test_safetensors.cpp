#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>

#include "core/check.h"
#include "file_util.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "io/weight_files.h"
#include "temp_dir.h"
#include "test_util.h"

namespace ms::test {
namespace {

namespace fs = std::filesystem;

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char(uint8_t(v >> (8 * i)));
  return s;
}

uint64_t header_length_of(const std::string& file) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | uint8_t(file[size_t(i)]);
  return v;
}

// Writes a raw safetensors file: u64-LE header length (header.size() unless given), header, data.
void write_raw(const std::string& path, const std::string& header, const std::string& data = "",
               std::optional<uint64_t> length = {}) {
  write_bytes(path, le64(length.value_or(header.size())) + header + data);
}

// One header entry: "name":{"dtype":..,"shape":..,"data_offsets":[b,e]}.
std::string entry(const std::string& name, const std::string& dtype, const std::string& shape, int64_t b, int64_t e) {
  return cat("\"", name, "\":{\"dtype\":\"", dtype, "\",\"shape\":", shape, ",\"data_offsets\":[", b, ",", e, "]}");
}

// Expects SafetensorsFile::open(path) to throw ms::Error naming the file and containing phrase.
void expect_open_rejected(const std::string& path, const std::string& phrase) {
  try {
    SafetensorsFile::open(path);
    ADD_FAILURE() << "opened " << path << " without error; expected: " << phrase;
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(fs::path(path).filename().string()), std::string::npos) << m;
    EXPECT_NE(m.find(phrase), std::string::npos) << "expected '" << phrase << "' in: " << m;
  }
}

bool has_temp_files(const fs::path& dir) {
  for (const auto& d : fs::directory_iterator(dir))
    if (d.path().filename().string().find(".tmp-") != std::string::npos) return true;
  return false;
}

// A small valid file: metadata, several dtypes, a zero-size tensor in the middle.
std::string write_small_valid(const TempDir& dir) {
  const std::string p = dir.file("small.safetensors");
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  std::vector<uint16_t> b = {0x3fc0, 0xbec0, 0x4380, 0, 0xc000};
  std::vector<int32_t> c = {7, -8, 9};
  write_safetensors(p,
                    {{"a", DType::f32, {2, 3}, a.data()},
                     {"empty", DType::i64, {0, 4}, nullptr},
                     {"b", DType::bf16, {5}, b.data()},
                     {"c", DType::i32, {3}, c.data()}},
                    {{"format", "pt"}});
  return p;
}

TEST(Safetensors, RoundTripEveryDtype) {
  TempDir dir;
  struct Case {
    std::string name;
    DType dtype;
    Shape shape;
  };
  const std::vector<Case> cases = {{"w.f32", DType::f32, {3, 5}}, {"f64", DType::f64, {}},
                                   {"f16", DType::f16, {7}},      {"bf16", DType::bf16, {2, 1, 3}},
                                   {"i64", DType::i64, {0}},      {"i32", DType::i32, {1, 1, 1, 5}},
                                   {"u8", DType::u8, {9}},        {"empty", DType::f32, {4, 0, 3}},
                                   {"scalar", DType::bf16, {}},   {"tail", DType::f64, {2, 3}}};
  Rng rng(1);
  std::vector<std::string> bytes;
  std::vector<TensorRef> refs;
  for (const Case& c : cases) {
    std::string b(size_t(numel(c.shape) * dtype_size(c.dtype)), '\0');
    for (char& x : b) x = char(rng.next_u64());
    bytes.push_back(b);
  }
  for (size_t i = 0; i < cases.size(); ++i)
    refs.push_back({cases[i].name, cases[i].dtype, cases[i].shape, bytes[i].data()});
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"step", "12"}, {"note", "ü → \"q\""}, {"e", ""}};
  const std::string p = dir.file("all.safetensors");
  write_safetensors(p, refs, metadata);

  const std::string raw = read_bytes(p);
  const uint64_t header_length = header_length_of(raw);
  EXPECT_EQ(header_length % 8, 0u);  // padded so the data section starts 8-aligned
  EXPECT_EQ(raw.find_last_not_of(' ', 8 + header_length - 1), raw.rfind('}', 8 + header_length - 1));

  SafetensorsFile f = SafetensorsFile::open(p);
  SafetensorsFile moved = std::move(f);  // entries and data survive a move
  EXPECT_EQ(moved.path(), p);
  EXPECT_EQ(moved.metadata(), metadata);
  ASSERT_EQ(moved.entries().size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const TensorEntry& e = moved.entries()[i];
    EXPECT_EQ(e.name, cases[i].name);
    EXPECT_EQ(e.dtype, cases[i].dtype);
    EXPECT_EQ(e.shape, cases[i].shape);
    ASSERT_EQ(e.nbytes, int64_t(bytes[i].size()));
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(e.data), size_t(e.nbytes)), bytes[i]) << e.name;
    EXPECT_EQ(moved.find(cases[i].name), &e);
  }
  EXPECT_EQ(moved.find("absent"), nullptr);
}

TEST(Safetensors, ZeroTensorsIsValid) {
  TempDir dir;
  const std::string p = dir.file("none.safetensors");
  write_safetensors(p, {});
  SafetensorsFile f = SafetensorsFile::open(p);
  EXPECT_TRUE(f.entries().empty());
  EXPECT_TRUE(f.metadata().empty());
  write_raw(p, "{\"__metadata__\":{}}");
  EXPECT_TRUE(SafetensorsFile::open(p).entries().empty());
}

TEST(Safetensors, ReadAsF32IsExact) {
  TempDir dir;
  // Bit patterns with the values they encode exactly.
  const std::vector<uint16_t> bf16 = {0x3fc0, 0xbec0, 0x4380, 0x0000, 0x8000, 0x477f, 0x0080, 0xff7f};
  const std::vector<float> bf16_want = {1.5f, -0.375f, 256.0f, 0.0f, -0.0f, 65280.0f, 0x1p-126f, -0x1.fep127f};
  const std::vector<uint16_t> f16 = {0x3e00, 0xb600, 0x7bff, 0x0400, 0x0001, 0x1400, 0xfbff};
  const std::vector<float> f16_want = {1.5f, -0.375f, 65504.0f, 0x1p-14f, 0x1p-24f, 0x1p-10f, -65504.0f};
  const std::vector<double> f64 = {0.1, -2.5, 1e-3, 123456.789};
  const std::vector<int64_t> i64 = {-7, 0, 16777216, -123456};
  const std::vector<int32_t> i32 = {-7, 0, 16777216, 2147483520};
  const std::vector<uint8_t> u8 = {0, 7, 255};
  const std::vector<float> f32 = {0.25f, -1e30f, 3.0f};
  // u8 first puts every later tensor at an odd offset: read_as_f32 must cope with unaligned data.
  const std::string p = dir.file("conv.safetensors");
  write_safetensors(p, {{"u8", DType::u8, {3}, u8.data()},
                        {"bf16", DType::bf16, {8}, bf16.data()},
                        {"f16", DType::f16, {7}, f16.data()},
                        {"f32", DType::f32, {3}, f32.data()},
                        {"f64", DType::f64, {2, 2}, f64.data()},
                        {"i64", DType::i64, {4}, i64.data()},
                        {"i32", DType::i32, {4}, i32.data()}});
  SafetensorsFile f = SafetensorsFile::open(p);
  auto read = [&](const std::string& name) {
    const TensorEntry* e = f.find(name);
    EXPECT_NE(e, nullptr) << name;
    std::vector<float> out(size_t(numel(e->shape)));
    read_as_f32(*e, out.data());
    return out;
  };
  EXPECT_NE(reinterpret_cast<uintptr_t>(f.find("f32")->data) % 4, 0u);
  EXPECT_EQ(read("bf16"), bf16_want);
  EXPECT_EQ(read("f16"), f16_want);
  EXPECT_EQ(read("f32"), f32);
  EXPECT_EQ(read("f64"), std::vector<float>(f64.begin(), f64.end()));
  EXPECT_EQ(read("i64"), (std::vector<float>{-7, 0, 16777216, -123456}));
  EXPECT_EQ(read("i32"), (std::vector<float>{-7, 0, 16777216, 2147483520}));
  EXPECT_EQ(read("u8"), (std::vector<float>{0, 7, 255}));
}

TEST(Safetensors, WriteRejectsBadArguments) {
  TempDir dir;
  const std::string p = dir.file("x.safetensors");
  float v = 1;
  EXPECT_THROW(write_safetensors(p, {{"a", DType::f32, {}, &v}, {"a", DType::f32, {}, &v}}), Error);
  EXPECT_THROW(write_safetensors(p, {{"__metadata__", DType::f32, {}, &v}}), Error);
  EXPECT_THROW(write_safetensors(p, {{"a", DType::f32, {-1}, &v}}), Error);
  EXPECT_THROW(write_safetensors(p, {{"a", DType::f32, {2}, nullptr}}), Error);
  EXPECT_THROW(write_safetensors(p, {{"bad\xff", DType::f32, {}, &v}}), Error);
  EXPECT_FALSE(fs::exists(p));
  EXPECT_FALSE(has_temp_files(dir.path));
}

// ---- atomic writes ----

TEST(SafetensorsWrite, ReplacesExistingFile) {
  TempDir dir;
  const std::string p = write_small_valid(dir);
  float v = 42;
  write_safetensors(p, {{"new", DType::f32, {}, &v}});
  SafetensorsFile f = SafetensorsFile::open(p);
  ASSERT_EQ(f.entries().size(), 1u);
  EXPECT_EQ(f.entries()[0].name, "new");
  EXPECT_FALSE(has_temp_files(dir.path));
}

// SafetensorsWriter places tensor bytes in any order: pieces written backwards, across tensor borders, give the file
// write_safetensors writes byte for byte; a writer destroyed before commit leaves neither file nor temporary.
TEST(SafetensorsWrite, PiecesInAnyOrderMakeTheSameFile) {
  TempDir dir;
  std::vector<uint16_t> a(37), b(5 * 7);
  for (size_t i = 0; i < a.size(); ++i) a[i] = uint16_t(i * 977 + 3);
  for (size_t i = 0; i < b.size(); ++i) b[i] = uint16_t(i * 131 + 11);
  const std::vector<TensorRef> tensors{{"a", DType::bf16, {37}, a.data()}, {"b", DType::bf16, {5, 7}, b.data()}};
  write_safetensors(dir.file("whole.safetensors"), tensors, {{"format", "pt"}});
  std::vector<uint16_t> data(a);
  data.insert(data.end(), b.begin(), b.end());
  {
    SafetensorsWriter w(dir.file("pieces.safetensors"),
                        {{"a", DType::bf16, {37}, nullptr}, {"b", DType::bf16, {5, 7}, nullptr}}, {{"format", "pt"}});
    for (int64_t end = int64_t(data.size()); end > 0; end -= 13) {  // 13 elements at a time, last first
      const int64_t begin = std::max<int64_t>(0, end - 13);
      w.write_at(begin * 2, data.data() + begin, size_t(end - begin) * 2);
    }
    EXPECT_THROW(w.write_at(int64_t(data.size()) * 2 - 1, data.data(), 2), Error);  // past the tensors' bytes
    w.commit();
  }
  EXPECT_EQ(read_file(dir.file("pieces.safetensors")), read_file(dir.file("whole.safetensors")));
  {
    SafetensorsWriter w(dir.file("dropped.safetensors"), tensors);
    w.write_at(0, a.data(), 8);
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("dropped.safetensors")));
  EXPECT_FALSE(has_temp_files(dir.path));
}

TEST(SafetensorsWrite, MissingDirectoryFails) {
  TempDir dir;
  const std::string p = dir.file("no/such/dir/x.safetensors");
  try {
    write_safetensors(p, {});
    ADD_FAILURE() << "wrote into a missing directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos) << e.what();
  }
}

// The write runs in a child process, which drops to user "nobody" when the tests run as root
// (root ignores directory permissions). Child exit codes: 0 the expected error, 1 no error,
// 2 another message, 3 could not drop privileges, 4 the directory was still writable.
TEST(SafetensorsWrite, UnwritableDirectoryKeepsOldFile) {
  TempDir dir;
  const std::string p = write_small_valid(dir);
  const std::string before = read_bytes(p);
  fs::permissions(dir.path,
                  fs::perms::owner_read | fs::perms::owner_exec | fs::perms::others_read | fs::perms::others_exec);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::geteuid() == 0 && ::setuid(65534) != 0) ::_exit(3);
    if (::access(dir.path.c_str(), W_OK) == 0) ::_exit(4);
    float v = 1;
    try {
      write_safetensors(p, {{"x", DType::f32, {}, &v}});
    } catch (const Error& e) {
      const std::string m = e.what();
      ::_exit(m.find(p) != std::string::npos && m.find("Permission denied") != std::string::npos ? 0 : 2);
    }
    ::_exit(1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 3 || WEXITSTATUS(status) == 4) GTEST_SKIP() << "cannot make a directory unwritable here";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(read_bytes(p), before);
  EXPECT_FALSE(has_temp_files(dir.path));
}

TEST(SafetensorsWrite, RenameOntoDirectoryFailsAndCleansUp) {
  TempDir dir;
  const std::string p = dir.file("target.safetensors");
  fs::create_directories(fs::path(p) / "inner");
  float v = 1;
  try {
    write_safetensors(p, {{"x", DType::f32, {}, &v}});
    ADD_FAILURE() << "renamed over a directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rename"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_directory(fs::path(p) / "inner"));
  EXPECT_FALSE(has_temp_files(dir.path));
}

// A file size limit makes write() fail with EFBIG, standing in for a full disk.
TEST(SafetensorsWrite, FailedWriteKeepsOldFileAndRemovesTemp) {
  TempDir dir;
  const std::string p = write_small_valid(dir);
  const std::string before = read_bytes(p);
  std::vector<float> big(1 << 14, 1.0f);
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string message;
  try {
    write_safetensors(p, {{"big", DType::f32, {int64_t(big.size())}, big.data()}});
  } catch (const Error& e) {
    message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::signal(SIGXFSZ, old_handler);
  EXPECT_NE(message.find(p), std::string::npos) << message;
  EXPECT_NE(message.find("File too large"), std::string::npos) << message;
  EXPECT_EQ(read_bytes(p), before);
  EXPECT_FALSE(has_temp_files(dir.path));
}

// ---- strict reader: every malformed case is an ms::Error naming the file and the problem ----

class Malformed : public ::testing::Test {
 protected:
  TempDir dir;
  std::string path = dir.file("bad.safetensors");
  void expect(const std::string& header, const std::string& data, const std::string& phrase,
              std::optional<uint64_t> length = {}) {
    write_raw(path, header, data, length);
    expect_open_rejected(path, phrase);
  }
};

const std::string k16(16, '\x01');

TEST_F(Malformed, EmptyFile) {
  write_bytes(path, "");
  expect_open_rejected(path, "shorter than the 8-byte header length field");
}
TEST_F(Malformed, ShorterThanEightBytes) {
  write_bytes(path, std::string("\x02\0\0\0{}", 6));
  expect_open_rejected(path, "shorter than the 8-byte header length field");
}
TEST_F(Malformed, HeaderLengthOver100MB) { expect("{}", "", "exceeds the limit of 100000000 bytes", 100'000'001); }
TEST_F(Malformed, HeaderLengthHuge) { expect("{}", "", "exceeds the limit", ~uint64_t(0)); }
TEST_F(Malformed, HeaderLengthPastEndOfFile) { expect("{}", "", "runs past the end of the file (10 bytes)", 64); }
TEST_F(Malformed, HeaderNotJson) { expect("{\"a\":", "", "the header is not valid JSON"); }
TEST_F(Malformed, HeaderTrailingGarbage) { expect("{} x", "", "the header is not valid JSON"); }
TEST_F(Malformed, HeaderInvalidUtf8) { expect("{\"\xff\xfe\":{}}", "", "the header is not valid JSON"); }
TEST_F(Malformed, HeaderEmpty) { expect("", "", "the header is not valid JSON"); }
TEST_F(Malformed, HeaderNotObject) { expect("[1,2]", "", "the header is a JSON array, not an object"); }
TEST_F(Malformed, HeaderScalar) { expect("7", "", "the header is a JSON number, not an object"); }
TEST_F(Malformed, EntryNotObject) { expect("{\"x\":5}", "", "tensor 'x' is a JSON number, not an object"); }
TEST_F(Malformed, MissingDtype) {
  expect("{\"x\":{\"shape\":[4],\"data_offsets\":[0,16]}}", k16, "tensor 'x' has no \"dtype\"");
}
TEST_F(Malformed, MissingShape) {
  expect("{\"x\":{\"dtype\":\"F32\",\"data_offsets\":[0,16]}}", k16, "tensor 'x' has no \"shape\"");
}
TEST_F(Malformed, MissingDataOffsets) {
  expect("{\"x\":{\"dtype\":\"F32\",\"shape\":[4]}}", k16, "tensor 'x' has no \"data_offsets\"");
}
TEST_F(Malformed, DtypeNotString) {
  expect("{\"x\":{\"dtype\":32,\"shape\":[4],\"data_offsets\":[0,16]}}", k16, "tensor 'x' dtype is not a string");
}
TEST_F(Malformed, UnknownDtype) {
  expect("{" + entry("x", "C64", "[2]", 0, 16) + "}", k16, "tensor 'x' has unknown dtype 'C64'");
}
TEST_F(Malformed, ShapeNotArray) {
  expect("{" + entry("x", "F32", "4", 0, 16) + "}", k16, "tensor 'x' shape is not an array of integers");
}
TEST_F(Malformed, ShapeFloatDim) {
  expect("{" + entry("x", "F32", "[4.0]", 0, 16) + "}", k16, "shape is not an array of integers");
}
TEST_F(Malformed, ShapeStringDim) {
  expect("{" + entry("x", "F32", "[\"4\"]", 0, 16) + "}", k16, "shape is not an array of integers");
}
TEST_F(Malformed, NegativeDim) {
  expect("{" + entry("x", "F32", "[-2,-2]", 0, 16) + "}", k16, "has negative dimension -2");
}
TEST_F(Malformed, NumelOverflow) {
  expect("{" + entry("x", "F32", "[4294967296,4294967296]", 0, 16) + "}", k16, "has too many elements");
}
TEST_F(Malformed, DimBeyondInt64) {
  expect("{" + entry("x", "U8", "[18446744073709551615]", 0, 16) + "}", k16, "has too many elements");
}
TEST_F(Malformed, OffsetsNotArray) {
  expect("{\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":16}}", k16,
         "tensor 'x' data_offsets is not an array of two non-negative integers");
}
TEST_F(Malformed, OffsetsWrongLength) {
  expect("{\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16,16]}}", k16,
         "data_offsets is not an array of two");
}
TEST_F(Malformed, OffsetsNotIntegers) {
  expect("{\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,\"16\"]}}", k16,
         "data_offsets is not an array of two");
}
TEST_F(Malformed, OffsetsNegative) {
  expect("{" + entry("x", "F32", "[0]", -4, -4) + "}", "", "data_offsets is not an array of two");
}
TEST_F(Malformed, OffsetsPastEnd) {
  expect("{" + entry("x", "F32", "[8]", 0, 32) + "}", k16,
         "data_offsets [0, 32] run past the end of the data section (16 bytes)");
}
TEST_F(Malformed, OffsetsHugeDoNotWrap) {
  expect("{" + entry("x", "U8", "[16]", 9223372036854775807 - 15, 9223372036854775807) + "}", k16, "run past the end");
}
TEST_F(Malformed, OffsetsBeginAfterEnd) {
  expect("{" + entry("x", "F32", "[1]", 8, 4) + "}", k16, "data_offsets [8, 4] begin after they end");
}
TEST_F(Malformed, SizeMismatch) {
  expect("{" + entry("x", "F32", "[2,2]", 0, 12) + "}", std::string(12, '\0'),
         "tensor 'x' data_offsets [0, 12] do not match dtype F32 x shape [2, 2] (16 bytes)");
}
TEST_F(Malformed, FirstTensorNotAtZero) {
  expect("{" + entry("x", "F32", "[2]", 8, 16) + "}", k16,
         "begins at byte 8 of the data section but the data section starts at byte 0");
}
TEST_F(Malformed, GapBetweenTensors) {
  expect("{" + entry("a", "F32", "[1]", 0, 4) + "," + entry("b", "F32", "[2]", 8, 16) + "}", k16,
         "tensor 'b' begins at byte 8 of the data section but the previous tensor 'a' ends at byte 4");
}
TEST_F(Malformed, OverlappingTensors) {
  expect("{" + entry("a", "F32", "[2]", 0, 8) + "," + entry("b", "F32", "[3]", 4, 16) + "}", k16,
         "without gaps or overlaps");
}
TEST_F(Malformed, TrailingDataBytes) {
  expect("{" + entry("a", "F32", "[2]", 0, 8) + "}", k16,
         "the tensors end at byte 8 but the data section has 16 bytes");
}
TEST_F(Malformed, DataWithoutTensors) {
  expect("{}", k16, "the tensors end at byte 0 but the data section has 16 bytes");
}
TEST_F(Malformed, DuplicateName) {
  expect("{" + entry("a", "F32", "[2]", 0, 8) + "," + entry("a", "F32", "[2]", 8, 16) + "}", k16,
         "tensor name 'a' appears twice in the header");
}
TEST_F(Malformed, DuplicateKeyInEntry) {
  expect("{\"x\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", k16,
         "key 'dtype' appears twice in one header object");
}
TEST_F(Malformed, MetadataNotObject) {
  expect("{\"__metadata__\":\"x\"}", "", "__metadata__ is not an object of string -> string");
}
TEST_F(Malformed, MetadataValueNotString) {
  expect("{\"__metadata__\":{\"k\":1}}", "", "__metadata__ value for 'k' is a number, not a string");
}
TEST_F(Malformed, NestingTooDeep) {
  expect("{\"a\":{\"b\":[[[]]]}}", "", "nests JSON deeper than a safetensors header can");
}
TEST_F(Malformed, TooManyTensors) {
  std::string header = "{";
  for (int i = 0; i <= 1'000'001; ++i) header += cat(i ? "," : "", "\"", i, "\":0");
  expect(header + "}", "", "more than 1000000 tensors");
}
TEST_F(Malformed, NotARegularFile) { expect_open_rejected(dir.path.string(), "not a regular file"); }
TEST_F(Malformed, MissingFile) { expect_open_rejected(dir.file("absent.safetensors"), "cannot open"); }

// Every proper prefix of a valid file is invalid, and reading it must fail cleanly.
TEST(SafetensorsRobust, EveryTruncationIsRejected) {
  TempDir dir;
  const std::string full = read_bytes(write_small_valid(dir));
  const std::string p = dir.file("cut.safetensors");
  for (size_t n = 0; n < full.size(); ++n) {
    write_bytes(p, full.substr(0, n));
    EXPECT_THROW(SafetensorsFile::open(p), Error) << "prefix of " << n << " bytes";
  }
  write_bytes(p, full);
  EXPECT_EQ(SafetensorsFile::open(p).entries().size(), 4u);
}

// Mutated headers either open (and then read in bounds) or throw ms::Error; nothing else.
TEST(SafetensorsRobust, HeaderMutationsNeverCrash) {
  TempDir dir;
  const std::string full = read_bytes(write_small_valid(dir));
  const size_t header_end = 8 + size_t(header_length_of(full));
  const std::string p = dir.file("mut.safetensors");
  const char specials[] = "{}[]\",:-0123456789eE. \\";
  Rng rng(7);
  int opened = 0, rejected = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes = full;
    for (int k = 0, flips = 1 + int(rng.below(4)); k < flips; ++k) {
      char& c = bytes[size_t(rng.below(int64_t(header_end)))];
      switch (rng.below(3)) {
        case 0:
          c = char(c ^ (1 << rng.below(8)));
          break;
        case 1:
          c = specials[rng.below(sizeof(specials) - 1)];
          break;
        default:
          c = char(rng.next_u64());
          break;
      }
    }
    write_bytes(p, bytes);
    try {
      SafetensorsFile f = SafetensorsFile::open(p);
      for (const TensorEntry& e : f.entries()) {
        std::vector<float> out(size_t(numel(e.shape)));
        read_as_f32(e, out.data());
      }
      ++opened;
    } catch (const Error&) {
      ++rejected;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "trial " << trial << ": non-ms exception " << e.what();
    }
  }
  EXPECT_GT(rejected, 0);
  EXPECT_GT(opened, 0);
}

// ---- WeightFiles ----

void write_f32(const std::string& path, const std::vector<std::string>& names) {
  std::vector<float> v = {1, 2, 3};
  std::vector<TensorRef> refs;
  for (const auto& n : names) refs.push_back({n, DType::f32, {3}, v.data()});
  write_safetensors(path, refs);
}

TEST(WeightFiles, ShardsWithIndex) {
  TempDir dir;
  const std::string s1 = dir.file("model-00001-of-00002.safetensors"),
                    s2 = dir.file("model-00002-of-00002.safetensors");
  write_f32(s1, {"model.diffusion_model.blocks.0.ffn.0.weight", "model.diffusion_model.head.head.bias"});
  write_f32(s2, {"model.diffusion_model.blocks.1.ffn.0.weight"});
  write_bytes(dir.file("model.safetensors.index.json"),
              R"({"metadata": {"total_size": 36}, "weight_map": {
                 "model.diffusion_model.blocks.0.ffn.0.weight": "model-00001-of-00002.safetensors",
                 "model.diffusion_model.head.head.bias": "model-00001-of-00002.safetensors",
                 "model.diffusion_model.blocks.1.ffn.0.weight": "model-00002-of-00002.safetensors"}})");
  for (const std::string& p : {dir.path.string(), dir.file("model.safetensors.index.json")}) {
    WeightFiles w = WeightFiles::open(p);
    EXPECT_EQ(w.names(),
              (std::vector<std::string>{"blocks.0.ffn.0.weight", "blocks.1.ffn.0.weight", "head.head.bias"}));
    ASSERT_NE(w.find("blocks.1.ffn.0.weight"), nullptr);
    EXPECT_EQ(w.find("blocks.1.ffn.0.weight")->shape, Shape{3});
    EXPECT_EQ(w.file_of("blocks.1.ffn.0.weight"), s2);
    EXPECT_EQ(w.file_of("head.head.bias"), s1);
    EXPECT_EQ(w.find("model.diffusion_model.head.head.bias"), nullptr);
    EXPECT_THROW(w.file_of("absent"), Error);
  }
  EXPECT_TRUE(WeightFiles::has_weights(dir.path.string()));
}

TEST(WeightFiles, StripsFirstMatchingPrefixOnly) {
  TempDir dir;
  write_f32(dir.file("m.safetensors"), {"model.diffusion_model.a", "diffusion_model.b", "model.c", "d", "model.model.e",
                                        "diffusion_model.model.f", "xmodel.g"});
  WeightFiles w = WeightFiles::open(dir.file("m.safetensors"));
  EXPECT_EQ(w.names(), (std::vector<std::string>{"a", "b", "c", "d", "model.e", "model.f", "xmodel.g"}));
}

TEST(WeightFiles, DirectoryWithoutIndexLoadsAllFiles) {
  TempDir dir;
  write_f32(dir.file("b.safetensors"), {"y"});
  write_f32(dir.file("a.safetensors"), {"x"});
  WeightFiles w = WeightFiles::open(dir.path.string());
  EXPECT_EQ(w.names(), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(w.file_of("y"), dir.file("b.safetensors"));
}

TEST(WeightFiles, DuplicateAfterStrippingNamesBothFiles) {
  TempDir dir;
  write_f32(dir.file("a.safetensors"), {"model.x"});
  write_f32(dir.file("b.safetensors"), {"x"});
  const std::string m = error_of([&] { WeightFiles::open(dir.path.string()); });
  EXPECT_NE(m.find("a.safetensors"), std::string::npos) << m;
  EXPECT_NE(m.find("b.safetensors"), std::string::npos) << m;
  EXPECT_NE(m.find("'x'"), std::string::npos) << m;
}

TEST(WeightFiles, MissingShardIsAnError) {
  TempDir dir;
  write_f32(dir.file("s1.safetensors"), {"a"});
  write_bytes(dir.file("m.safetensors.index.json"),
              R"({"weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}})");
  const std::string m = error_of([&] { WeightFiles::open(dir.path.string()); });
  EXPECT_NE(m.find("m.safetensors.index.json"), std::string::npos) << m;
  EXPECT_NE(m.find("s2.safetensors"), std::string::npos) << m;
  EXPECT_NE(m.find("does not exist"), std::string::npos) << m;
}

TEST(WeightFiles, TensorMissingFromShardIsAnError) {
  TempDir dir;
  write_f32(dir.file("s1.safetensors"), {"a"});
  write_bytes(dir.file("m.safetensors.index.json"),
              R"({"weight_map": {"a": "s1.safetensors", "b": "s1.safetensors"}})");
  const std::string m = error_of([&] { WeightFiles::open(dir.file("m.safetensors.index.json")); });
  EXPECT_NE(m.find("'b'"), std::string::npos) << m;
  EXPECT_NE(m.find("has no such tensor"), std::string::npos) << m;
}

TEST(WeightFiles, BadIndexIsAnError) {
  TempDir dir;
  write_bytes(dir.file("m.safetensors.index.json"), R"({"weight_map": [1]})");
  EXPECT_NE(error_of([&] { WeightFiles::open(dir.path.string()); }).find("weight_map"), std::string::npos);
  write_bytes(dir.file("m.safetensors.index.json"), "{not json");
  EXPECT_NE(error_of([&] { WeightFiles::open(dir.path.string()); }).find("not valid JSON"), std::string::npos);
}

TEST(WeightFiles, EmptyOrMissingPathIsAnError) {
  TempDir dir;
  EXPECT_FALSE(WeightFiles::has_weights(dir.path.string()));
  EXPECT_FALSE(WeightFiles::has_weights(dir.file("absent")));
  EXPECT_NE(error_of([&] { WeightFiles::open(dir.path.string()); }).find("holds no *.safetensors"), std::string::npos);
  EXPECT_NE(error_of([&] { WeightFiles::open(dir.file("absent")); }).find("no such file or directory"),
            std::string::npos);
}

}  // namespace
}  // namespace ms::test
