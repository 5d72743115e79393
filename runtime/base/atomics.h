/* C11 atomics spelled so that a header holding them compiles from C++ as well (the tests
 * include the internal headers). Both spellings have the same size and layout with GCC and
 * Clang, so a struct means the same to C and C++ code. */
#ifndef HVDS_ATOMICS_H_
#define HVDS_ATOMICS_H_

#ifdef __cplusplus
#include <atomic>
#define HVDS_ATOMIC(T) std::atomic<T>
#define HVDS_ALIGNAS(n) alignas(n)
#else
#include <stdatomic.h>
#define HVDS_ATOMIC(T) _Atomic T
#define HVDS_ALIGNAS(n) _Alignas(n)
#endif

#endif /* HVDS_ATOMICS_H_ */
