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
        block = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
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
        if (block->mapped)
            munmap(block, block->length);
        else
            free(block);
    }
}
#else
static void *pages_realloc(void *array, size_t bytes) { return realloc(array, bytes ? bytes : 1); }

static void pages_free(void *array) { free(array); }
#endif

#endif
