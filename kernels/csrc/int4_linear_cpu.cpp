// Weight-only int4 linear on the CPU, group-wise with a scale and a minimum, as GGUF's Q4_1:
//   w[n, k] = q[n, k] * d[n, g] + m[n, g],  g = k / group_size,  q in 0..15
//   out[i, n] = sum_g d * sum_{k in g} q * x  +  m * sum_{k in g} x
//
// aten's _weight_int4pack_mm_for_cpu turns every code into a float before its FMA; that
// conversion, not memory, bounds it at one row. Here x is rounded once per call with a scale per
// group (rounded_rows.h), every pass over the weights shares it, and integer products sum exactly
// in int32; only once per group does a sum meet its float scales.
// - AVX-512: x to int16, codes widened to int16, vpmaddwd (vpdpwssd with VNNI) sums pairs.
// - AVX2: x to int8 (as llama.cpp's Q8_1), codes left as bytes, vpmaddubsw multiplies 32 byte pairs
//   in one instruction (codes 0..15 the unsigned side), a group's int16 pair sums add up without
//   overflow (at most 16 products of 15 * 127), and one vpmaddwd by ones widens them to int32:
//   half the instructions of int16 products, which AVX2 has no fused sum for. It walks two tiles
//   at once, regrouped in registers so that a 32-bit lane holds one output row (see tile_dot).
// - elsewhere: the same sums in plain C++ on int16 x.
//
// The weights lie in tiles of 4 output rows (quantized_linear.pack_int4_tiles), read as one
// stream in order; each pass over them serves up to kRows rows of x. A sub-block of 32 codes is
// 16 bytes per row in GGUF's Q4_1 order (code t in the low nibble of byte t, code 16 + t in its
// high nibble), split into two halves of 8 bytes, and the 4 rows' halves lie side by side. So one
// load holds 8 bytes of each of the 4 rows, each row in its own lane (128 bits widened to int16
// for AVX-512, 64 bits as bytes for AVX2), against 8 values of x broadcast to every lane; a row's
// sums end up in its lane, and each float step (convert, scale, add) serves the 4 rows at once.
// The threads fork once a call, each over its share of the tiles; the AVX2 build passes every row
// of x over a slice of that share small enough to stay in L1 before it moves to the next.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include "rounded_rows.h"
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
using XCode = int16_t;
constexpr float kXLevels = 16383.f;
constexpr int64_t kRows = 8;  // rows of x per pass over the weights: their sums fit the 32 registers
constexpr int64_t kTilesAStep = 1;
constexpr int64_t kSliceBytes = int64_t{1} << 40;  // no slices: one pass of 8 rows streams the weights as before
#elif defined(CPU_CAPABILITY_AVX2)
using XCode = int8_t;
constexpr float kXLevels = 127.f;
constexpr int64_t kRows = 4;  // the 16 registers hold 4 rows' sums and accumulators beside the codes
constexpr int64_t kTilesAStep = 2;
constexpr int64_t kSliceBytes = 32768;  // weights that all rows of x pass over while they stay in L1
#else
using XCode = int16_t;
constexpr float kXLevels = 16383.f;
constexpr int64_t kRows = 4;
constexpr int64_t kTilesAStep = 1;
constexpr int64_t kSliceBytes = 32768;
#endif
constexpr int64_t kAheadBytes = 512;  // how far ahead in the tile stream loads are asked for
constexpr int64_t kMinChunk = 32768;  // weights per thread chunk at least: a fork costs a few us

struct Problem {
  const XCode* xq;        // [rows, K], this pass's rows
  const float* x_scales;  // [rows, G]: x ~ xq * x_scales in each group
  const float* x_sums;    // [rows, G]: sum of x over each group
  const uint8_t* tiles;  // [N / 4, G, group_bytes]
  int64_t K, G, N;
};

template <int P>  // P: sub-blocks per group
constexpr int64_t group_bytes() { return P * kTileRows * 16 + kTileRows * 4; }

#if defined(CPU_CAPABILITY_AVX512)
// a row's out value from the 4 float lanes of its 128-bit lane, in one fixed order
inline float row_sum(const float* lanes) { return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]); }

// 8 bytes of each of the 4 rows, widened to int16
inline __m512i load_codes(const uint8_t* p) { return _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
inline __m512i broadcast_x(const int16_t* x) { return _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x))); }
inline __m512i pairs_add(__m512i acc, __m512i a, __m512i b) {  // exact int32 sums of int16 pairs
#ifdef __AVX512VNNI__
  return _mm512_dpwssd_epi32(acc, a, b);
#else
  return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
#endif
}

