// Weight-only int4 linear on the CPU, group-wise with a scale and a minimum, as GGUF's Q4_1:
//   w[n, k] = q[n, k] * d[n, g] + m[n, g],  g = k / group_size,  q in 0..15
//   out[i, n] = sum_g d * sum_{k in g} q * x  +  m * sum_{k in g} x
//
// aten's _weight_int4pack_mm_for_cpu turns every code into a float before its FMA; at one row
// that conversion, not memory, bounds it: 73 us a call on a 2-core AVX2 EPYC, 8.7 ms of a
// 15 ms batch-1 SmolLM2 step. Here x is rounded to int16 with a scale per group (int16_rows.h),
// codes are widened to int16 (16 bytes hold a sub-block of 32 codes, as GGUF's Q4_1 lays them
// out: low nibbles are codes 0-15, high nibbles 16-31), and vpmaddwd sums 16 pairs exactly in
// int32. Only once per group does a sum meet its float scales. The weights lie in tiles of 4
// output rows (quantized_linear.pack_int4_tiles), read as one stream in order; each pass over
// them serves up to kRows rows of x. On AVX-512 each register holds two output rows, and with
// VNNI one vpdpwssd sums the pairs; its floats round in the AVX2 version's order (same bits).
// There, 112 calls of one SmolLM2 layer's shapes: 1 row 2.55 ms (its AVX2 code 3.04, aten 3.68);
// 16 rows 17.2 ms (AVX2 code 19.9, aten 13.4: from 4 rows aten's kernel is as fast or faster).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include "int16_rows.h"
#include "prefetch.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#if defined(CPU_CAPABILITY_AVX512) || defined(CPU_CAPABILITY_AVX2)
#include <immintrin.h>
#endif

namespace {

constexpr int64_t kSub = 32;          // codes per sub-block: 16 bytes
constexpr int64_t kTileRows = 4;      // output rows per tile
constexpr int64_t kRows = 4;          // rows of x per pass over the weights
constexpr int64_t kAheadBytes = 512;  // how far ahead in the tile stream loads are asked for
constexpr int64_t kMinChunk = 32768;  // weights per thread chunk at least: a fork costs a few us

struct Problem {
  const int16_t* xq;      // [rows, K], this pass's rows
  const float* x_scales;  // [rows, G]: x ~ xq * x_scales in each group
  const float* x_sums;    // [rows, G]: sum of x over each group
  const uint8_t* tiles;  // [N / 4, G, group_bytes]
  int64_t K, G, N;
};

template <int P>  // P: sub-blocks per group
constexpr int64_t group_bytes() { return P * kTileRows * 16 + kTileRows * 4; }


#if defined(CPU_CAPABILITY_AVX512) || defined(CPU_CAPABILITY_AVX2)
inline float lane_sum(__m256 v) {
  const __m128 half = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 pairs = _mm_add_ps(half, _mm_movehl_ps(half, half));
  return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_shuffle_ps(pairs, pairs, 1)));
}
#endif

#if defined(CPU_CAPABILITY_AVX512)
// exact int32 sums of int16 pairs, added to acc: one vpdpwssd where the CPU has VNNI
inline __m512i pairs_add(__m512i acc, __m512i a, __m512i b) {
#ifdef __AVX512VNNI__
  return _mm512_dpwssd_epi32(acc, a, b);
#else
  return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
#endif
}

