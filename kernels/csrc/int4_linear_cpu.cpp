// Weight-only int4 linear on the CPU, group-wise with a scale and a minimum, as GGUF's Q4_1:
//   w[n, k] = q[n, k] * d[n, g] + m[n, g],  g = k / group_size,  q in 0..15
//   out[i, n] = sum_g d * sum_{k in g} q * x  +  m * sum_{k in g} x
//
// aten's _weight_int4pack_mm_for_cpu turns every code into a float before its FMA; at one row
// that conversion, not memory, bounds it (docs/engine-cpu.md). Here x is rounded to int16 with
// a scale per group (int16_rows.h), codes are widened to int16 and vpmaddwd (vpdpwssd with
// AVX-512 VNNI) sums pairs exactly in int32. Only once per group does a sum meet its float scales.
//
// The weights lie in tiles of 4 output rows (quantized_linear.pack_int4_tiles), read as one
// stream in order; each pass over them serves up to kRows rows of x. A sub-block of 32 codes is
// 16 bytes per row in GGUF's Q4_1 order (code t in the low nibble of byte t, code 16 + t in its
// high nibble), split into two halves of 8 bytes, and the 4 rows' halves lie side by side. So
// one widened load holds 8 codes of each of 4 rows (AVX-512) or 2 rows (AVX2), each 128-bit
// lane one row, against 8 values of x broadcast to every lane; a row's sums end up in the 4
// int32 of its lane, and each float step (convert, scale, add) serves 4 rows (or 2) at once.
// Both versions round the same floats in the same order, so they give the same bits. This
// layout beat one row's 16 bytes per sub-block at every row count (docs/engine-cpu.md).
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
#if defined(CPU_CAPABILITY_AVX512)
constexpr int64_t kRows = 8;  // rows of x per pass over the weights: their sums fit the 32 registers
#else
constexpr int64_t kRows = 4;
#endif
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

// a row's out value from the 4 float lanes of its 128-bit lane, in one fixed order
inline float row_sum(const float* lanes) { return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]); }

#if defined(CPU_CAPABILITY_AVX512) || defined(CPU_CAPABILITY_AVX2)
#if defined(CPU_CAPABILITY_AVX512)
constexpr int kRegs = 1;  // registers per tile: each holds all 4 rows
using IntVec = __m512i;
using FloatVec = __m512;
// 8 bytes of each of the 4 rows, widened to int16
inline IntVec load_codes(const uint8_t* p) { return _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
inline IntVec broadcast_x(const int16_t* x) { return _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x))); }
inline IntVec low_nibbles(IntVec v) { return _mm512_and_si512(v, _mm512_set1_epi16(15)); }
inline IntVec high_nibbles(IntVec v) { return _mm512_srli_epi16(v, 4); }
inline IntVec int_zero() { return _mm512_setzero_si512(); }
inline IntVec pairs_add(IntVec acc, IntVec a, IntVec b) {  // exact int32 sums of int16 pairs
#ifdef __AVX512VNNI__
  return _mm512_dpwssd_epi32(acc, a, b);
#else
  return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
#endif
}
inline FloatVec float_zero() { return _mm512_setzero_ps(); }
inline FloatVec broadcast(float v) { return _mm512_set1_ps(v); }
inline FloatVec scale_add(IntVec sums, FloatVec x_scale, FloatVec scales, FloatVec acc) {
  return _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(sums), x_scale), scales, acc);
}
// pairs holds (scale, min) of the 4 rows: each row's scale in the 4 lanes of its 128-bit lane
inline FloatVec row_scales(__m256 pairs, int) {
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6), _mm512_castps256_ps512(pairs));
}
inline void store(float* p, FloatVec v) { _mm512_storeu_ps(p, v); }
#else
constexpr int kRegs = 2;  // rows 0-1, rows 2-3
using IntVec = __m256i;
using FloatVec = __m256;
inline IntVec load_codes(const uint8_t* p) { return _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline IntVec broadcast_x(const int16_t* x) { return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x))); }
inline IntVec low_nibbles(IntVec v) { return _mm256_and_si256(v, _mm256_set1_epi16(15)); }
inline IntVec high_nibbles(IntVec v) { return _mm256_srli_epi16(v, 4); }
inline IntVec int_zero() { return _mm256_setzero_si256(); }
inline IntVec pairs_add(IntVec acc, IntVec a, IntVec b) { return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)); }
inline FloatVec float_zero() { return _mm256_setzero_ps(); }
inline FloatVec broadcast(float v) { return _mm256_set1_ps(v); }
inline FloatVec scale_add(IntVec sums, FloatVec x_scale, FloatVec scales, FloatVec acc) {
  return _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(sums), x_scale), scales, acc);
}
inline FloatVec row_scales(__m256 pairs, int r) {  // rows 2r and 2r + 1
  return _mm256_permutevar8x32_ps(pairs, _mm256_setr_epi32(4 * r, 4 * r, 4 * r, 4 * r, 4 * r + 2, 4 * r + 2, 4 * r + 2, 4 * r + 2));
}
inline void store(float* p, FloatVec v) { _mm256_storeu_ps(p, v); }
#endif
constexpr int64_t kRegBytes = 32 / kRegs;  // code bytes per register: 8 of each row it holds