template <int M, int P>
void tile_dot(const Problem& p, int64_t tile, float* out) {
  const __m256i mins_first = _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7);
  // each row's scale in the 4 lanes of its 128-bit lane
  const __m512i scales_spread = _mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6);
  const uint8_t* groups = p.tiles + tile * p.G * group_bytes<P>();
  __m512 acc[M];
  __m128 zero_acc[M];  // sum over groups of min * sum of x, one lane per output row
  for (int m = 0; m < M; ++m) {
    zero_acc[m] = _mm_setzero_ps();
    acc[m] = _mm512_setzero_ps();
  }
  for (int64_t g = 0; g < p.G; ++g) {
    const uint8_t* group = groups + g * group_bytes<P>();
    prefetch_line(group + kAheadBytes);
    // the 4 rows' fp16 (scale, min) pairs: scale 0, min 0, scale 1, ...
    const __m256 pairs = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(group + P * kTileRows * 16)));
    const __m128 mins = _mm256_castps256_ps128(_mm256_permutevar8x32_ps(pairs, mins_first));
    const __m512 scales = _mm512_permutexvar_ps(scales_spread, _mm512_castps256_ps512(pairs));
    __m512i sums[M];
    for (int m = 0; m < M; ++m) sums[m] = _mm512_setzero_si512();
    for (int h = 0; h < 2 * P; ++h) {  // half h of sub-block h / 2: codes 8 * (h % 2) + 0..7 and 16 more
      const __m512i codes = load_codes(group + h * 32);
      const __m512i low = _mm512_and_si512(codes, _mm512_set1_epi16(15)), high = _mm512_srli_epi16(codes, 4);
      for (int m = 0; m < M; ++m) {
        const int16_t* x = p.xq + m * p.K + g * P * kSub + (h / 2) * kSub + (h % 2) * 8;
        sums[m] = pairs_add(pairs_add(sums[m], low, broadcast_x(x)), high, broadcast_x(x + 16));
      }
    }
    for (int m = 0; m < M; ++m) {
      zero_acc[m] = _mm_fmadd_ps(mins, _mm_set1_ps(p.x_sums[m * p.G + g]), zero_acc[m]);
      const __m512 x_scale = _mm512_set1_ps(p.x_scales[m * p.G + g]);
      acc[m] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(sums[m]), x_scale), scales, acc[m]);
    }
  }
  for (int m = 0; m < M; ++m) {
    float lanes[16], zero_terms[kTileRows];
    _mm512_storeu_ps(lanes, acc[m]);  // row b: lanes 4b..4b+3
    _mm_storeu_ps(zero_terms, zero_acc[m]);
    for (int b = 0; b < kTileRows; ++b) out[m * p.N + tile * kTileRows + b] = row_sum(lanes + 4 * b) + zero_terms[b];
  }
}
#elif defined(CPU_CAPABILITY_AVX2)
inline __m256i broadcast_x(const int8_t* x) {  // 4 bytes of x in each 32-bit lane
  int32_t bytes;
  std::memcpy(&bytes, x, 4);
  return _mm256_set1_epi32(bytes);
}

