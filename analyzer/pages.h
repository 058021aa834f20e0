/* pages.h: the native extensions' large arrays in pages of their own (anonymous maps, grown by mremap on Linux), with
 * realloc's and free's contract. glibc's malloc serves a block below its mmap threshold from a heap, and raises that
 * threshold (up to 32 MiB) each time the process frees a mapped block, as DuckDB, NumPy and Python do all along a
 * load: an array grown there by realloc was copied at each step and the old copies stayed in the heap, memory the
 * process kept holding. A map's pages cost memory only once written, growing it moves no bytes, and unmapping it
 * gives them back at once. An array stays on malloc's heap until it grows past PAGES_MAPPED_FROM: a small trace's
 * many small columns each in a map of their own cost a map, an unmap and a fault per page (~5 % of a 10 MB load's
 * CPU). Elsewhere these are realloc and free. */
#ifndef KS_PAGES_H
#define KS_PAGES_H

#include <stdlib.h>

#if defined(__linux__)
#include <string.h>
#include <sys/mman.h>

/* the block's length and whether it is a map sit before the array, in a header that keeps the array aligned for
 * any of its types */
enum { PAGES_HEADER = 64 };
/* a build may set it: the sanitizer tests' (tests/sanitized.py) puts every array on the heap, where AddressSanitizer
 * sees its bounds (in a map it sees none), or every array past a page in a map, to take that path with small inputs */
#ifndef PAGES_MAPPED_FROM
#define PAGES_MAPPED_FROM ((size_t)1 << 20)
#endif

typedef struct {
    size_t length; /* of the whole block, header included */
    int mapped;
} pages_block;

#ifdef PAGES_KEPT
#include <pthread.h>

/* Maps freed while a load keeps them (pages_keeping > 0) wait here for the next array of that load instead of going
 * back to the system: each fresh page costs a fault and the kernel's zeroing of it, a large share of a large trace's
 * ingest, whose parts each write about their own size to new arrays. At most PAGES_KEPT maps; the last load to stop
 * keeping them unmaps them all (pages_stop_keeping), so none outlives the loads. */
static pages_block *pages_kept[PAGES_KEPT];
static int pages_kept_count, pages_keeping;
static pthread_mutex_t pages_kept_lock = PTHREAD_MUTEX_INITIALIZER;

static int pages_keep(pages_block *block) {
    pthread_mutex_lock(&pages_kept_lock);
    int kept = pages_keeping > 0 && pages_kept_count < PAGES_KEPT;
    if (kept) pages_kept[pages_kept_count++] = block;
    pthread_mutex_unlock(&pages_kept_lock);
    return kept;
}

/* A kept map resized to `length` bytes (the smallest that holds them, else the largest, grown: its written pages are
 * the ones reused), or MAP_FAILED where none is kept. */
static void *pages_kept_map(size_t length) {
    pthread_mutex_lock(&pages_kept_lock);
    int best = -1;
    for (int i = 0; i < pages_kept_count; i++) {
        size_t have = pages_kept[i]->length, best_have = best < 0 ? 0 : pages_kept[best]->length;
        if (best < 0 || (have >= length ? best_have < length || have < best_have : have > best_have)) best = i;
    }
    pages_block *block = best < 0 ? NULL : pages_kept[best];
    if (block) pages_kept[best] = pages_kept[--pages_kept_count];
    pthread_mutex_unlock(&pages_kept_lock);
    if (!block) return MAP_FAILED;
    if (block->length == length) return block;
    void *resized = mremap(block, block->length, length, MREMAP_MAYMOVE);
    if (resized == MAP_FAILED) munmap(block, block->length);
    return resized;
}

/* A load starts keeping freed maps for its next arrays. */
static inline void pages_start_keeping(void) {
    pthread_mutex_lock(&pages_kept_lock);
    pages_keeping++;
    pthread_mutex_unlock(&pages_kept_lock);
}

/* A load stops; the last one gives every kept map back to the system. */
static inline void pages_stop_keeping(void) {
    pthread_mutex_lock(&pages_kept_lock);
    if (pages_keeping > 0) pages_keeping--;
    while (pages_keeping == 0 && pages_kept_count > 0) {
        pages_block *block = pages_kept[--pages_kept_count];
        munmap(block, block->length);
    }
    pthread_mutex_unlock(&pages_kept_lock);
}
#else
static int pages_keep(pages_block *block) {
    (void)block;
    return 0;
}

static void *pages_kept_map(size_t length) {
    (void)length;
    return MAP_FAILED;
}
#endif

/* `array` (NULL for none) resized to `bytes`, its contents kept; NULL where memory ran out, `array` then unchanged */
static void *pages_realloc(void *array, size_t bytes) {
    if (bytes > (size_t)-1 - PAGES_HEADER) return NULL;
    size_t length = bytes + PAGES_HEADER;
    pages_block *old = array ? (pages_block *)((char *)array - PAGES_HEADER) : NULL;
    void *block;
    if (old && old->mapped) {
        block = mremap(old, old->length, length, MREMAP_MAYMOVE);
        if (block == MAP_FAILED) return NULL;
        ((pages_block *)block)->mapped = 1;
    } else if (length < PAGES_MAPPED_FROM) {
        block = realloc(old, length);
        if (!block) return NULL;
        ((pages_block *)block)->mapped = 0;
    } else { /* a heap block (or none) grown past the threshold moves to a map, once */
        block = pages_kept_map(length);
        if (block == MAP_FAILED) block = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (block == MAP_FAILED) return NULL;
        if (old) {
            memcpy((char *)block + PAGES_HEADER, array, old->length - PAGES_HEADER);
            free(old);
        }
        ((pages_block *)block)->mapped = 1;
    }
    ((pages_block *)block)->length = length;
    return (char *)block + PAGES_HEADER;
}

static void pages_free(void *array) {
    if (array) {
        pages_block *block = (pages_block *)((char *)array - PAGES_HEADER);
        if (block->mapped) {
            if (!pages_keep(block)) munmap(block, block->length);
        }
        else
            free(block);
    }
}
#else
static void *pages_realloc(void *array, size_t bytes) { return realloc(array, bytes ? bytes : 1); }

static void pages_free(void *array) { free(array); }

static inline void pages_start_keeping(void) {}

static inline void pages_stop_keeping(void) {}
#endif

#endif
