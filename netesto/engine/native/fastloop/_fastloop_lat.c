/* The latency part of an RR sampler row in C: records.interval_summary's twin, byte for byte
 * (tests/engine/test_sampling_summary.py compares them with hypothesis). */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "_fastloop.h"

const double lat_quantiles[LAT_QUANTILES] = {0.50, 0.90, 0.99, 0.999};

#define SCALE 0.001 /* ns -> us, interval_summary's scale */
#define OCTAVE_BITS 8 /* raw.histogram.SUB_BITS + 1: a value of bit length b > this is bucketed by its top bits */
#define EXACT ((int64_t)1 << OCTAVE_BITS)
#define EXACT_DOUBLES ((int64_t)1 << 52) /* below, a bucket's middle (a half) is exact as a double */

static int bits(uint64_t v)
{
    return v ? 64 - __builtin_clzll(v) : 0;
}

/* Put the k-th smallest of a[lo..hi] (inclusive) at a[k], smaller ones before it, larger after
 * (quickselect, three-way partitions around a median of three). */
static void select_kth(int64_t *a, ptrdiff_t lo, ptrdiff_t hi, ptrdiff_t k)
{
    while (lo < hi) {
        ptrdiff_t mid = lo + (hi - lo) / 2;
        int64_t x = a[lo], y = a[mid], z = a[hi];
        int64_t pivot = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
        ptrdiff_t lt = lo, i = lo, gt = hi;
        while (i <= gt) {
            int64_t v = a[i];
            if (v < pivot) {
                a[i++] = a[lt];
                a[lt++] = v;
            } else if (v > pivot) {
                a[i] = a[gt];
                a[gt--] = v;
            } else {
                i++;
            }
        }
        /* a[lo..lt-1] < pivot == a[lt..gt] < a[gt+1..hi] */
        if (k < lt) hi = lt - 1;
        else if (k > gt) lo = gt + 1;
        else return;
    }
}

int lat_summary(const int64_t *values, size_t n, int64_t *work, char *out)
{
    if (n == 0 || n > UINT32_MAX) return 0;
    int64_t low = values[0], high = values[0];
    unsigned __int128 sum = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t v = values[i];
        if (v < low) low = v;
        if (v > high) high = v;
        sum += (uint64_t)v;
    }
    if (low < 0 || high >= EXACT_DOUBLES || sum >= ((unsigned __int128)1 << 53)) return 0;
    memcpy(work, values, n * sizeof(int64_t));
    double d[7];
    d[0] = (double)low * SCALE;
    d[1] = (double)(uint64_t)sum / (double)n * SCALE; /* both exact: the quotient rounds once, as Python's */
    d[2] = (double)high * SCALE;
    size_t from = 0;
    for (int q = 0; q < LAT_QUANTILES; q++) {
        double r = ceil(lat_quantiles[q] * (double)n);
        size_t k = (r < 1.0 ? 1 : (size_t)r) - 1; /* the nearest rank, 0-based */
        select_kth(work, (ptrdiff_t)from, (ptrdiff_t)n - 1, (ptrdiff_t)k);
        from = k; /* ranks only grow: what is left of k stays there */
        int64_t rank = work[k];
        double value = (double)rank;
        if (rank >= EXACT) { /* the middle of its histogram bucket, clamped to [low, high] */
            int shift = bits((uint64_t)rank) - OCTAVE_BITS;
            int64_t start = rank >> shift << shift;
            double mid = (double)start + (double)(((int64_t)1 << shift) - 1) / 2.0;
            value = mid < (double)low ? (double)low : mid > (double)high ? (double)high : mid;
        }
        d[3 + q] = value * SCALE;
    }
    uint32_t count = (uint32_t)n;
    memset(out, 0, 8);
    memcpy(out, &count, sizeof count);
    memcpy(out + 8, d, sizeof d);
    return 1;
}
