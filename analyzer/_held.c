/* _held.c: which spans hold each launch point (or CPU operator) of a trace, for held.py: the work of
 * held_by_sql.sql's range join, by a sweep of each thread's spans in nesting order.
 *
 * hold(stream) reads an Arrow C stream capsule of held_spans.sql's rows (flags as uint8, the rest int64), one per
 * span and per point: a span's flags say which of the attribution's kinds it is (MODULE: a module scope or a call
 * scope with its module folded in; FUNCTION: a call scope; OP: an operator; NAMESPACED: an operator whose name has a
 * namespace; FRAME: a Python frame); a point's flag is POINT, its span [ts, end), and for a CPU operator its own id
 * and end in op_id, op_end (op_id -1 for a launch point; event ids are positions, never negative). A span holds a
 * point where they share the thread, ts <= point's ts, point's end <= end, and, for an operator's point, the span is
 * not the operator nor an identical span later in the trace (attribution.sql's rule). Spans nest in attribution.sql's
 * order: an earlier start, then a later end, then a frame before an operator, then a lower id. The stream is read
 * with the GIL held (it runs DuckDB's query) and released once read; the sort and sweep run without the GIL.
 * It returns (points, held): points the number of points, held one bytes object of 7 int64 columns of that many
 * rows each: the point's id, then the ids of its innermost module and call scope, its innermost and outermost
 * operator, and the outermost operator inside its innermost call scope (else inside its innermost module scope, else
 * of all) and the same of those with a namespace; -1 for none.
 *
 * The rows are held apart by kind, each (pid, tid) pair as a number: 29 bytes a span and 44 a point (57 each when
 * held as the stream gives them: on a 1 GB trace that was ~200 MB beside DuckDB's own memory, 1.19x → 1.41x the JSON
 * at peak).
 *
 * Exact for any spans, nested or not: a point reads every span that started before it and has not ended, in nesting
 * order, which is the rows the range join made (dead spans are dropped as the sweep passes their end).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arrow_c.h"

enum { MODULE = 1, FUNCTION = 2, OP = 4, NAMESPACED = 8, FRAME = 16, POINT = 32 };
enum { N_OUT = 7 };

/* the rows of one kind (spans, or points), as columns: a row's thread is a number the reading gives each (pid, tid)
 * pair, so its order is the threads' first appearance, which both kinds share; only points have op_id and op_end */
typedef struct {
    uint8_t *flags;
    uint32_t *thread;
    int64_t *ts, *end, *id, *op_id, *op_end;
    size_t rows, capacity;
} Rows;

/* nesting order of two rows of one kind: thread, start, later end first, frame first, id */
static int before(const Rows *r, uint32_t a, uint32_t b) {
    if (r->thread[a] != r->thread[b]) return r->thread[a] < r->thread[b];
    if (r->ts[a] != r->ts[b]) return r->ts[a] < r->ts[b];
    if (r->end[a] != r->end[b]) return r->end[a] > r->end[b];
    int fa = (r->flags[a] & FRAME) != 0, fb = (r->flags[b] & FRAME) != 0;
    if (fa != fb) return fa;
    return r->id[a] < r->id[b];
}

/* a stable bottom-up merge sort of idx[0..n) by `before`; runs already in order are not merged (traces are mostly
 * in time order already) */
static int sort_rows(const Rows *r, uint32_t *idx, size_t n) {
    uint32_t *tmp = malloc((n ? n : 1) * sizeof *tmp);
    if (!tmp) return 0;
    uint32_t *src = idx, *dst = tmp;
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            if (mid >= hi || !before(r, src[mid], src[mid - 1])) {
                memcpy(dst + lo, src + lo, (hi - lo) * sizeof *src);
                continue;
            }
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) dst[k++] = before(r, src[j], src[i]) ? src[j++] : src[i++];
            while (i < mid) dst[k++] = src[i++];
            while (j < hi) dst[k++] = src[j++];
        }
        uint32_t *swap = src;
        src = dst;
        dst = swap;
    }
    if (src != idx) memcpy(idx, src, n * sizeof *idx);
    free(tmp);
    return 1;
}

/* the sweep: spans (s, sorted by `spans`) and points (p, sorted by `points`) of all threads; out: N_OUT columns of
 * n_points rows; stack: room for the spans open at once (grown as needed); 0 where memory ran out */
