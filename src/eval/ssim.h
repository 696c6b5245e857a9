// Structural similarity (Wang, Bovik, Sheikh, Simoncelli 2004) of two 8-bit RGB frames.
#pragma once
#include <cstdint>

namespace ms {

constexpr int kSsimWindow = 11;                   // Gaussian window, pixels per side
constexpr double kSsimSigma = 1.5;                // its standard deviation
constexpr double kSsimK1 = 0.01, kSsimK2 = 0.03;  // C1 = (K1 255)^2, C2 = (K2 255)^2

// a, b [height, width, 3]. Per RGB channel: local means, variances and covariance under the
// normalised 11x11 Gaussian (sigma 1.5), SSIM map (2 mu_a mu_b + C1)(2 s_ab + C2) /
// ((mu_a^2 + mu_b^2 + C1)(s_a^2 + s_b^2 + C2)) averaged over the windows that lie wholly inside the
// frame (Wang's 'valid' region); the result is the mean of the three channels. 1 when a == b.
// Needs height, width >= 11.
double ssim_rgb(const uint8_t* a, const uint8_t* b, int64_t height, int64_t width);

}  // namespace ms