// Two tiles side by side: 8 output rows, one a 32-bit lane in the order A0 A1 B0 B1 | A2 A3 B2 B3,
// so one broadcast of 4 bytes of x meets 4 bytes of every row and each float step serves 8 rows.
template <int M, int P>
void tile_dot(const Problem& p, int64_t tile, float* out) {
  const __m256i nibble = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
  const int64_t second = std::min(tile + 1, p.N / kTileRows - 1);  // an odd last tile pairs with itself
  const uint8_t* groups_a = p.tiles + tile * p.G * group_bytes<P>();
  const uint8_t* groups_b = p.tiles + second * p.G * group_bytes<P>();
  __m256 acc[M];
  for (int m = 0; m < M; ++m) acc[m] = _mm256_setzero_ps();
  for (int64_t g = 0; g < p.G; ++g) {
    const uint8_t* a = groups_a + g * group_bytes<P>();
    const uint8_t* b = groups_b + g * group_bytes<P>();
    prefetch_line(a + kAheadBytes);
    prefetch_line(b + kAheadBytes);
    const __m256 pairs_a = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + P * kTileRows * 16)));
    const __m256 pairs_b = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + P * kTileRows * 16)));
    const __m256 scales = _mm256_shuffle_ps(pairs_a, pairs_b, 0x88), mins = _mm256_shuffle_ps(pairs_a, pairs_b, 0xDD);
    __m256i dots[M];  // int32, one lane a row
    for (int s = 0; s < P; ++s) {
      __m256i sums[M];  // int16, 2 lanes a row, each the sum of 16 products of a sub-block: no overflow
      for (int m = 0; m < M; ++m) sums[m] = _mm256_setzero_si256();
      for (int h = 0; h < 2; ++h) {
        const __m256 half_a = _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + s * 64 + h * 32)));
        const __m256 half_b = _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + s * 64 + h * 32)));
        for (int d = 0; d < 2; ++d) {  // bytes 8h + 4d + 0..3 of each of the 8 rows
          const __m256i bytes = _mm256_castps_si256(d == 0 ? _mm256_shuffle_ps(half_a, half_b, 0x88)
                                                           : _mm256_shuffle_ps(half_a, half_b, 0xDD));
          const __m256i low = _mm256_and_si256(bytes, nibble);
          const __m256i high = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), nibble);
          for (int m = 0; m < M; ++m) {
            const int8_t* x = p.xq + m * p.K + (g * P + s) * kSub + h * 8 + d * 4;
            sums[m] = _mm256_add_epi16(sums[m], _mm256_add_epi16(_mm256_maddubs_epi16(low, broadcast_x(x)),
                                                                 _mm256_maddubs_epi16(high, broadcast_x(x + 16))));
            asm("" : "+x"(sums[m]));  // else GCC hoists all the products first and spills them
          }
        }
      }
      for (int m = 0; m < M; ++m) {
        const __m256i widened = _mm256_madd_epi16(sums[m], ones);
        dots[m] = s == 0 ? widened : _mm256_add_epi32(dots[m], widened);
      }
    }
    for (int m = 0; m < M; ++m) {
      const __m256 dot = _mm256_cvtepi32_ps(dots[m]);  // exact: below 2^24
      acc[m] = _mm256_fmadd_ps(_mm256_mul_ps(dot, _mm256_set1_ps(p.x_scales[m * p.G + g])), scales, acc[m]);
      acc[m] = _mm256_fmadd_ps(mins, _mm256_set1_ps(p.x_sums[m * p.G + g]), acc[m]);
      asm("" : "+x"(acc[m]));  // keeps the accumulator in a register across groups
    }
  }
  const __m256i row_order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
  for (int m = 0; m < M; ++m) {
    float rows[2 * kTileRows];
    _mm256_storeu_ps(rows, _mm256_permutevar8x32_ps(acc[m], row_order));
    std::memcpy(out + m * p.N + tile * kTileRows, rows, sizeof(float) * kTileRows * (second > tile ? 2 : 1));
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
        const XCode* x = p.xq + m * p.K + g * P * kSub;
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
void steps_pass(const Problem& p, int64_t lo, int64_t hi, float* out) {
  for (int64_t step = lo; step < hi; ++step) tile_dot<M, P>(p, step * kTilesAStep, out);
}

template <int P>
void steps_pass(const Problem& p, int64_t rows, int64_t lo, int64_t hi, float* out) {
  switch (rows) {
    case 1: steps_pass<1, P>(p, lo, hi, out); break;
    case 2: steps_pass<2, P>(p, lo, hi, out); break;
    case 3: steps_pass<3, P>(p, lo, hi, out); break;
    case 4: steps_pass<4, P>(p, lo, hi, out); break;
#if defined(CPU_CAPABILITY_AVX512)
    case 5: steps_pass<5, P>(p, lo, hi, out); break;
    case 6: steps_pass<6, P>(p, lo, hi, out); break;
    case 7: steps_pass<7, P>(p, lo, hi, out); break;
    default: steps_pass<8, P>(p, lo, hi, out); break;
#else
    default: steps_pass<4, P>(p, lo, hi, out); break;
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
  const RoundedRows<XCode> xq = round_rows<XCode>(x.data_ptr<float>(), M, K, group_size, kXLevels, true);
  at::Tensor out = at::empty({M, N}, x.options());
  float* const result = out.data_ptr<float>();
  const int64_t steps = (N / kTileRows + kTilesAStep - 1) / kTilesAStep;
  const int64_t step_bytes = kTilesAStep * G * tiles.size(2);
  const int64_t slice = std::max<int64_t>(1, kSliceBytes / step_bytes);  // steps
  const int64_t grain = std::max<int64_t>(1, kMinChunk / (kTilesAStep * kTileRows * K));
  at::parallel_for(0, steps, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t first = lo; first < hi; first += slice) {
      const int64_t last = std::min(hi, first + slice);
      for (int64_t m0 = 0; m0 < M; m0 += kRows) {
        const Problem p{xq.values.data() + m0 * K, xq.scales.data() + m0 * G, xq.sums.data() + m0 * G,
                        w.data_ptr<uint8_t>(), K, G, N};
        const int64_t rows = std::min(kRows, M - m0);
        if (group_size == 32) {
          steps_pass<1>(p, rows, first, last, result + m0 * N);
        } else {
          steps_pass<2>(p, rows, first, last, result + m0 * N);
        }
      }
    }
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(TIERGATE_OPS, m) {
  m.def("int4_linear(Tensor x, Tensor tiles, int group_size) -> Tensor");
}

TORCH_LIBRARY_IMPL(TIERGATE_OPS, CPU, m) { m.impl("int4_linear", &int4_linear); }