template <int M, int P>
void tile_dot(const Problem& p, int64_t tile, float* out) {
  const __m256i mins_first = _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7);
  const uint8_t* groups = p.tiles + tile * p.G * group_bytes<P>();
  FloatVec acc[M][kRegs];
  __m128 zero_acc[M];  // sum over groups of min * sum of x, one lane per output row
  for (int m = 0; m < M; ++m) {
    zero_acc[m] = _mm_setzero_ps();
    for (int r = 0; r < kRegs; ++r) acc[m][r] = float_zero();
  }
  for (int64_t g = 0; g < p.G; ++g) {
    const uint8_t* group = groups + g * group_bytes<P>();
    prefetch_line(group + kAheadBytes);
    // the 4 rows' fp16 (scale, min) pairs: scale 0, min 0, scale 1, ...
    const __m256 pairs = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(group + P * kTileRows * 16)));
    const __m128 mins = _mm256_castps256_ps128(_mm256_permutevar8x32_ps(pairs, mins_first));
    IntVec sums[M][kRegs];
    for (int m = 0; m < M; ++m)
      for (int r = 0; r < kRegs; ++r) sums[m][r] = int_zero();
    for (int h = 0; h < 2 * P; ++h) {  // half h of sub-block h / 2: codes 8 * (h % 2) + 0..7 and 16 more
      IntVec low[kRegs], high[kRegs];
      for (int r = 0; r < kRegs; ++r) {
        const IntVec codes = load_codes(group + h * 32 + r * kRegBytes);
        low[r] = low_nibbles(codes);
        high[r] = high_nibbles(codes);
      }
      for (int m = 0; m < M; ++m) {
        const int16_t* x = p.xq + m * p.K + g * P * kSub + (h / 2) * kSub + (h % 2) * 8;
        const IntVec x_low = broadcast_x(x), x_high = broadcast_x(x + 16);
        for (int r = 0; r < kRegs; ++r) sums[m][r] = pairs_add(pairs_add(sums[m][r], low[r], x_low), high[r], x_high);
      }
    }
    for (int m = 0; m < M; ++m) {
      zero_acc[m] = _mm_fmadd_ps(mins, _mm_set1_ps(p.x_sums[m * p.G + g]), zero_acc[m]);
      const FloatVec x_scale = broadcast(p.x_scales[m * p.G + g]);
      for (int r = 0; r < kRegs; ++r) acc[m][r] = scale_add(sums[m][r], x_scale, row_scales(pairs, r), acc[m][r]);
    }
  }
  for (int m = 0; m < M; ++m) {
    float lanes[16], zero_terms[kTileRows];
    for (int r = 0; r < kRegs; ++r) store(lanes + r * 16 / kRegs, acc[m][r]);  // row b: lanes 4b..4b+3
    _mm_storeu_ps(zero_terms, zero_acc[m]);
    for (int b = 0; b < kTileRows; ++b) out[m * p.N + tile * kTileRows + b] = row_sum(lanes + 4 * b) + zero_terms[b];
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
        for (int h = 0; h < 2 * P; ++h)  // byte t of this half is byte 8 * (h % 2) + t of the row's 16
          for (int t = 0; t < 8; ++t) {
            const uint8_t byte = group[h * 32 + b * 8 + t];
            const int64_t k = (h / 2) * kSub + (h % 2) * 8 + t;
            dot += int32_t{byte & 15} * x[k] + int32_t{byte >> 4} * x[k + 16];
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
    case 4: rows_pass<4, P>(p, out); break;
#if defined(CPU_CAPABILITY_AVX512)
    case 5: rows_pass<5, P>(p, out); break;
    case 6: rows_pass<6, P>(p, out); break;
    case 7: rows_pass<7, P>(p, out); break;
    default: rows_pass<8, P>(p, out); break;
#else
    default: rows_pass<4, P>(p, out); break;
#endif
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
