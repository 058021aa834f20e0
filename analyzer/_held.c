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
enum { N_IN = 7, N_OUT = 7 };

typedef struct {
    const uint8_t *flags;
    const int64_t *pid, *tid, *ts, *end, *id, *op_id, *op_end;
} Rows;

/* nesting order of two rows (spans or points): thread, start, later end first, frame first, id */
static int before(const Rows *r, uint32_t a, uint32_t b) {
    if (r->pid[a] != r->pid[b]) return r->pid[a] < r->pid[b];
    if (r->tid[a] != r->tid[b]) return r->tid[a] < r->tid[b];
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

static int same_thread(const Rows *r, uint32_t a, uint32_t b) {
    return r->pid[a] == r->pid[b] && r->tid[a] == r->tid[b];
}

/* the sweep: spans (sorted) and points (sorted) of all threads; out: N_OUT columns of n_points rows */
static void sweep(const Rows *r, const uint32_t *spans, size_t n_spans, const uint32_t *points, size_t n_points,
                  uint32_t *stack, int64_t *out) {
    size_t next = 0, depth = 0;
    for (size_t p = 0; p < n_points; p++) {
        uint32_t a = points[p];
        if (p == 0 || !same_thread(r, a, points[p - 1])) depth = 0;
        /* spans of earlier threads, and of this thread that started by the point, join the stack */
        while (next < n_spans && (r->pid[spans[next]] < r->pid[a]
                                  || (r->pid[spans[next]] == r->pid[a] && r->tid[spans[next]] < r->tid[a])))
            next++;
        while (next < n_spans && same_thread(r, spans[next], a) && r->ts[spans[next]] <= r->ts[a])
            stack[depth++] = spans[next++];
        /* a span that ended by the point's start holds no later point of the thread either */
        size_t kept = 0;
        for (size_t s = 0; s < depth; s++)
            if (r->end[stack[s]] > r->ts[a]) stack[kept++] = stack[s];
        depth = kept;
        int64_t module = -1, function = -1, inner = -1, outer = -1, outer_ns = -1;
        int64_t after_function[2] = {-1, -1}, after_module[2] = {-1, -1};
        int64_t at = r->ts[a], at_end = r->end[a], op_id = r->op_id[a], op_end = r->op_end[a];
        for (size_t s = 0; s < depth; s++) {
            uint32_t e = stack[s];
            uint8_t f = r->flags[e];
            if (r->end[e] < at_end) continue;
            if (op_id >= 0 && r->ts[e] >= at && r->end[e] <= op_end && !(f & FRAME) && r->id[e] >= op_id) continue;
            int64_t id = r->id[e];
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
        int64_t row[N_OUT] = {r->id[a], module, function, inner, outer, inside ? inside[0] : outer,
                              inside ? inside[1] : outer_ns};
        for (int c = 0; c < N_OUT; c++) out[(size_t)c * n_points + p] = row[c];
    }
}

/* ------------------------------------------------------------------ the rows, from an Arrow C stream */

/* the columns held_spans.sql gives, in its order: flags (uint8), then int64s */
enum { N_COLUMNS = N_IN + 1 };

typedef struct {
    uint8_t *flags;
    int64_t *col[N_IN];
    size_t rows, capacity;
} Owned;

static void free_owned(Owned *o) {
    free(o->flags);
    for (int c = 0; c < N_IN; c++) free(o->col[c]);
}

static int grow(Owned *o, size_t rows) {
    if (rows <= o->capacity) return 1;
    size_t capacity = o->capacity ? o->capacity : 1 << 16;
    while (capacity < rows) capacity *= 2;
    uint8_t *flags = realloc(o->flags, capacity);
    if (!flags) return 0;
    o->flags = flags;
    for (int c = 0; c < N_IN; c++) {
        int64_t *col = realloc(o->col[c], capacity * sizeof *col);
        if (!col) return 0;
        o->col[c] = col;
    }
    o->capacity = capacity;
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

/* one batch's rows appended; NULL, or what is wrong with it */
static const char *append_batch(Owned *o, const struct ArrowArray *batch) {
    if (batch->n_children != N_COLUMNS || batch->null_count != 0) return "a batch that is not held_spans.sql's";
    size_t n = (size_t)batch->length;
    if (batch->length < 0 || batch->offset < 0 || o->rows + n >= UINT32_MAX) return "more rows than the sweep holds";
    for (int c = 0; c < N_COLUMNS; c++) {
        const struct ArrowArray *child = batch->children[c];
        if (child->null_count != 0) return "a NULL in held_spans.sql's columns";
        if (child->offset < 0 || child->length < batch->offset + batch->length)
            return "a column shorter than its batch";
        if (n && (child->n_buffers < 2 || !child->buffers[1])) return "a column without its values";
    }
    if (!grow(o, o->rows + n)) return "out of memory";
    for (int c = 0; c < N_COLUMNS && n; c++) {
        const struct ArrowArray *child = batch->children[c];
        size_t first = (size_t)(batch->offset + child->offset);
        if (c == 0) memcpy(o->flags + o->rows, (const uint8_t *)child->buffers[1] + first, n);
        else memcpy(o->col[c - 1] + o->rows, (const int64_t *)child->buffers[1] + first, n * sizeof(int64_t));
    }
    o->rows += n;
    return NULL;
}

/* every row of the stream, which it then releases; NULL, or what went wrong */
static const char *read_stream(struct ArrowArrayStream *stream, Owned *o) {
    const char *problem = check_schema(stream);
    while (!problem) {
        struct ArrowArray batch = {0};
        if (stream->get_next(stream, &batch) != 0) {
            problem = "the stream failed";
            break;
        }
        if (!batch.release) break; /* the end */
        problem = append_batch(o, &batch);
        batch.release(&batch);
    }
    stream->release(stream);
    return problem;
}

/* ------------------------------------------------------------------ Python */

static PyObject *hold(PyObject *self, PyObject *capsule) {
    (void)self;
    struct ArrowArrayStream *stream = PyCapsule_GetPointer(capsule, "arrow_array_stream");
    if (!stream) return NULL;
    if (!stream->release) return PyErr_Format(PyExc_ValueError, "hold: the stream was already read");
    Owned o = {0};
    const char *problem = read_stream(stream, &o); /* with the GIL: the stream runs DuckDB's query */
    if (problem) {
        free_owned(&o);
        return strcmp(problem, "out of memory") == 0 ? PyErr_NoMemory()
                                                     : PyErr_Format(PyExc_ValueError, "hold: %s", problem);
    }
    Rows r = {o.flags, o.col[0], o.col[1], o.col[2], o.col[3], o.col[4], o.col[5], o.col[6]};
    size_t n = o.rows, n_points = 0;
    for (size_t i = 0; i < n; i++) n_points += (r.flags[i] & POINT) != 0;
    size_t n_spans = n - n_points;
    uint32_t *spans = malloc((n_spans ? n_spans : 1) * sizeof *spans);
    uint32_t *points = malloc((n_points ? n_points : 1) * sizeof *points);
    uint32_t *stack = malloc((n_spans ? n_spans : 1) * sizeof *stack);
    PyObject *held = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(N_OUT * n_points * sizeof(int64_t)));
    int ok = spans && points && stack && held;
    if (ok) {
        int64_t *out = (int64_t *)PyBytes_AS_STRING(held);
        Py_BEGIN_ALLOW_THREADS
        size_t s = 0, p = 0;
        for (size_t i = 0; i < n; i++) {
            if (r.flags[i] & POINT) points[p++] = (uint32_t)i;
            else spans[s++] = (uint32_t)i;
        }
        ok = sort_rows(&r, spans, n_spans) && sort_rows(&r, points, n_points);
        if (ok) sweep(&r, spans, n_spans, points, n_points, stack, out);
        Py_END_ALLOW_THREADS
    }
    PyObject *result = ok ? Py_BuildValue("(nO)", (Py_ssize_t)n_points, held) : held ? PyErr_NoMemory() : NULL;
    Py_XDECREF(held);
    free(spans);
    free(points);
    free(stack);
    free_owned(&o);
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
