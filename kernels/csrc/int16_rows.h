// Rows of x rounded to int16 for the integer linear kernels, each block of `block` values of a
// row with its own scale (a step of max|x_block| / 16383). With codes of at most 128 in
// magnitude, int32 sums of up to 16384 products cannot overflow. One scale per row (block = K)
// is finer than bf16 unless the row has outliers hundreds of times its typical value, as the
// inputs of an LLM's down projection do; one per group of 32 is finer than bf16 always.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

constexpr float kInt16RowMax = 16383.f;

struct Int16Rows {
  std::vector<int16_t> values;  // [M, K]
  std::vector<float> scales;    // [M, K / block]: x[m, k] ~ values[m, k] * scales[m, k / block]
};

inline Int16Rows int16_rows(const float* x, int64_t M, int64_t K, int64_t block) {
  Int16Rows rows{std::vector<int16_t>(M * K), std::vector<float>(M * (K / block))};
  for (int64_t i = 0; i < M * (K / block); ++i) {
    const float* values = x + i * block;
    float top = 0.f;
    for (int64_t k = 0; k < block; ++k) top = std::max(top, std::abs(values[k]));
    rows.scales[i] = top > 0.f ? top / kInt16RowMax : 1.f;
    const float inverse = 1.f / rows.scales[i];
    for (int64_t k = 0; k < block; ++k) rows.values[i * block + k] = static_cast<int16_t>(std::nearbyint(values[k] * inverse));
  }
  return rows;
}
