/*
 * latent_false_sharing.c -- false sharing that appears only at another line
 * size or alignment.
 *
 * Demonstrates: "latent" false sharing (thesis: false-sharing chapter, cost
 * model §4.2; the simulator can replay one trace with other line sizes).
 * Layout: lfs_slots is an array of 128-byte structs, the array aligned to
 * 128 bytes.  In each struct, thread 0's data (4 longs, 32 bytes) is at
 * offset 32..63 and thread 1's data at offset 64..95, i.e. 32 bytes apart.
 * Line boundaries, in struct offsets:
 *
 *   struct offset:         0        32        64        96       128
 *                          |  pad   | thread 0| thread 1|  pad   |
 *   64B lines, SHIFT=0:    [     line A       )[     line B      )  no sharing
 *   128B lines, SHIFT=0:   [              one line               )  false sharing
 *   64B lines, SHIFT=32:   ..line )[  t0 and t1 share it  )[ line..  false sharing
 *
 * With 64-byte lines and the default alignment the two threads never touch
 * the same line, so a 64-byte-line machine shows no false sharing; with
 * 128-byte lines (or adjacent-line prefetch pairs) both halves are in one
 * line.  With SHIFT=32 the array starts 32 bytes past a 64-byte boundary (as
 * a different allocator or a preceding field could cause), the 64-byte line
 * boundaries fall at struct offsets 32 and 96, and bytes 32..95 -- both
 * threads' data -- are one line: false sharing even with 64-byte lines.
 * Threads 2k and 2k+1 use the k-th group of NSLOTS structs (data[0] and
 * data[1] respectively).
 *
 * Where the slots live decides which predictions can happen (SHIFT is
 * where the array starts in the object):
 *
 *   global  lfs_slots, declared aligned(128): no link order can shift it, so
 *           an audit predicts its latent false sharing with 128-byte lines
 *           only.
 *   heap    a block from aligned_alloc(128, ...): the trace records the
 *           alignment asked for, so the same as global.
 *   malloc  a block from malloc, which guarantees 16 bytes only.  The block
 *           is large, so glibc serves it with mmap, 16 bytes past a page
 *           boundary; with SHIFT=48 (think of a 48-byte header before the
 *           array) the array then starts on a 64-byte boundary and the
 *           recording shows no false sharing -- by luck of the allocator.
 *           Another allocator, or glibc serving the block from its heap,
 *           can place it 32 bytes further: the audit predicts that shift.
 *
 * Usage: latent_false_sharing [REPS [SHIFT [PLACE]]]  (defaults REPS=10000,
 *        SHIFT=0, PLACE=global; SHIFT in bytes, multiple of 8, < 128; PLACE
 *        global, heap or malloc)
 * Output (stdout) does not depend on the thread count; thread count on stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#define NSLOTS 64       /* structs per thread pair */
#define MAX_THREADS 16

struct slot {
    char pad0[32];
    long data[2][4];    /* data[0]: even thread, data[1]: odd thread */
    char pad1[32];
};
_Static_assert(sizeof(struct slot) == 128, "slot must be 128 bytes");

/* one extra slot so a shifted view stays inside the object */
struct slot lfs_slots[MAX_THREADS / 2 * NSLOTS + 1] __attribute__((aligned(128)));

int main(int argc, char **argv)
{
    long reps = argc > 1 ? atol(argv[1]) : 10000;
    long shift = argc > 2 ? atol(argv[2]) : 0;
    const char *place = argc > 3 ? argv[3] : "global";
    int heap = strcmp(place, "heap") == 0;
    int from_malloc = strcmp(place, "malloc") == 0;
    if (reps < 0 || shift < 0 || shift >= 128 || shift % 8 ||
        (!heap && !from_malloc && strcmp(place, "global") != 0)) {
        fprintf(stderr,
                "usage: %s [REPS [SHIFT: 0..120, multiple of 8 [global|heap|malloc]]]\n",
                argv[0]);
        return 2;
    }
    char *base = (char *)lfs_slots;
    if (heap || from_malloc) {
        /* Only the slots this team uses (plus the one a shifted view reaches into) are
         * written: a block mostly never written would hide its falsely shared lines
         * behind the audit's share-of-written-lines threshold. */
        int maxt = omp_get_max_threads();
        size_t n = (size_t)((maxt < MAX_THREADS ? maxt : MAX_THREADS) + 1) / 2 * NSLOTS + 1;
        size_t used = n * sizeof(struct slot);
        if (heap) {
            base = aligned_alloc(128, used);
        } else {
            /* 1 MiB: far above glibc's mmap threshold (128 KiB, raised only by freeing
             * mmapped blocks, to at most 32 MiB), so the placement is the same in every
             * run: the block starts 16 bytes past a page boundary. */
            size_t size = used < (1 << 20) ? (1 << 20) : used;
            base = malloc(size);
        }
        if (!base) {
            fprintf(stderr, "out of memory\n");
            return 2;
        }
        memset(base, 0, used);
    }
    struct slot *slots = (struct slot *)(base + shift);
    int nthreads = 1;

#pragma omp parallel
    {
        int t = omp_get_thread_num();
#pragma omp single
        nthreads = omp_get_num_threads();
        if (nthreads <= MAX_THREADS) {
            struct slot *mine = slots + (t / 2) * NSLOTS;
            for (long r = 0; r < reps; r++)
                for (long k = 0; k < NSLOTS; k++) {
                    volatile long *d = mine[k].data[t & 1]; /* real load+store */
                    d[r & 3] += 1;
                }
        }
    }
    if (nthreads > MAX_THREADS) {
        fprintf(stderr, "at most %d threads supported\n", MAX_THREADS);
        return 2;
    }

    long sum = 0;
    for (long k = 0; k < (nthreads + 1) / 2 * NSLOTS; k++)
        for (int h = 0; h < 2; h++)
            for (int i = 0; i < 4; i++)
                sum += slots[k].data[h][i];
    fprintf(stderr, "threads=%d slots at %p (address mod 128 = %lu)\n", nthreads,
            (void *)slots, (unsigned long)((unsigned long)slots % 128));
    printf("latent_false_sharing reps=%ld shift=%ld place=%s updates_per_thread=%ld %s\n",
           reps, shift, place, reps * NSLOTS,
           sum == (long)nthreads * reps * NSLOTS ? "checksum=ok" : "checksum=BAD");
    if (heap || from_malloc)
        free(base);
    return sum == (long)nthreads * reps * NSLOTS ? 0 : 1;
}
