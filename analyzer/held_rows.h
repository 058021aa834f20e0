/* held_rows.h: the rows of _held.c's sweep, read from DuckDB's Arrow C streams of held_spans.sql's two statements
 * and held apart by kind, each (pid, tid) pair as a number (_held.c says what they hold). Included by _held.c alone.
 */
#ifndef KS_HELD_ROWS_H
#define KS_HELD_ROWS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arrow_c.h"
#include "pages.h"

enum { MODULE = 1, FUNCTION = 2, OP = 4, NAMESPACED = 8, FRAME = 16, POINT = 32 };

/* the rows of one kind (spans, or points), as columns: a row's thread is a number the reading gives each (pid, tid)
 * pair, so its order is the threads' first appearance, which both kinds share; only points have op_id and op_end */
typedef struct {
    uint8_t *flags;
    uint32_t *thread;
    int64_t *ts, *end, *id, *op_id, *op_end;
    size_t rows, capacity;
} Rows;

/* the int64 columns of both streams, in the points' order; the spans' stream has flags (uint8) first and no op_* */
enum { PID, TID, TS, END, ID, OP_ID, OP_END, N_INTS };
static const char POINT_FORMATS[] = "lllllll", SPAN_FORMATS[] = "Clllll";

static void free_rows(Rows *r) {
    pages_free(r->flags);
    pages_free(r->thread);
    pages_free(r->ts);
    pages_free(r->end);
    pages_free(r->id);
    pages_free(r->op_id);
    pages_free(r->op_end);
}

/* room for `rows` rows; points (with_ops) also hold op_id and op_end. The columns grow by half, in pages of their
 * own (pages.h: moved by remapping; pages past the rows are never touched, so they cost no memory). */
static int grow(Rows *r, size_t rows, int with_ops) {
    if (rows <= r->capacity) return 1;
    size_t capacity = r->capacity ? r->capacity : 1 << 14;
    while (capacity < rows) capacity += capacity / 2;
#define GROW(column)                                                              \
    do {                                                                          \
        void *grown = pages_realloc(r->column, capacity * sizeof *r->column);     \
        if (!grown) return 0;                                                     \
        r->column = grown;                                                        \
    } while (0)
    GROW(flags);
    GROW(thread);
    GROW(ts);
    GROW(end);
    GROW(id);
    if (with_ops) {
        GROW(op_id);
        GROW(op_end);
    }
#undef GROW
    r->capacity = capacity;
    return 1;
}

/* each (pid, tid) pair's number, by open addressing; numbers in the order pairs first appear */
typedef struct {
    int64_t *keys; /* 2 per slot: pid, tid */
    uint32_t *numbers; /* UINT32_MAX where the slot is empty */
    size_t slots, count;
    int64_t last_pid, last_tid;
    uint32_t last;
} Threads;

static size_t slot_of(int64_t pid, int64_t tid, size_t slots) {
    uint64_t h = (uint64_t)pid * 0x9E3779B97F4A7C15ull
                 ^ ((uint64_t)tid + 0x632BE59BD9B4E019ull) * 0xBF58476D1CE4E5B9ull;
    return (size_t)(h ^ (h >> 29)) & (slots - 1);
}

static int rehash(Threads *t, size_t slots) {
    int64_t *keys = malloc(2 * slots * sizeof *keys);
    uint32_t *numbers = malloc(slots * sizeof *numbers);
    if (!keys || !numbers) {
        free(keys);
        free(numbers);
        return 0;
    }
    memset(numbers, 0xff, slots * sizeof *numbers);
    for (size_t i = 0; i < t->slots; i++) {
        if (t->numbers[i] == UINT32_MAX) continue;
        size_t j = slot_of(t->keys[2 * i], t->keys[2 * i + 1], slots);
        while (numbers[j] != UINT32_MAX) j = (j + 1) & (slots - 1);
        keys[2 * j] = t->keys[2 * i], keys[2 * j + 1] = t->keys[2 * i + 1], numbers[j] = t->numbers[i];
    }
    free(t->keys);
    free(t->numbers);
    t->keys = keys, t->numbers = numbers, t->slots = slots;
    return 1;
}

/* the pair's number: a new one where it is new and `add`; 0 where it is new and not `add`, -1 where memory ran out */
static int thread_number(Threads *t, int64_t pid, int64_t tid, int add, uint32_t *number) {
    if (t->count && pid == t->last_pid && tid == t->last_tid) {
        *number = t->last;
        return 1;
    }
    if (add && 2 * (t->count + 1) > t->slots && !rehash(t, t->slots ? 2 * t->slots : 64)) return -1;
    if (!t->slots) return 0;
    size_t j = slot_of(pid, tid, t->slots);
    while (t->numbers[j] != UINT32_MAX && (t->keys[2 * j] != pid || t->keys[2 * j + 1] != tid))
        j = (j + 1) & (t->slots - 1);
    if (t->numbers[j] == UINT32_MAX) {
        if (!add) return 0;
        t->keys[2 * j] = pid, t->keys[2 * j + 1] = tid, t->numbers[j] = (uint32_t)t->count++;
    }
    t->last_pid = pid, t->last_tid = tid, t->last = t->numbers[j];
    *number = t->last;
    return 1;
}

/* the sorted points' starts, by thread: thread k's are ts[first[k] .. first[k + 1]), ascending; cursor[k] is where
 * the last search of thread k's ended (a thread's spans come mostly in time order, so the next search starts there) */
typedef struct {
    int64_t *ts;
    size_t *first, *cursor;
} Starts;