// As the AVX2 version below, with two output rows in each register: 32 bytes of a group hold
// sub-block j of rows 2h and 2h + 1, so lanes 0-7 of a sum serve row 2h and lanes 8-15 row 2h + 1.
template <int M, int P>
void tile_dot(const Problem& p, int64_t tile, float* out) {
  const __m512i low_nibbles = _mm512_set1_epi16(15);
  const __m512i row_scale[2] = {_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2),
                                _mm512_setr_epi32(4, 4, 4, 4, 4, 4, 4, 4, 6, 6, 6, 6, 6, 6, 6, 6)};
  const __m256i mins_first = _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7);
  const uint8_t* groups = p.tiles + tile * p.G * group_bytes<P>();
  __m512 acc[M][2];
  __m128 zero_acc[M];  // sum over groups of min * sum of x, one lane per output row
  for (int m = 0; m < M; ++m) {
    zero_acc[m] = _mm_setzero_ps();
    acc[m][0] = acc[m][1] = _mm512_setzero_ps();
  }
  for (int64_t g = 0; g < p.G; ++g) {
    const uint8_t* group = groups + g * group_bytes<P>();
    prefetch_line(group + kAheadBytes);
    const __m256 pairs = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(group + P * kTileRows * 16)));
    const __m128 mins = _mm256_castps256_ps128(_mm256_permutevar8x32_ps(pairs, mins_first));
    __m512i sums[M][2];
    for (int j = 0; j < P; ++j) {
      __m512i low[2], high[2];
      for (int h = 0; h < 2; ++h) {
        const __m512i bytes = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(group + j * 64 + h * 32)));
        low[h] = _mm512_and_si512(bytes, low_nibbles);
        high[h] = _mm512_srli_epi16(bytes, 4);
      }
      for (int m = 0; m < M; ++m) {
        const int16_t* x = p.xq + m * p.K + (g * P + j) * kSub;
        const __m512i x_low = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
        const __m512i x_high = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 16)));
        for (int h = 0; h < 2; ++h) {
          const __m512i first = j == 0 ? _mm512_setzero_si512() : sums[m][h];
          sums[m][h] = pairs_add(pairs_add(first, low[h], x_low), high[h], x_high);
        }
      }
    }
    const __m512 scales[2] = {_mm512_permutexvar_ps(row_scale[0], _mm512_castps256_ps512(pairs)),
                              _mm512_permutexvar_ps(row_scale[1], _mm512_castps256_ps512(pairs))};
    for (int m = 0; m < M; ++m) {
      zero_acc[m] = _mm_fmadd_ps(mins, _mm_set1_ps(p.x_sums[m * p.G + g]), zero_acc[m]);
      const __m512 x_scale = _mm512_set1_ps(p.x_scales[m * p.G + g]);
      for (int h = 0; h < 2; ++h)
        // the AVX2 version's order of rounding, so both give the same bits
        acc[m][h] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(sums[m][h]), x_scale), scales[h], acc[m][h]);
    }
  }
  for (int m = 0; m < M; ++m) {
    float zero_terms[kTileRows];
    _mm_storeu_ps(zero_terms, zero_acc[m]);
    for (int h = 0; h < 2; ++h) {
      const __m512 v = acc[m][h];
      out[m * p.N + tile * kTileRows + 2 * h] = lane_sum(_mm512_castps512_ps256(v)) + zero_terms[2 * h];
      out[m * p.N + tile * kTileRows + 2 * h + 1] = lane_sum(_mm512_extractf32x8_ps(v, 1)) + zero_terms[2 * h + 1];
    }
  }
}
#elif defined(CPU_CAPABILITY_AVX2)

// out[m, n0 + b] for the tile's 4 output rows; P sub-blocks per group
template <int M, int P>
void tile_dot(const Problem& p, int64_t tile, float* out) {
  const __m256i low_nibbles = _mm256_set1_epi16(15);
  const __m256i mins_first = _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7);
  const uint8_t* groups = p.tiles + tile * p.G * group_bytes<P>();
  __m256 acc[M][kTileRows];
  __m128 zero_acc[M];  // sum over groups of min * sum of x, one lane per output row
  for (int m = 0; m < M; ++m) {
    zero_acc[m] = _mm_setzero_ps();
    for (int b = 0; b < kTileRows; ++b) acc[m][b] = _mm256_setzero_ps();
  }
  for (int64_t g = 0; g < p.G; ++g) {
    const uint8_t* group = groups + g * group_bytes<P>();
    prefetch_line(group + kAheadBytes);
    // the 4 rows' fp16 (scale, min) pairs: scale 0, min 0, scale 1, ...
    const __m256 pairs = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(group + P * kTileRows * 16)));
    const __m128 mins = _mm256_castps256_ps128(_mm256_permutevar8x32_ps(pairs, mins_first));
    for (int m = 0; m < M; ++m) zero_acc[m] = _mm_fmadd_ps(mins, _mm_set1_ps(p.x_sums[m * p.G + g]), zero_acc[m]);
    __m256 x_scale[M];
    for (int m = 0; m < M; ++m) x_scale[m] = _mm256_set1_ps(p.x_scales[m * p.G + g]);
    for (int b = 0; b < kTileRows; ++b) {
      __m256i sums[M];  // exact int32 sums over the group, 8 lanes a row
      for (int j = 0; j < P; ++j) {
        const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(group + (j * kTileRows + b) * 16));
        const __m256i bytes = _mm256_cvtepu8_epi16(packed);
        const __m256i low = _mm256_and_si256(bytes, low_nibbles);  // codes 0-15 of the sub-block
        const __m256i high = _mm256_srli_epi16(bytes, 4);          // codes 16-31
        for (int m = 0; m < M; ++m) {
          const int16_t* x = p.xq + m * p.K + (g * P + j) * kSub;
          const __m256i dot = _mm256_add_epi32(
              _mm256_madd_epi16(low, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x))),
              _mm256_madd_epi16(high, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 16))));
          sums[m] = j == 0 ? dot : _mm256_add_epi32(sums[m], dot);
        }
      }
      const __m256 scale = _mm256_permutevar8x32_ps(pairs, _mm256_set1_epi32(2 * b));
      for (int m = 0; m < M; ++m)
        acc[m][b] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(sums[m]), x_scale[m]), scale, acc[m][b]);
    }
  }
  for (int m = 0; m < M; ++m) {
    float zero_terms[kTileRows];
    _mm_storeu_ps(zero_terms, zero_acc[m]);
    for (int b = 0; b < kTileRows; ++b)
      out[m * p.N + tile * kTileRows + b] = lane_sum(acc[m][b]) + zero_terms[b];
  }
}
#else
template <int M, int P>
void tile_dot(const Problem& p, int64_t tile, float* out) {
  const uint8_t* groups = p.tiles + tile * p.G * group_bytes<P>();
  for (int m = 0; m < M; ++m)
    for (int b = 0; b < kTileRows; ++b) {
      float sum = 0.f;
      for (int64_t g = 0; g < p.G; ++g) {
        const uint8_t* group = groups + g * group_bytes<P>();
        const int16_t* x = p.xq + m * p.K + g * P * kSub;
        int32_t dot = 0;
        for (int j = 0; j < P; ++j)
          for (int t = 0; t < 16; ++t) {
            const uint8_t byte = group[(j * kTileRows + b) * 16 + t];
            dot += int32_t{byte & 15} * x[j * kSub + t] + int32_t{byte >> 4} * x[j * kSub + 16 + t];
          }
        uint16_t pair[2];  // the row's fp16 (scale, min)
        std::memcpy(pair, group + P * kTileRows * 16 + b * 4, 4);
        const float scale = c10::Half(pair[0], c10::Half::from_bits()), min = c10::Half(pair[1], c10::Half::from_bits());
        sum += static_cast<float>(dot) * p.x_scales[m * p.G + g] * scale + min * p.x_sums[m * p.G + g];
      }
      out[m * p.N + tile * kTileRows + b] = sum;
    }
}
#endif

