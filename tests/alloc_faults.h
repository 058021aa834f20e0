/* alloc_faults.h: included ahead of a native extension's source (gcc -include) by tests/held_faults.py's build, so
 * that its own calls to malloc, realloc, mmap and mremap fail when told to, and its blocks and maps are counted: each
 * path out of memory can then be taken in turn under the sanitizers, and what it left (a leak, a second free, a map
 * unmapped twice) is seen. Python's and DuckDB's allocations do not pass through it (they are not this source's). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <sys/mman.h>

/* the call (counted from 1 since the plan) that fails, 0 for none; calls made since; blocks and maps held now */
static long faults_fail_at, faults_calls, faults_blocks, faults_maps;

__attribute__((visibility("default"))) void faults_plan(long fail_at) { faults_fail_at = fail_at, faults_calls = 0; }
__attribute__((visibility("default"))) long faults_made(void) { return faults_calls; }
__attribute__((visibility("default"))) long faults_held(void) { return faults_blocks + faults_maps; }

static int faults_fails(void) { return ++faults_calls == faults_fail_at; }

static void *faults_malloc(size_t n) {
    void *p = faults_fails() ? NULL : malloc(n);
    faults_blocks += p != NULL;
    return p;
}

static void *faults_realloc(void *old, size_t n) {
    void *p = faults_fails() ? NULL : realloc(old, n);
    faults_blocks += p != NULL && old == NULL;
    return p;
}

static void faults_free(void *p) {
    faults_blocks -= p != NULL;
    free(p);
}

static void *faults_mmap(void *at, size_t n, int prot, int flags, int fd, off_t offset) {
    void *p = faults_fails() ? MAP_FAILED : mmap(at, n, prot, flags, fd, offset);
    faults_maps += p != MAP_FAILED;
    return p;
}

static void *faults_mremap(void *old, size_t old_n, size_t n, int flags) {
    return faults_fails() ? MAP_FAILED : mremap(old, old_n, n, flags);
}

static int faults_munmap(void *p, size_t n) {
    faults_maps--;
    return munmap(p, n);
}

#define malloc faults_malloc
#define realloc faults_realloc
#define free faults_free
#define mmap faults_mmap
#define mremap faults_mremap
#define munmap faults_munmap