static int index_starts(Starts *x, const Rows *p, const uint32_t *points, size_t threads) {
    size_t n = p->rows;
    x->ts = pages_realloc(NULL, (n ? n : 1) * sizeof *x->ts);
    x->first = malloc((threads + 1) * sizeof *x->first);
    x->cursor = malloc((threads ? threads : 1) * sizeof *x->cursor);
    if (!x->ts || !x->first || !x->cursor) return 0;
    for (size_t k = 0; k < n; k++) x->ts[k] = p->ts[points[k]];
    for (size_t thread = 0, k = 0; thread <= threads; thread++) {
        while (k < n && p->thread[points[k]] < thread) k++;
        x->first[thread] = k;
        if (thread < threads) x->cursor[thread] = k;
    }
    return 1;
}

/* the first k of [lo, hi) with v[k] >= x (hi where none), searched outwards from hint (in [lo, hi]) by doubling steps */
static size_t lower_bound_from(const int64_t *v, size_t lo, size_t hi, size_t hint, int64_t x) {
    size_t left, right, step = 1;
    if (hint < hi && v[hint] < x) { /* right of hint: v[left - 1] < x throughout */
        left = right = hint + 1;
        while (right < hi && v[right] < x) left = right + 1, right = right + step < hi ? right + step : hi, step *= 2;
    } else { /* at or left of hint: v[right] >= x, or right == hi */
        right = hint, left = lo;
        while (right - lo > step && v[right - step] >= x) right -= step, step *= 2;
        if (right - lo > step) left = right - step + 1;
    }
    while (left < right) { /* v[..left) < x, v[right..) >= x (or past hi) */
        size_t mid = left + (right - left) / 2;
        if (v[mid] < x) left = mid + 1;
        else right = mid;
    }
    return left;
}

static const char *check_schema(struct ArrowArrayStream *stream, const char *formats) {
    struct ArrowSchema schema = {0};
    if (stream->get_schema(stream, &schema) != 0) return "the stream gave no schema";
    const char *problem = NULL;
    int n = (int)strlen(formats);
    if (strcmp(schema.format, "+s") != 0 || schema.n_children != n) problem = "not held_spans.sql's columns";
    for (int c = 0; !problem && c < n; c++)
        if (strcmp(schema.children[c]->format, (char[]){formats[c], 0}) != 0)
            problem = "not held_spans.sql's column types";
    if (schema.release) schema.release(&schema);
    return problem;
}

/* one batch's rows appended to r: the points (x NULL), or the spans in which a point of their thread starts (x the
 * points' starts, t their threads); NULL, or what is wrong with it */
static const char *append_batch(Rows *r, Threads *t, Starts *x, const struct ArrowArray *batch) {
    const char *formats = x ? SPAN_FORMATS : POINT_FORMATS;
    int n_columns = (int)strlen(formats), ints = x ? 1 : 0; /* the first int64 column's place */
    if (batch->n_children != n_columns || batch->null_count != 0) return "a batch that is not held_spans.sql's";
    size_t n = (size_t)batch->length;
    if (batch->length < 0 || batch->offset < 0 || r->rows + n >= UINT32_MAX) return "more rows than the sweep holds";
    const uint8_t *flags = NULL;
    const int64_t *col[N_INTS] = {0};
    for (int c = 0; c < n_columns; c++) {
        const struct ArrowArray *child = batch->children[c];
        if (child->null_count != 0) return "a NULL in held_spans.sql's columns";
        if (child->offset < 0 || child->length < batch->offset + batch->length)
            return "a column shorter than its batch";
        if (n && (child->n_buffers < 2 || !child->buffers[1])) return "a column without its values";
        size_t first = (size_t)(batch->offset + child->offset);
        if (!n) continue;
        if (c < ints) flags = (const uint8_t *)child->buffers[1] + first;
        else col[c - ints] = (const int64_t *)child->buffers[1] + first;
    }
    if (!n) return NULL;
    if (!grow(r, r->rows + n, !x)) return "out of memory";
    for (size_t i = 0; i < n; i++) {
        uint32_t thread;
        int known = thread_number(t, col[PID][i], col[TID][i], !x, &thread);
        if (known < 0) return "out of memory";
        if (x) {
            if (flags[i] & POINT) return "a point among the spans";
            if (!known) continue; /* no point on its thread */
            size_t lo = x->first[thread], hi = x->first[thread + 1];
            size_t k = x->cursor[thread] = lower_bound_from(x->ts, lo, hi, x->cursor[thread], col[TS][i]);
            if (k == hi || x->ts[k] >= col[END][i]) continue; /* no point starts in it */
        }
        size_t k = r->rows++;
        r->thread[k] = thread, r->flags[k] = x ? flags[i] : POINT;
        r->ts[k] = col[TS][i], r->end[k] = col[END][i], r->id[k] = col[ID][i];
        if (!x) r->op_id[k] = col[OP_ID][i], r->op_end[k] = col[OP_END][i];
    }
    return NULL;
}

/* every row of the stream (append_batch's), which it then releases; NULL, or what went wrong */
static const char *read_stream(struct ArrowArrayStream *stream, Rows *r, Threads *t, Starts *x) {
    const char *problem = check_schema(stream, x ? SPAN_FORMATS : POINT_FORMATS);
    while (!problem) {
        struct ArrowArray batch = {0};
        if (stream->get_next(stream, &batch) != 0) {
            problem = "the stream failed";
            break;
        }
        if (!batch.release) break; /* the end */
        problem = append_batch(r, t, x, &batch);
        batch.release(&batch);
    }
    stream->release(stream);
    return problem;
}

#endif