static int sweep(const Rows *s, const uint32_t *spans, const Rows *p, const uint32_t *points, int64_t *out) {
    size_t n_spans = s->rows, n_points = p->rows, next = 0, depth = 0, room = 1024;
    uint32_t *stack = malloc(room * sizeof *stack);
    if (!stack) return 0;
    for (size_t k = 0; k < n_points; k++) {
        uint32_t a = points[k], thread = p->thread[a];
        if (k == 0 || thread != p->thread[points[k - 1]]) depth = 0;
        /* spans of earlier threads, and of this thread that started by the point, join the stack */
        while (next < n_spans && s->thread[spans[next]] < thread) next++;
        while (next < n_spans && s->thread[spans[next]] == thread && s->ts[spans[next]] <= p->ts[a]) {
            if (depth == room) {
                uint32_t *grown = realloc(stack, 2 * room * sizeof *stack);
                if (!grown) {
                    free(stack);
                    return 0;
                }
                stack = grown, room *= 2;
            }
            stack[depth++] = spans[next++];
        }
        /* a span that ended by the point's start holds no later point of the thread either */
        size_t kept = 0;
        for (size_t i = 0; i < depth; i++)
            if (s->end[stack[i]] > p->ts[a]) stack[kept++] = stack[i];
        depth = kept;
        int64_t module = -1, function = -1, inner = -1, outer = -1, outer_ns = -1;
        int64_t after_function[2] = {-1, -1}, after_module[2] = {-1, -1};
        int64_t at = p->ts[a], at_end = p->end[a], op_id = p->op_id[a], op_end = p->op_end[a];
        for (size_t i = 0; i < depth; i++) {
            uint32_t e = stack[i];
            uint8_t f = s->flags[e];
            if (s->end[e] < at_end) continue;
            if (op_id >= 0 && s->ts[e] >= at && s->end[e] <= op_end && !(f & FRAME) && s->id[e] >= op_id) continue;
            int64_t id = s->id[e];
            if (f & MODULE) module = id, after_module[0] = after_module[1] = -1;
            if (f & FUNCTION) function = id, after_function[0] = after_function[1] = -1;
            if (f & OP) {
                inner = id;
                if (outer < 0) outer = id;
                if (after_module[0] < 0) after_module[0] = id;
                if (after_function[0] < 0) after_function[0] = id;
            }
            if (f & NAMESPACED) {
                if (outer_ns < 0) outer_ns = id;
                if (after_module[1] < 0) after_module[1] = id;
                if (after_function[1] < 0) after_function[1] = id;
            }
        }
        const int64_t *inside = function >= 0 ? after_function : module >= 0 ? after_module : NULL;
        int64_t row[N_OUT] = {p->id[a], module, function, inner, outer, inside ? inside[0] : outer,
                              inside ? inside[1] : outer_ns};
        for (int c = 0; c < N_OUT; c++) out[(size_t)c * n_points + k] = row[c];
    }
    free(stack);
    return 1;
}

/* ------------------------------------------------------------------ the rows, from an Arrow C stream */

/* the columns held_spans.sql gives, in its order: flags (uint8), then int64s */
enum { FLAGS, PID, TID, TS, END, ID, OP_ID, OP_END, N_COLUMNS };

static void free_rows(Rows *r) {
    free(r->flags);
    free(r->thread);
    free(r->ts);
    free(r->end);
    free(r->id);
    free(r->op_id);
    free(r->op_end);
}

/* room for `rows` rows; points (with_ops) also hold op_id and op_end. The columns grow by half (realloc moves large
 * blocks by remapping; pages past the rows are never touched, so they cost no memory). */
