// Paged decode attention on the CPU: one query token per sequence attends over its keys and
// values where they lie in the block pool, with no gathered copy of the context.
//
// The torch version (kernels/paged_attention.py) copies every sequence's blocks out of the pool
// (padded to the widest table), then runs softmax and two matmuls over the copy. Here each
// (sequence, KV head) reads its own K and V once, for the query heads that share the KV head
// (grouped-query attention), and only up to its own length. Long contexts are split into pieces
// so that both cores have work even at batch 1; each piece keeps a running max and sum (as
// flash-decoding does), merged at the end.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <torch/library.h>

#include "prefetch.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

namespace {

using Vec = at::vec::Vectorized<float>;
constexpr int64_t kMinPiece = 64;  // positions per piece at least: a piece's fixed cost stays small

struct Piece {
  int64_t seq, head, begin, end;  // positions [begin, end) of one sequence's KV head
};

struct Scratch {  // per thread, reused by its pieces
  std::vector<int64_t> rows;
  std::vector<float> scores;
};

struct Shape {
  int64_t block_size, kv_heads, head_dim, group, table_width;
};

template <typename T>
inline Vec load_floats(const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    return Vec::loadu(p);
  } else {
    Vec out;
    at::vec::load_fp32_from_bf16(p, out);
    return out;
  }
}

// Query heads of one KV head are handled kMaxGroup at a time, with the width a template
// argument, so that their accumulators stay in registers.
constexpr int64_t kMaxGroup = 8;
constexpr int64_t kTile = 16;  // positions whose values are summed per pass over a head-dim slice
// Positions are read in the order of the block table, whose blocks lie anywhere in the pool, so
// the hardware prefetcher loses the stream at every block edge and loads wait on memory. Rows
// this many positions ahead are asked for early (docs/engine-cpu.md).
constexpr int64_t kAhead = 16;

// Asks for every cache line of the row `rows[i]` of `cache`, if i is in range.
template <typename T>
inline void prefetch_row(const T* cache, const int64_t* rows, int64_t i, int64_t n, int64_t D) {
  if (i >= n) return;
  const char* row = reinterpret_cast<const char*>(cache + rows[i]);
  for (int64_t byte = 0; byte < D * static_cast<int64_t>(sizeof(T)); byte += 64) prefetch_line(row + byte);
}

// acc[j] = the lane-wise products of q_j and the key, summed over the head dim's Vec-wide slices
template <int G, typename T>
inline int64_t key_lanes(const float* q, const T* key, int64_t D, Vec* acc) {
  for (int j = 0; j < G; ++j) acc[j] = Vec(0.f);
  int64_t d = 0;
  for (; d + Vec::size() <= D; d += Vec::size()) {
    const Vec k = load_floats(key + d);
    for (int j = 0; j < G; ++j) acc[j] = at::vec::fmadd(Vec::loadu(q + j * D + d), k, acc[j]);
  }
  return d;
}

