// Asks for the cache line at `p` ahead of its use. On x86-64 an asm statement, which the compiler
// cannot drop from a loop as it may drop __builtin_prefetch (docs/engine-cpu.md).
#pragma once

inline void prefetch_line(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p);
#endif
}
