// Asks for the cache line at `p` ahead of its use. GCC 12 at -O3 dropped __builtin_prefetch (and
// _mm_prefetch) from our kernels' loops: the built library held no prefetch instruction. So on
// x86-64 it is an asm statement, which the compiler keeps.
#pragma once

inline void prefetch_line(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p);
#endif
}
