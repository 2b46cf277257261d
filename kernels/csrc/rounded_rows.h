// Rows of x rounded to integers for the integer linear kernels, each block of `block` values of a
// row with its own scale (a step of max|x_block| / levels). int16 with 16383 levels: with codes of
// at most 128 in magnitude, int32 sums of up to 16384 products cannot overflow; one scale per row
// (block = K) is finer than bf16 unless the row has outliers hundreds of times its typical value,
// as the inputs of an LLM's down projection do; one per group of 32 is finer than bf16 always.
// int8 with 127 levels is what byte-wide products (AVX2's vpmaddubsw) take, as llama.cpp's Q8_1.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

template <typename T>
struct RoundedRows {
  std::vector<T> values;      // [M, K]
  std::vector<float> scales;  // [M, K / block]: x[m, k] ~ values[m, k] * scales[m, k / block]
  std::vector<float> sums;    // [M, K / block]: the sum of each block's x, in order (if asked for)
};

template <typename T>
RoundedRows<T> round_rows(const float* x, int64_t M, int64_t K, int64_t block, float levels, bool with_sums) {
  const int64_t blocks = M * (K / block);
  RoundedRows<T> rows{std::vector<T>(M * K), std::vector<float>(blocks), std::vector<float>(with_sums ? blocks : 0)};
  for (int64_t i = 0; i < blocks; ++i) {
    const float* values = x + i * block;
    float top = 0.f;
    for (int64_t k = 0; k < block; ++k) top = std::max(top, std::abs(values[k]));
    rows.scales[i] = top > 0.f ? top / levels : 1.f;
    const float inverse = 1.f / rows.scales[i];
    for (int64_t k = 0; k < block; ++k) rows.values[i * block + k] = static_cast<T>(std::nearbyint(values[k] * inverse));
    if (with_sums) {
      float sum = 0.f;
      for (int64_t k = 0; k < block; ++k) sum += values[k];
      rows.sums[i] = sum;
    }
  }
  return rows;
}