template <int M, int P>
void rows_pass(const Problem& p, float* out) {
  const int64_t grain = std::max<int64_t>(1, kMinChunk / (kTileRows * p.K));
  at::parallel_for(0, p.N / kTileRows, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t tile = lo; tile < hi; ++tile) tile_dot<M, P>(p, tile, out);
  });
}

template <int P>
void rows_pass(const Problem& p, int64_t rows, float* out) {
  switch (rows) {
    case 1: rows_pass<1, P>(p, out); break;
    case 2: rows_pass<2, P>(p, out); break;
    case 3: rows_pass<3, P>(p, out); break;
    default: rows_pass<4, P>(p, out); break;
  }
}

at::Tensor int4_linear(const at::Tensor& input, const at::Tensor& tiles, int64_t group_size) {
  TORCH_CHECK(group_size == 32 || group_size == 64, "int4_linear takes groups of 32 or 64, not ", group_size);
  TORCH_CHECK(input.dim() == 2 && tiles.dim() == 3 && tiles.scalar_type() == at::kByte &&
                  tiles.size(2) == (group_size / kSub) * kTileRows * 16 + kTileRows * 4,
              "int4_linear takes x [M, K] and uint8 tiles [N / 4, K / group_size, ", 2 * group_size + 16, "]");
  const int64_t M = input.size(0), K = input.size(1), G = tiles.size(1), N = tiles.size(0) * kTileRows;
  TORCH_CHECK(K == G * group_size, "int4_linear: x has ", K, " features, the tiles ", G * group_size);
  TORCH_CHECK(K <= 16384, "int4_linear sums at most 16384 input features, not ", K);
  const at::Tensor x = input.to(at::kFloat).contiguous(), w = tiles.contiguous();
  const float* xp = x.data_ptr<float>();
  const Int16Rows xq = int16_rows(xp, M, K, group_size);
  std::vector<float> x_sums(M * G);
  for (int64_t k = 0; k < M * K; ++k) x_sums[k / group_size] += xp[k];
  at::Tensor out = at::empty({M, N}, x.options());
  for (int64_t m0 = 0; m0 < M; m0 += kRows) {
    const Problem p{xq.values.data() + m0 * K, xq.scales.data() + m0 * G, x_sums.data() + m0 * G,
                    w.data_ptr<uint8_t>(), K, G, N};
    const int64_t rows = std::min(kRows, M - m0);
    if (group_size == 32) {
      rows_pass<1>(p, rows, out.data_ptr<float>() + m0 * N);
    } else {
      rows_pass<2>(p, rows, out.data_ptr<float>() + m0 * N);
    }
  }
  return out;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(tiergate, m) {
  m.def("int4_linear(Tensor x, Tensor tiles, int group_size) -> Tensor");
}

TORCH_LIBRARY_IMPL(tiergate, CPU, m) { m.impl("int4_linear", &int4_linear); }