static int grow(Rows *r, size_t rows, int with_ops) {
    if (rows <= r->capacity) return 1;
    size_t capacity = r->capacity ? r->capacity : 1 << 14;
    while (capacity < rows) capacity += capacity / 2;
#define GROW(column)                                                              \
    do {                                                                          \
        void *grown = realloc(r->column, capacity * sizeof *r->column);           \
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

/* the pair's number (a new one where it is new); 0 where memory ran out */
static int thread_number(Threads *t, int64_t pid, int64_t tid, uint32_t *number) {
    if (t->count && pid == t->last_pid && tid == t->last_tid) {
        *number = t->last;
        return 1;
    }
    if (2 * (t->count + 1) > t->slots && !rehash(t, t->slots ? 2 * t->slots : 64)) return 0;
    size_t j = slot_of(pid, tid, t->slots);
    while (t->numbers[j] != UINT32_MAX && (t->keys[2 * j] != pid || t->keys[2 * j + 1] != tid))
        j = (j + 1) & (t->slots - 1);
    if (t->numbers[j] == UINT32_MAX) {
        t->keys[2 * j] = pid, t->keys[2 * j + 1] = tid, t->numbers[j] = (uint32_t)t->count++;
    }
    t->last_pid = pid, t->last_tid = tid, t->last = t->numbers[j];
    *number = t->last;
    return 1;
}

static const char *check_schema(struct ArrowArrayStream *stream) {
    struct ArrowSchema schema = {0};
    if (stream->get_schema(stream, &schema) != 0) return "the stream gave no schema";
    const char *problem = NULL;
    if (strcmp(schema.format, "+s") != 0 || schema.n_children != N_COLUMNS) problem = "not held_spans.sql's columns";
    for (int c = 0; !problem && c < N_COLUMNS; c++)
        if (strcmp(schema.children[c]->format, c == 0 ? "C" : "l") != 0) problem = "not held_spans.sql's column types";
    if (schema.release) schema.release(&schema);
    return problem;
}

/* one batch's rows appended, spans to s and points to p; NULL, or what is wrong with it */
static const char *append_batch(Rows *s, Rows *p, Threads *t, const struct ArrowArray *batch) {
    if (batch->n_children != N_COLUMNS || batch->null_count != 0) return "a batch that is not held_spans.sql's";
    size_t n = (size_t)batch->length;
    if (batch->length < 0 || batch->offset < 0 || s->rows + p->rows + n >= UINT32_MAX)
        return "more rows than the sweep holds";
    const uint8_t *flags = NULL;
    const int64_t *col[N_COLUMNS] = {0};
    for (int c = 0; c < N_COLUMNS; c++) {
        const struct ArrowArray *child = batch->children[c];
        if (child->null_count != 0) return "a NULL in held_spans.sql's columns";
        if (child->offset < 0 || child->length < batch->offset + batch->length)
            return "a column shorter than its batch";
        if (n && (child->n_buffers < 2 || !child->buffers[1])) return "a column without its values";
        size_t first = (size_t)(batch->offset + child->offset);
        if (!n) continue;
        if (c == FLAGS) flags = (const uint8_t *)child->buffers[1] + first;
        else col[c] = (const int64_t *)child->buffers[1] + first;
    }
    if (!n) return NULL;
    size_t points = 0;
    for (size_t i = 0; i < n; i++) points += (flags[i] & POINT) != 0;
    if (!grow(s, s->rows + n - points, 0) || !grow(p, p->rows + points, 1)) return "out of memory";
    for (size_t i = 0; i < n; i++) {
        int point = (flags[i] & POINT) != 0;
        Rows *r = point ? p : s;
        size_t k = r->rows++;
        if (!thread_number(t, col[PID][i], col[TID][i], &r->thread[k])) return "out of memory";
        r->flags[k] = flags[i], r->ts[k] = col[TS][i], r->end[k] = col[END][i], r->id[k] = col[ID][i];
        if (point) r->op_id[k] = col[OP_ID][i], r->op_end[k] = col[OP_END][i];
    }
    return NULL;
}

/* every row of the stream, which it then releases; NULL, or what went wrong */
static const char *read_stream(struct ArrowArrayStream *stream, Rows *s, Rows *p) {
    const char *problem = check_schema(stream);
    Threads t = {0};
    while (!problem) {
        struct ArrowArray batch = {0};
        if (stream->get_next(stream, &batch) != 0) {
            problem = "the stream failed";
            break;
        }
        if (!batch.release) break; /* the end */
        problem = append_batch(s, p, &t, &batch);
        batch.release(&batch);
    }
    stream->release(stream);
    free(t.keys);
    free(t.numbers);
    return problem;
}

/* ------------------------------------------------------------------ Python */

static PyObject *hold(PyObject *self, PyObject *capsule) {
    (void)self;
    struct ArrowArrayStream *stream = PyCapsule_GetPointer(capsule, "arrow_array_stream");
    if (!stream) return NULL;
    if (!stream->release) return PyErr_Format(PyExc_ValueError, "hold: the stream was already read");
    Rows s = {0}, p = {0};
    const char *problem = read_stream(stream, &s, &p); /* with the GIL: the stream runs DuckDB's query */
    if (problem) {
        free_rows(&s);
        free_rows(&p);
        return strcmp(problem, "out of memory") == 0 ? PyErr_NoMemory()
                                                     : PyErr_Format(PyExc_ValueError, "hold: %s", problem);
    }
    size_t n_spans = s.rows, n_points = p.rows;
    uint32_t *spans = malloc((n_spans ? n_spans : 1) * sizeof *spans);
    uint32_t *points = malloc((n_points ? n_points : 1) * sizeof *points);
    PyObject *held = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(N_OUT * n_points * sizeof(int64_t)));
    int ok = spans && points && held;
    if (ok) {
        int64_t *out = (int64_t *)PyBytes_AS_STRING(held);
        Py_BEGIN_ALLOW_THREADS
        for (size_t i = 0; i < n_spans; i++) spans[i] = (uint32_t)i;
        for (size_t i = 0; i < n_points; i++) points[i] = (uint32_t)i;
        ok = sort_rows(&s, spans, n_spans) && sort_rows(&p, points, n_points) && sweep(&s, spans, &p, points, out);
        Py_END_ALLOW_THREADS
    }
    PyObject *result = ok ? Py_BuildValue("(nO)", (Py_ssize_t)n_points, held) : held ? PyErr_NoMemory() : NULL;
    Py_XDECREF(held);
    free(spans);
    free(points);
    free_rows(&s);
    free_rows(&p);
    return result;
}

static PyMethodDef methods[] = {
    {"hold", hold, METH_O,
     "hold(stream) -> (points, 7 int64 columns of that many rows as bytes): the spans that hold each point of an "
     "Arrow C stream capsule of held_spans.sql's rows (see _held.c)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_held", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__held(void) { return PyModule_Create(&module); }
