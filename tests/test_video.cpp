#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "core/check.h"
#include "io/video.h"
#include "temp_dir.h"
#include "test_util.h"
#include "video_util.h"

namespace ms::test {
namespace {

namespace fs = std::filesystem;

// Mean and max |a - b| over b's frames, on b's size (a may be padded to even sides).
struct Diff {
  double mean = 0;
  int max = 0;
};
Diff compare(const RgbVideo& a, const RgbVideo& b) {
  Diff d;
  for (int64_t f = 0; f < b.frames; ++f)
    for (int64_t y = 0; y < b.height; ++y)
      for (int64_t i = 0; i < b.width * 3; ++i) {
        const int e = std::abs(int(a.frame(f)[y * a.width * 3 + i]) - int(b.frame(f)[y * b.width * 3 + i]));
        d.mean += e;
        d.max = std::max(d.max, e);
      }
  d.mean /= double(b.frames * b.height * b.width * 3);
  return d;
}

struct Container {
  const char* ext;
  bool pads_to_even;  // the 4:2:0 codecs (all but GIF)
  // |error| in 8-bit levels. Lossy 4:2:0 codecs at high quality: the clip's channels vary independently,
  // so its chroma is as detailed as its luma and loses most in subsampling (measured: mean 2.2-2.9, max 13-18).
  // GIF: 256 median-cut colours for thousands, no dithering (measured: mean 3.9-4.9, max 17-22).
  double mean_tol;
  int max_tol;
};
// Names the parameter in test listings (gtest's default prints its bytes, pointers included).
void PrintTo(const Container& c, std::ostream* os) { *os << c.ext; }

class VideoRoundTrip : public ::testing::TestWithParam<Container> {};

TEST_P(VideoRoundTrip, OddSizedRandomClip) {
  const Container c = GetParam();
  TempDir dir;
  const RgbVideo clip = smooth_clip(6, 27, 35, 11, 12.0);
  const std::string path = dir.file(std::string("clip") + c.ext);
  encode_video(path, clip);
  const VideoInfo info = probe_video(path);
  EXPECT_EQ(info.frames, 6);
  EXPECT_EQ(info.height, c.pads_to_even ? 28 : 27);
  EXPECT_EQ(info.width, c.pads_to_even ? 36 : 35);
  if (std::string(c.ext) != ".gif") {  // GIF stores delays in 1/100 s
    EXPECT_NEAR(info.fps, 12.0, 1e-6);
  }
  const RgbVideo back = decode_video(path);
  ASSERT_EQ(back.frames, 6);
  ASSERT_EQ(back.width, info.width);
  const Diff d = compare(back, clip);
  EXPECT_LT(d.mean, c.mean_tol) << c.ext;
  EXPECT_LE(d.max, c.max_tol) << c.ext;
  for (const auto& e : fs::directory_iterator(dir.path)) EXPECT_EQ(e.path().filename(), fs::path(path).filename());
}

INSTANTIATE_TEST_SUITE_P(Containers, VideoRoundTrip,
                         ::testing::Values(Container{".mp4", true, 3.5, 24}, Container{".mkv", true, 3.5, 24},
                                           Container{".webm", true, 3.5, 24}, Container{".avi", true, 3.5, 24},
                                           Container{".gif", false, 6.0, 30}),
                         [](const auto& info) { return std::string(info.param.ext + 1); });

TEST(Video, GifIsExactWithAtMost256Colours) {
  TempDir dir;
  RgbVideo clip = smooth_clip(3, 9, 13, 5);
  for (auto& b : clip.rgb) b = uint8_t(b & 0xe0);  // 8 levels per channel: <= 256 colours (8^3 = 512 possible)
  for (size_t i = 0; i < clip.rgb.size(); i += 3) clip.rgb[i + 2] = clip.rgb[i];  // blue = red: <= 64 colours
  encode_video(dir.file("a.gif"), clip);
  const RgbVideo back = decode_video(dir.file("a.gif"));
  ASSERT_EQ(back.rgb.size(), clip.rgb.size());
  EXPECT_EQ(back.rgb, clip.rgb);
}

TEST(Video, DecodesASubrange) {
  TempDir dir;
  encode_video(dir.file("c.mp4"), smooth_clip(7, 16, 20, 3));
  const RgbVideo all = decode_video(dir.file("c.mp4"));
  const RgbVideo part = decode_video(dir.file("c.mp4"), 2, 3);
  ASSERT_EQ(part.frames, 3);
  EXPECT_TRUE(std::equal(part.rgb.begin(), part.rgb.end(), all.frame(2)));
  EXPECT_EQ(decode_video(dir.file("c.mp4"), 5).frames, 2);
  const std::string e = error_of([&] { decode_video(dir.file("c.mp4"), 5, 4); });
  EXPECT_NE(e.find("ended after 7 decodable frames"), std::string::npos) << e;
}

// stream_video hands over the frames decode_video returns, one at a time, and stops when asked.
TEST(Video, StreamsFramesOneAtATime) {
  TempDir dir;
  encode_video(dir.file("c.webm"), smooth_clip(6, 18, 22, 5));
  const RgbVideo all = decode_video(dir.file("c.webm"));
  int64_t seen = 0;
  const VideoInfo info = stream_video(dir.file("c.webm"), [&](const uint8_t* rgb, int64_t h, int64_t w) {
    EXPECT_EQ(h, all.height);
    EXPECT_EQ(w, all.width);
    EXPECT_TRUE(std::equal(rgb, rgb + h * w * 3, all.frame(seen))) << "frame " << seen;
    return ++seen < 4;
  });
  EXPECT_EQ(seen, 4);
  EXPECT_EQ(info.frames, 4);
  EXPECT_EQ(stream_video(dir.file("c.webm"), [](const uint8_t*, int64_t, int64_t) { return true; }).frames, 6);
  const std::string e = error_of([&] { stream_video(dir.file("none.webm"), [](auto...) { return true; }); });
  EXPECT_NE(e.find("does not exist"), std::string::npos) << e;
}

TEST(Video, MissingFileAndDirectory) {
  TempDir dir;
  std::string e = error_of([&] { probe_video(dir.file("nope.mp4")); });
  EXPECT_NE(e.find("nope.mp4' does not exist"), std::string::npos) << e;
  e = error_of([&] { decode_video(dir.path.string()); });
  EXPECT_NE(e.find("is a directory"), std::string::npos) << e;
}

TEST(Video, CorruptFileIsAnError) {
  TempDir dir;
  std::string junk(4000, '\0');
  Rng r(9);
  for (auto& c : junk) c = char(r.next_u64());
  write_bytes(dir.file("junk.mp4"), junk);
  const std::string e = error_of([&] { probe_video(dir.file("junk.mp4")); });
  EXPECT_NE(e.find("junk.mp4"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { decode_video(dir.file("junk.mp4")); }), "(no error)");
  // A playlist posing as a video must not make FFmpeg open the files it names.
  encode_video(dir.file("real.mp4"), smooth_clip(2, 8, 8, 1));
  write_bytes(dir.file("list.mp4"), "#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:1,\nreal.mp4\n#EXT-X-ENDLIST\n");
  EXPECT_NE(error_of([&] { probe_video(dir.file("list.mp4")); }).find("cannot open video"), std::string::npos);
  write_bytes(dir.file("cat.mp4"), "ffconcat version 1.0\nfile real.mp4\n");
  EXPECT_NE(error_of([&] { probe_video(dir.file("cat.mp4")); }).find("cannot open video"), std::string::npos);
}

TEST(Video, TruncatedFilesAreErrors) {
  TempDir dir;
  for (const char* ext : {".mp4", ".webm", ".avi", ".gif"}) {
    const std::string full = dir.file(std::string("full") + ext), cut = dir.file(std::string("cut") + ext);
    encode_video(full, smooth_clip(8, 24, 24, 4));
    const std::string bytes = read_bytes(full);
    for (double keep : {0.1, 0.6}) {
      write_bytes(cut, bytes.substr(0, size_t(double(bytes.size()) * keep)));
      // Either an error, or fewer frames than were written: never the whole clip.
      const std::string e = error_of([&] {
        const VideoInfo info = probe_video(cut);
        const RgbVideo v = decode_video(cut);
        MS_FAIL(info.frames >= 8 && v.frames >= 8 ? "decoded whole" : "short");
      });
      EXPECT_EQ(e.find("decoded whole"), std::string::npos) << ext << " keep " << keep;
    }
  }
}

// A valid WAV file: audio only.
TEST(Video, FileWithoutVideoStream) {
  TempDir dir;
  auto le = [](uint32_t v, int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += char(uint8_t(v >> (8 * i)));
    return s;
  };
  std::string pcm(1600, '\0');
  Rng r(2);
  for (auto& c : pcm) c = char(r.next_u64());
  const std::string wav = "RIFF" + le(uint32_t(36 + pcm.size()), 4) + "WAVEfmt " + le(16, 4) + le(1, 2) + le(1, 2) +
                          le(8000, 4) + le(16000, 4) + le(2, 2) + le(16, 2) + "data" + le(uint32_t(pcm.size()), 4) +
                          pcm;
  write_bytes(dir.file("sound.wav"), wav);
  const std::string e = error_of([&] { probe_video(dir.file("sound.wav")); });
  EXPECT_NE(e.find("sound.wav' has no video stream"), std::string::npos) << e;
}

TEST(Video, EncodeErrorsLeaveExistingFileAlone) {
  TempDir dir;
  const RgbVideo clip = smooth_clip(2, 8, 8, 1);
  std::string e = error_of([&] { encode_video(dir.file("a.mov"), clip); });
  EXPECT_NE(e.find("unknown extension '.mov'"), std::string::npos) << e;
  e = error_of([&] { encode_video(dir.file("missing/a.mp4"), clip); });
  EXPECT_NE(e.find("missing/a.mp4"), std::string::npos) << e;
  write_bytes(dir.file("keep.mp4"), "previous");
  RgbVideo empty;
  e = error_of([&] { encode_video(dir.file("keep.mp4"), empty); });
  EXPECT_NE(e.find("need at least one frame"), std::string::npos) << e;
  EXPECT_EQ(read_bytes(dir.file("keep.mp4")), "previous");
  encode_video(dir.file("keep.mp4"), clip);  // replaces it whole
  EXPECT_EQ(probe_video(dir.file("keep.mp4")).frames, 2);
  size_t files = 0;
  for ([[maybe_unused]] const auto& f : fs::directory_iterator(dir.path)) ++files;
  EXPECT_EQ(files, 1u);  // no temporary left behind
}

}  // namespace
}  // namespace ms::test
