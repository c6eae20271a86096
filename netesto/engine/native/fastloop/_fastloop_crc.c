/* crc32 (zlib's: reflected 0xEDB88320, pre- and post-inverted) of the records blocks, with carry-less
 * multiplication where the CPU has it: the 64-byte folds of Intel's "Fast CRC Computation Using
 * PCLMULQDQ" (the constants of Linux's crc32-pclmul), the last < 32 bytes by zlib's crc32. zlib's
 * crc32 alone takes ~0.19 us a 344-byte row here, a quarter of writing a block. */
#ifdef NETESTO_ZLIB
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

#include "_fastloop.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#define HAVE_CLMUL 1

__attribute__((target("pclmul,sse4.1"))) static uint32_t crc_clmul(uint32_t crc, const unsigned char *p, size_t n)
{
    /* n >= 64. The raw (not inverted) remainder ~crc goes into the first 4 bytes. */
    const __m128i k512 = _mm_set_epi64x(0x1c6e41596, 0x154442bd4); /* fold 4 x 128 bits */
    const __m128i k128 = _mm_set_epi64x(0x0ccaa009e, 0x1751997d0); /* fold 128 bits */
    __m128i x0 = _mm_loadu_si128((const __m128i *)p), x1 = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 32)), x3 = _mm_loadu_si128((const __m128i *)(p + 48));
    x0 = _mm_xor_si128(x0, _mm_cvtsi32_si128((int)~crc));
    p += 64;
    n -= 64;
#define FOLD(x, k, next) \
    _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)), next)
    while (n >= 64) {
        x0 = FOLD(x0, k512, _mm_loadu_si128((const __m128i *)p));
        x1 = FOLD(x1, k512, _mm_loadu_si128((const __m128i *)(p + 16)));
        x2 = FOLD(x2, k512, _mm_loadu_si128((const __m128i *)(p + 32)));
        x3 = FOLD(x3, k512, _mm_loadu_si128((const __m128i *)(p + 48)));
        p += 64;
        n -= 64;
    }
    x0 = FOLD(x0, k128, x1);
    x0 = FOLD(x0, k128, x2);
    x0 = FOLD(x0, k128, x3);
    while (n >= 16) {
        x0 = FOLD(x0, k128, _mm_loadu_si128((const __m128i *)p));
        p += 16;
        n -= 16;
    }
#undef FOLD
    /* what is left: 16 bytes of remainder and n < 16 bytes, whose raw crc (init 0) is the block's */
    unsigned char rest[32];
    _mm_storeu_si128((__m128i *)rest, x0);
    memcpy(rest + 16, p, n);
    uint32_t raw = ~(uint32_t)crc32(0xffffffffUL, rest, (uInt)(16 + n));
    return ~raw;
}

static int clmul_ok = -1; /* -1: not checked yet */

static int clmul_usable(void)
{
    if (clmul_ok < 0) {
        clmul_ok = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
        if (clmul_ok) { /* check against zlib once, several lengths and starting values */
            unsigned char probe[300];
            for (size_t i = 0; i < sizeof probe; i++) probe[i] = (unsigned char)(i * 131 + 7);
            for (size_t n = 64; n <= sizeof probe && clmul_ok; n += 29)
                for (uint32_t c = 0; c < 3 && clmul_ok; c++)
                    clmul_ok = crc_clmul(c * 0x9e3779b9u, probe, n) == (uint32_t)crc32(c * 0x9e3779b9u, probe, (uInt)n);
        }
    }
    return clmul_ok;
}
#endif

uint32_t block_crc32(uint32_t crc, const unsigned char *p, size_t n)
{
#ifdef HAVE_CLMUL
    if (n >= 64 && clmul_usable()) return crc_clmul(crc, p, n);
#endif
    while (n > 0x40000000) { /* uInt lengths */
        crc = (uint32_t)crc32(crc, p, 0x40000000);
        p += 0x40000000;
        n -= 0x40000000;
    }
    return (uint32_t)crc32(crc, p, (uInt)n);
}

int block_crc32_fast(void)
{
#ifdef HAVE_CLMUL
    return clmul_usable();
#else
    return 0;
#endif
}
#endif
