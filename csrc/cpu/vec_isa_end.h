// Closes what vec_isa_begin.h opened: back to the baseline instruction set and warnings for anything after it.
#if defined(CPU_CAPABILITY_AVX512) || defined(CPU_CAPABILITY_AVX2)
#pragma GCC pop_options
#endif
#pragma GCC diagnostic pop
