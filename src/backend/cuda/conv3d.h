// The CUDA forward of ops/conv3d.h (the frozen VAE's dense convolutions), in fp32.
#pragma once
#include <cstdint>

#include "backend/cuda/device.h"
#include "ops/conv3d.h"

namespace ms::cuda {

class GemmContext;

// One output frame, enqueued on `stream`: x holds d.kt (at most 3) device frame pointers [ci, h, w], null for a frame
// of zeros; w [co, k()], b [co] or null; y [co, out_h, out_w] (overwritten). A band of output pixels at a time is
// unfolded into col [col_floats] (at least k() x min(pixels, 64)) and multiplied with the weights on cuBLASLt (fp32
// operands and products); a 1x1x1 kernel at stride 1 multiplies the frame directly.
void conv3d_frame_forward(GemmContext& gemm, const ConvFrameParams<float>& p, float* col, int64_t col_floats,
                          Stream stream);

// The col scratch conv3d_frame_forward is given for d: bands of up to `budget` floats, at least 64 pixels wide, and
// no more than the whole frame's unfolding; 0 for a pointwise kernel, which unfolds nothing.
int64_t conv3d_col_floats(const ConvFrameDims& d, int64_t budget);

}  // namespace ms::cuda
