/* What the C files of netesto's _fastloop extension share (see _fastloop.c). */
#ifndef NETESTO_FASTLOOP_H
#define NETESTO_FASTLOOP_H

#include <stddef.h>
#include <stdint.h>

/* records.LAT: lat_count (uint32), 4 pad bytes, then lat_min, mean, max, p50, p90, p99, p999 (doubles) */
#define LAT_SIZE 64
#define LAT_QUANTILES 4

extern const double lat_quantiles[LAT_QUANTILES]; /* raw.histogram.PERCENTILES' fractions */

/* The LAT part of a row for n interval latencies (ns), at out (LAT_SIZE bytes): records.interval_summary's
 * bytes. work: room for n values (scratch, the values are not changed). 1: done; 0: nothing written, the
 * Python twin must do it (no values, a negative one, or values too large for doubles to stay exact). */
int lat_summary(const int64_t *values, size_t n, int64_t *work, char *out);

#ifdef NETESTO_ZLIB
/* zlib's crc32(crc, p, n), with PCLMULQDQ where the CPU has it (_fastloop_crc.c); block_crc32_fast: 1 then */
uint32_t block_crc32(uint32_t crc, const unsigned char *p, size_t n);
int block_crc32_fast(void);
#endif

#endif
