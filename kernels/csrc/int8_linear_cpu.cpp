// Weight-only int8 linear for decode-sized inputs on the CPU (the int8 LM head of a decode step):
//   out[m, n] = scale[n] * sum_k x[m, k] * codes[n, k]
//
// aten's _weight_int8pack_mm turns every code into a float before its FMA, and that conversion,
// not memory, bounds it. Here each row of x is rounded to int16 with one scale per row (a step of
// max|x| / 16383, finer than the bf16 activations that aten's kernel takes) and the codes are
// widened to int16, so one vpmaddwd multiplies 16 (AVX2) or 32 (AVX-512) pairs and sums them
// exactly in int32. Each pass over the codes serves up to kRows rows of x, and a block of output
// rows side by side, as many as the registers hold the sums of.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/vec.h>
#include <torch/library.h>

#include "rounded_rows.h"
#include "prefetch.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace {

constexpr int64_t kRows = 4;           // rows of x per pass over the codes
// output rows summed side by side: M * B sums and B rows of codes in registers (AVX2 has 16)
template <int M>
constexpr int block_rows() {
#if defined(CPU_CAPABILITY_AVX512)
  return 4;
#else
  return M <= 2 ? 4 : 2;
#endif
}
constexpr int64_t kMaxK = 16384;      // int32 sums of int16 x and int8 codes cannot overflow below this
constexpr int64_t kAheadRows = 8;     // rows of codes ahead that are prefetched

#if defined(CPU_CAPABILITY_AVX512)
constexpr int64_t kStep = 32;  // codes per multiply
using IntVec = __m512i;
inline IntVec zero() { return _mm512_setzero_si512(); }
inline IntVec widen_codes(const int8_t* p) { return _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
inline IntVec load_x(const int16_t* p) { return _mm512_loadu_si512(p); }
inline IntVec multiply_add(IntVec acc, IntVec a, IntVec b) { return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b)); }
inline int64_t lane_sum(IntVec v) { return _mm512_reduce_add_epi32(v); }
#elif defined(CPU_CAPABILITY_AVX2)
constexpr int64_t kStep = 16;
using IntVec = __m256i;
inline IntVec zero() { return _mm256_setzero_si256(); }
inline IntVec widen_codes(const int8_t* p) { return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline IntVec load_x(const int16_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline IntVec multiply_add(IntVec acc, IntVec a, IntVec b) { return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)); }
inline int64_t lane_sum(IntVec v) {
  int32_t lanes[8];
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes), v);
  int64_t sum = 0;
  for (int32_t lane : lanes) sum += lane;
  return sum;
}
#else
constexpr int64_t kStep = 0;  // no vector unit named: every product goes through the scalar tail
#endif

// out rows [0, M) x columns [n0, n0 + B): B rows of codes against M rows of int16 x
template <int M, int B>
void dot_block(const int16_t* xq, const float* x_scales, const int8_t* codes, const float* scales, int64_t K,
               int64_t n0, int64_t N, float* out) {
  int64_t sums[M][B] = {};
  int64_t k = 0;
#if defined(CPU_CAPABILITY_AVX512) || defined(CPU_CAPABILITY_AVX2)
  IntVec acc[M][B];
  for (int m = 0; m < M; ++m)
    for (int b = 0; b < B; ++b) acc[m][b] = zero();
  for (; k + kStep <= K; k += kStep) {
    IntVec w[B];
    for (int b = 0; b < B; ++b) {
      // the next block's rows, asked for early: without it the loads wait on memory
      if ((k & 63) == 0 && n0 + kAheadRows + b < N) prefetch_line(codes + (n0 + kAheadRows + b) * K + k);
      w[b] = widen_codes(codes + (n0 + b) * K + k);
    }
    for (int m = 0; m < M; ++m) {
      const IntVec xv = load_x(xq + m * K + k);
      for (int b = 0; b < B; ++b) acc[m][b] = multiply_add(acc[m][b], xv, w[b]);
    }
  }
  for (int m = 0; m < M; ++m)
    for (int b = 0; b < B; ++b) sums[m][b] = lane_sum(acc[m][b]);
#endif
  for (int m = 0; m < M; ++m) {
    for (int b = 0; b < B; ++b) {
      for (int64_t t = k; t < K; ++t) sums[m][b] += int64_t{xq[m * K + t]} * codes[(n0 + b) * K + t];
      out[m * N + n0 + b] = static_cast<float>(sums[m][b]) * x_scales[m] * scales[n0 + b];
    }
  }
}

template <int M>
void rows_pass(const int16_t* xq, const float* x_scales, const int8_t* codes, const float* scales, int64_t K,
               int64_t N, float* out) {
  constexpr int kBlock = block_rows<M>();
  at::parallel_for(0, (N + kBlock - 1) / kBlock, 256 / kBlock, [&](int64_t lo, int64_t hi) {
    for (int64_t block = lo; block < hi; ++block) {
      const int64_t n0 = block * kBlock;
      if (n0 + kBlock <= N) {
        dot_block<M, kBlock>(xq, x_scales, codes, scales, K, n0, N, out);
      } else {
        for (int64_t n = n0; n < N; ++n) dot_block<M, 1>(xq, x_scales, codes, scales, K, n, N, out);
      }
    }
  });
}

at::Tensor int8_linear(const at::Tensor& input, const at::Tensor& codes, const at::Tensor& scales) {
  TORCH_CHECK(input.dim() == 2 && codes.dim() == 2 && input.size(1) == codes.size(1),
              "int8_linear takes x [M, K] and codes [N, K]");
  TORCH_CHECK(codes.scalar_type() == at::kChar && scales.dim() == 1 && scales.size(0) == codes.size(0),
              "int8_linear takes int8 codes [N, K] and one scale per row");
  TORCH_CHECK(codes.size(1) <= kMaxK, "int8_linear sums at most ", kMaxK, " input features, not ", codes.size(1));
  const at::Tensor x = input.to(at::kFloat).contiguous(), w = codes.contiguous();
  const at::Tensor s = scales.to(at::kFloat).contiguous();
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  const RoundedRows<int16_t> xq = round_rows<int16_t>(x.data_ptr<float>(), M, K, K, 16383.f, false);  // one scale per row
  at::Tensor out = at::empty({M, N}, x.options());
  for (int64_t m0 = 0; m0 < M; m0 += kRows) {
    const int16_t* xr = xq.values.data() + m0 * K;
    const float* xs = xq.scales.data() + m0;
    float* o = out.data_ptr<float>() + m0 * N;
    switch (std::min(kRows, M - m0)) {
      case 1: rows_pass<1>(xr, xs, w.data_ptr<int8_t>(), s.data_ptr<float>(), K, N, o); break;
      case 2: rows_pass<2>(xr, xs, w.data_ptr<int8_t>(), s.data_ptr<float>(), K, N, o); break;
      case 3: rows_pass<3>(xr, xs, w.data_ptr<int8_t>(), s.data_ptr<float>(), K, N, o); break;
      default: rows_pass<4>(xr, xs, w.data_ptr<int8_t>(), s.data_ptr<float>(), K, N, o); break;
    }
  }
  return out;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(TIERGATE_OPS, m) { m.def("int8_linear(Tensor x, Tensor codes, Tensor scales) -> Tensor"); }

TORCH_LIBRARY_IMPL(TIERGATE_OPS, CPU, m) { m.impl("int8_linear", &int8_linear); }
