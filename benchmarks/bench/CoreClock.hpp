#pragma once
// The clock the core runs this process at, measured rather than read: a chain of dependent
// integer adds completes at most one add per cycle (the adds' latency), so adds per second are
// cycles per second, or fewer. On a VM the clock /proc/cpuinfo names can be the nominal one (2.1
// GHz on the 2-core AMD EPYC VM of docs/methods.md, where this chain measured 3.3-3.5 GHz). It
// tells apart a kernel slowed by a lower clock from one slowed by sharing the core's execution
// units (another hardware thread on the same physical core): the chain uses one integer unit per
// cycle, so sharing can only make it read low, and a reading that stays up while the kernel's
// cycles per value rise points at sharing.

#include <a2sgd/core/Accounting.hpp>

#include <cstdint>

namespace a2sgd::bench {

/// Whether this build can measure the clock (GCC or Clang: the chain is kept by empty asm
/// statements, which other compilers may not honour).
#if defined(__GNUC__) || defined(__clang__)
inline constexpr bool can_measure_clock = true;
#else
inline constexpr bool can_measure_clock = false;
#endif

/// Dependent integer adds per chain: about 0.3 ms at 3 GHz.
inline constexpr std::int64_t clock_chain_adds = std::int64_t(1) << 20;

/// Seconds one chain of clock_chain_adds dependent adds takes (0 where !can_measure_clock).
inline double time_add_chain() {
#if defined(__GNUC__) || defined(__clang__)
  std::uint64_t x = 0;
  const Stopwatch clock;
  for (std::int64_t i = 0; i < clock_chain_adds; i += 4) {
    // Each empty asm takes x in a register and may change it, so the compiler can neither fold
    // the adds into one nor reorder them: four adds of latency one per iteration, while the loop
    // counter and branch run on other units.
    x += 1;
    asm volatile("" : "+r"(x));
    x += 1;
    asm volatile("" : "+r"(x));
    x += 1;
    asm volatile("" : "+r"(x));
    x += 1;
    asm volatile("" : "+r"(x));
  }
  const double seconds = clock.seconds();
  asm volatile("" : : "r"(x));
  return seconds;
#else
  return 0.0;
#endif
}

}  // namespace a2sgd::bench
