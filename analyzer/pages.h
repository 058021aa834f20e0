/* pages.h: the native extensions' large arrays in pages of their own (anonymous maps, grown by mremap on Linux), with
 * realloc's and free's contract. glibc's malloc serves a block below its mmap threshold from a heap, and raises that
 * threshold (up to 32 MiB) each time the process frees a mapped block, as DuckDB, NumPy and Python do all along a
 * load: an array grown there by realloc was copied at each step and the old copies stayed in the heap, memory the
 * process kept holding. A map's pages cost memory only once written, growing it moves no bytes, and unmapping it
 * gives them back at once. Elsewhere these are realloc and free. */
#ifndef KS_PAGES_H
#define KS_PAGES_H

#include <stdlib.h>

#if defined(__linux__)
#include <sys/mman.h>

/* the map's length sits before the array, in a header that keeps the array aligned for any of its types */
enum { PAGES_HEADER = 64 };

/* `array` (NULL for none) resized to `bytes`, its contents kept; NULL where memory ran out, `array` then unchanged */
static void *pages_realloc(void *array, size_t bytes) {
    if (bytes > (size_t)-1 - PAGES_HEADER) return NULL;
    size_t length = bytes + PAGES_HEADER;
    char *base = array ? (char *)array - PAGES_HEADER : NULL;
    void *pages = base ? mremap(base, *(size_t *)base, length, MREMAP_MAYMOVE)
                       : mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pages == MAP_FAILED) return NULL;
    *(size_t *)pages = length;
    return (char *)pages + PAGES_HEADER;
}

static void pages_free(void *array) {
    if (array) {
        char *base = (char *)array - PAGES_HEADER;
        munmap(base, *(size_t *)base);
    }
}
#else
static void *pages_realloc(void *array, size_t bytes) { return realloc(array, bytes ? bytes : 1); }

static void pages_free(void *array) { free(array); }
#endif

#endif