#if defined(CPU_CAPABILITY_AVX512)
using Lanes = __m512;
// out[i] = the sum of the 16 lanes of v[i], for 16 vectors at once: a tree of pairwise sums,
// cheaper than each vector's own reduction, which with few query heads per KV head would be a
// large part of the scoring
inline __m512 lane_sums(const __m512* v) {
  __m512 t[8], u[4];
  for (int i = 0; i < 8; ++i)  // per 128-bit lane: v[2i] at 0 and 2, v[2i+1] at 1 and 3
    t[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 4; ++i)  // per 128-bit lane: v[4i] .. v[4i + 3]
    u[i] = _mm512_add_ps(_mm512_shuffle_ps(t[2 * i], t[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(t[2 * i], t[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 w01 = _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], 0x44), _mm512_shuffle_f32x4(u[0], u[1], 0xEE));
  const __m512 w23 = _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], 0x44), _mm512_shuffle_f32x4(u[2], u[3], 0xEE));
  return _mm512_add_ps(_mm512_shuffle_f32x4(w01, w23, 0x88), _mm512_shuffle_f32x4(w01, w23, 0xDD));
}
#elif defined(CPU_CAPABILITY_AVX2)
using Lanes = __m256;
// the same for 8 vectors of 8 lanes
inline __m256 lane_sums(const __m256* v) {
  __m256 t[4], u[2];
  for (int i = 0; i < 4; ++i)  // per 128-bit lane: v[2i] at 0 and 2, v[2i+1] at 1 and 3
    t[i] = _mm256_add_ps(_mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 2; ++i)  // per 128-bit lane: v[4i] .. v[4i + 3]
    u[i] = _mm256_add_ps(_mm256_shuffle_ps(t[2 * i], t[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm256_shuffle_ps(t[2 * i], t[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm256_add_ps(_mm256_permute2f128_ps(u[0], u[1], 0x20), _mm256_permute2f128_ps(u[0], u[1], 0x31));
}
#endif

// scores[j * n + i] = q_j . key_i for the G query heads, each key loaded once for all of them
template <int G, typename T>
void score_keys(const float* q, const T* k_cache, const int64_t* rows, int64_t n, int64_t D, float* scores) {
  int64_t i = 0;
#if defined(CPU_CAPABILITY_AVX512) || defined(CPU_CAPABILITY_AVX2)
  constexpr int64_t kKeys = Vec::size();  // keys whose lanes are summed together, one per lane
  if (D % Vec::size() == 0) {
    for (; i + kKeys <= n; i += kKeys) {
      Lanes lanes[G][kKeys];
      for (int64_t key = 0; key < kKeys; ++key) {
        prefetch_row(k_cache, rows, i + key + kAhead, n, D);
        Vec acc[G];
        key_lanes<G>(q, k_cache + rows[i + key], D, acc);
        for (int j = 0; j < G; ++j) lanes[j][key] = acc[j];
      }
      for (int j = 0; j < G; ++j) Vec(lane_sums(lanes[j])).store(scores + j * n + i);
    }
  }
#endif
  for (; i < n; ++i) {
    prefetch_row(k_cache, rows, i + kAhead, n, D);
    const T* key = k_cache + rows[i];
    Vec acc[G];
    const int64_t d = key_lanes<G>(q, key, D, acc);
    for (int j = 0; j < G; ++j) {
      float dot = at::vec::vec_reduce_all<float>([](Vec& a, Vec& b) { return a + b; }, acc[j]);
      for (int64_t e = d; e < D; ++e) dot += q[j * D + e] * static_cast<float>(key[e]);
      scores[j * n + i] = dot;
    }
  }
}

// out_j += sum_i weights[j * n + i] * value_i, a tile of positions per pass over each
// Vec-wide slice of the head dim, the G sums held in registers through the tile
template <int G, typename T>
void sum_values(const float* weights, const T* v_cache, const int64_t* rows, int64_t n, int64_t D, float* out,
                int64_t out_stride) {
  for (int64_t t = 0; t < n; t += kTile) {
    const int64_t tile_end = std::min(n, t + kTile);
    int64_t d = 0;
    for (; d + Vec::size() <= D; d += Vec::size()) {
      Vec acc[G];
      for (int j = 0; j < G; ++j) acc[j] = Vec::loadu(out + j * out_stride + d);
      for (int64_t i = t; i < tile_end; ++i) {
        if (d == 0) prefetch_row(v_cache, rows, i + kAhead, n, D);
        const Vec v = load_floats(v_cache + rows[i] + d);
        for (int j = 0; j < G; ++j) acc[j] = at::vec::fmadd(Vec(weights[j * n + i]), v, acc[j]);
      }
      for (int j = 0; j < G; ++j) acc[j].store(out + j * out_stride + d);
    }
    for (; d < D; ++d)
      for (int64_t i = t; i < tile_end; ++i)
        for (int j = 0; j < G; ++j) out[j * out_stride + d] += weights[j * n + i] * static_cast<float>(v_cache[rows[i] + d]);
  }
}

// Calls body(std::integral_constant<int, G>) for a runtime width 1..kMaxGroup.
template <typename Body>
void with_width(int64_t width, Body body) {
  switch (width) {
    case 1: return body(std::integral_constant<int, 1>{});
    case 2: return body(std::integral_constant<int, 2>{});
    case 3: return body(std::integral_constant<int, 3>{});
    case 4: return body(std::integral_constant<int, 4>{});
    case 5: return body(std::integral_constant<int, 5>{});
    case 6: return body(std::integral_constant<int, 6>{});
    case 7: return body(std::integral_constant<int, 7>{});
    default: return body(std::integral_constant<int, 8>{});
  }
}

// One piece: scores of the group's queries against its keys, then the softmax-weighted sum of
// its values, unnormalised. `partial` gets, per query head, [max, sum, acc[head_dim]].
template <typename T>
void attend_piece(const Piece& p, const float* q, const T* k_cache, const T* v_cache, const int64_t* table,
                  const Shape& s, float scale, float softcap, Scratch& scratch, float* partial) {
  const int64_t n = p.end - p.begin, D = s.head_dim, g = s.group, stride = D + 2;
  // where each position's key and value start in the pool; walking the blocks avoids a 64-bit
  // division per position, which cost more than the position's arithmetic
  std::vector<int64_t>& rows = scratch.rows;
  rows.resize(n);
  for (int64_t i = 0, block = p.begin / s.block_size, offset = p.begin % s.block_size; i < n; ++i) {
    rows[i] = ((table[block] * s.block_size + offset) * s.kv_heads + p.head) * D;
    if (++offset == s.block_size) offset = 0, ++block;
  }
  std::vector<float>& scores = scratch.scores;
  scores.resize(g * n);
  for (int64_t j0 = 0; j0 < g; j0 += kMaxGroup) {
    with_width(std::min(kMaxGroup, g - j0), [&](auto G) {
      score_keys<G.value>(q + j0 * D, k_cache, rows.data(), n, D, scores.data() + j0 * n);
    });
  }
  for (int64_t j = 0; j < g; ++j) {
    float* row = scores.data() + j * n;
    for (int64_t i = 0; i < n; ++i) row[i] = softcap > 0.f ? std::tanh(row[i] * scale / softcap) * softcap : row[i] * scale;
    const float top = at::vec::reduce_all<float>([](Vec& a, Vec& b) { return at::vec::maximum(a, b); }, row, n);
    at::vec::map([top](Vec x) { return (x - Vec(top)).exp(); }, row, row, n);
    partial[j * stride] = top;
    partial[j * stride + 1] = at::vec::reduce_all<float>([](Vec& a, Vec& b) { return a + b; }, row, n);
    std::fill(partial + j * stride + 2, partial + (j + 1) * stride, 0.f);
  }
  for (int64_t j0 = 0; j0 < g; j0 += kMaxGroup) {
    with_width(std::min(kMaxGroup, g - j0), [&](auto G) {
      sum_values<G.value>(scores.data() + j0 * n, v_cache, rows.data(), n, D, partial + j0 * stride + 2, stride);
    });
  }
}

// The pieces of one step: each (sequence, KV head) over its visible positions, cut so that there
// are a few pieces per thread. Returns, per (sequence, KV head), the index of its first piece.
// Every block a piece reads is checked once here, so the kernel itself never reads out of bounds.
std::vector<int64_t> plan(const int64_t* lens, const int64_t* tables, int64_t batch, int64_t window,
                          const Shape& s, int64_t num_blocks, std::vector<Piece>& pieces) {
  const int64_t kv_heads = s.kv_heads;
  int64_t total = 0;
  for (int64_t b = 0; b < batch; ++b) {
    TORCH_CHECK(lens[b] >= 0 && lens[b] <= s.table_width * s.block_size, "context length ", lens[b],
                " does not fit a block table of width ", s.table_width);
    for (int64_t i = 0; i < (lens[b] + s.block_size - 1) / s.block_size; ++i) {
      const int64_t block = tables[b * s.table_width + i];
      TORCH_CHECK(block >= 0 && block < num_blocks, "block ", block, " is outside the pool of ", num_blocks);
    }
    total += std::min(lens[b], window > 0 ? window : lens[b]) * kv_heads;
  }
  const int64_t wanted = 4 * at::get_num_threads();
  const int64_t size = std::max(kMinPiece, (total + wanted - 1) / wanted);
  std::vector<int64_t> first(batch * kv_heads + 1);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t end = lens[b], begin = window > 0 ? std::max<int64_t>(0, end - window) : 0;
    for (int64_t h = 0; h < kv_heads; ++h) {
      first[b * kv_heads + h] = static_cast<int64_t>(pieces.size());
      for (int64_t at = begin; at < end; at += size) pieces.push_back({b, h, at, std::min(end, at + size)});
    }
  }
  first[batch * kv_heads] = static_cast<int64_t>(pieces.size());
  return first;
}

template <typename T>
void run(const at::Tensor& query, const at::Tensor& k_cache, const at::Tensor& v_cache, const at::Tensor& tables,
         const at::Tensor& lens, double scale, int64_t window, double softcap, at::Tensor& out) {
  const int64_t batch = query.size(0), num_heads = query.size(1);
  const Shape s{k_cache.size(1), k_cache.size(2), k_cache.size(3), num_heads / k_cache.size(2), tables.size(1)};
  const int64_t* table = tables.data_ptr<int64_t>();
  std::vector<Piece> pieces;
  const std::vector<int64_t> first = plan(lens.data_ptr<int64_t>(), table, batch, window, s, k_cache.size(0), pieces);
  const int64_t stride = s.head_dim + 2;
  std::vector<float> partials(pieces.size() * s.group * stride);
  const at::Tensor q = query.to(at::kFloat).contiguous();
  const float* qf = q.data_ptr<float>();
  const T* kc = k_cache.data_ptr<T>();
  const T* vc = v_cache.data_ptr<T>();
  at::parallel_for(0, static_cast<int64_t>(pieces.size()), 1, [&](int64_t lo, int64_t hi) {
    Scratch scratch;
    for (int64_t i = lo; i < hi; ++i) {
      const Piece& p = pieces[i];
      const float* qp = qf + (p.seq * num_heads + p.head * s.group) * s.head_dim;
      attend_piece<T>(p, qp, kc, vc, table + p.seq * s.table_width, s, static_cast<float>(scale),
                      static_cast<float>(softcap), scratch, partials.data() + i * s.group * stride);
    }
  });
  // merge the pieces of each (sequence, KV head): rescale each to the common max, then normalise
  float* o = out.data_ptr<float>();
  at::parallel_for(0, batch * s.kv_heads, 1, [&](int64_t lo, int64_t hi) {
    std::vector<float> acc(s.head_dim);
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t b = t / s.kv_heads, h = t % s.kv_heads;
      for (int64_t j = 0; j < s.group; ++j) {
        float* dst = o + (b * num_heads + h * s.group + j) * s.head_dim;
        float top = -std::numeric_limits<float>::infinity(), sum = 0.f;
        for (int64_t i = first[t]; i < first[t + 1]; ++i) top = std::max(top, partials[(i * s.group + j) * stride]);
        std::fill(acc.begin(), acc.end(), 0.f);
        for (int64_t i = first[t]; i < first[t + 1]; ++i) {
          const float* part = partials.data() + (i * s.group + j) * stride;
          const float w = std::exp(part[0] - top);
          sum += w * part[1];
          for (int64_t d = 0; d < s.head_dim; ++d) acc[d] += w * part[2 + d];
        }
        // a sequence with no visible key (length 0, a padded row) gets zeros, not NaN
        const float norm = sum > 0.f ? 1.f / sum : 0.f;
        for (int64_t d = 0; d < s.head_dim; ++d) dst[d] = acc[d] * norm;
      }
    }
  });
}

at::Tensor paged_decode(const at::Tensor& query, const at::Tensor& k_cache, const at::Tensor& v_cache,
                        const at::Tensor& block_tables, const at::Tensor& context_lens, double scale,
                        int64_t sliding_window, double softcap) {
  TORCH_CHECK(query.dim() == 3 && k_cache.dim() == 4, "query [B, Hq, D] and cache [blocks, block_size, Hkv, D]");
  TORCH_CHECK(k_cache.is_contiguous() && v_cache.is_contiguous(), "the block pool must be contiguous");
  TORCH_CHECK(k_cache.sizes() == v_cache.sizes() && k_cache.scalar_type() == v_cache.scalar_type(), "K and V pools differ");
  TORCH_CHECK(query.size(2) == k_cache.size(3) && query.size(1) % k_cache.size(2) == 0, "query heads do not fit the pool");
  TORCH_CHECK(block_tables.scalar_type() == at::kLong && context_lens.scalar_type() == at::kLong, "tables and lengths are int64");
  TORCH_CHECK(block_tables.size(0) == query.size(0) && context_lens.size(0) == query.size(0), "one table and length per query");
  const at::Tensor tables = block_tables.contiguous(), lens = context_lens.contiguous();
  // float out, cast to the query's dtype: a bf16 pool under an fp32 model rounds K/V, not the output
  at::Tensor out = at::empty(query.sizes(), query.options().dtype(at::kFloat));
  if (k_cache.scalar_type() == at::kFloat) {
    run<float>(query, k_cache, v_cache, tables, lens, scale, sliding_window, softcap, out);
  } else if (k_cache.scalar_type() == at::kBFloat16) {
    run<at::BFloat16>(query, k_cache, v_cache, tables, lens, scale, sliding_window, softcap, out);
  } else {
    TORCH_CHECK(false, "paged_decode supports float32 and bfloat16 pools, not ", k_cache.scalar_type());
  }
  return out.to(query.scalar_type());
}

}  // namespace

TORCH_LIBRARY(TIERGATE_OPS, m) {
  m.def("paged_decode(Tensor query, Tensor k_cache, Tensor v_cache, Tensor block_tables, Tensor context_lens, "
        "float scale, int sliding_window, float softcap) -> Tensor");
}

TORCH_LIBRARY_IMPL(TIERGATE_OPS, CPU, m) { m.impl("paged_decode", &paged_decode); }
