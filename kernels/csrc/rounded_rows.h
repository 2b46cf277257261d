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
#include <type_traits>
#include <vector>

#if defined(CPU_CAPABILITY_AVX2)
#include <immintrin.h>
#endif

template <typename T>
struct RoundedRows {
  std::vector<T> values;      // [M, K]
  std::vector<float> scales;  // [M, K / block]: x[m, k] ~ values[m, k] * scales[m, k / block]
  std::vector<float> sums;    // [M, K / block]: the sum of each block's x, in order (if asked for)
};

#if defined(CPU_CAPABILITY_AVX2)
inline float lanes_max(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

inline float lanes_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

// One block of a multiple of 32 values to int8, 8 lanes at a time: the scale and the rounding
// (to nearest even, as nearbyint) are the scalar loop's; only the sum's order differs.
inline void round_block_int8(const float* values, int64_t block, float levels, int8_t* out, float* scale, float* sum) {
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 top = _mm256_setzero_ps(), total = _mm256_setzero_ps();
  for (int64_t k = 0; k < block; k += 8) {
    const __m256 v = _mm256_loadu_ps(values + k);
    top = _mm256_max_ps(top, _mm256_and_ps(v, magnitude));
    total = _mm256_add_ps(total, v);
  }
  const float most = lanes_max(top);
  *scale = most > 0.f ? most / levels : 1.f;
  *sum = lanes_sum(total);
  const __m256 inverse = _mm256_set1_ps(1.f / *scale);
  const __m256i in_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);  // undoes the packs' lane interleave
  for (int64_t k = 0; k < block; k += 32) {
    __m256i q[4];
    for (int j = 0; j < 4; ++j) q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(values + k + 8 * j), inverse));
    const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k), _mm256_permutevar8x32_epi32(bytes, in_order));
  }
}
#endif

template <typename T>
RoundedRows<T> round_rows(const float* x, int64_t M, int64_t K, int64_t block, float levels, bool with_sums) {
  const int64_t blocks = M * (K / block);
  RoundedRows<T> rows{std::vector<T>(M * K), std::vector<float>(blocks), std::vector<float>(with_sums ? blocks : 0)};
#if defined(CPU_CAPABILITY_AVX2)
  if constexpr (std::is_same_v<T, int8_t>) {
    if (with_sums && block % 32 == 0) {
      for (int64_t i = 0; i < blocks; ++i)
        round_block_int8(x + i * block, block, levels, rows.values.data() + i * block, &rows.scales[i], &rows.sums[i]);
      return rows;
    }
  }
#endif
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
