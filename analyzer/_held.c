/* _held.c: which spans hold each launch point (or CPU operator) of a trace, for held.py: the work of
 * held_by_sql.sql's range join, by a sweep of each thread's spans in nesting order.
 *
 * hold(points, spans) reads two Arrow C streams of held_spans.sql's two statements: the points (a capsule: pid, tid,
 * ts, end, id, op_id, op_end, all int64), then the spans (a callable that gives the capsule, called once the points
 * are read: flags as uint8, then pid, tid, ts, end, id as int64). A span's
 * flags say which of the attribution's kinds it is (MODULE: a module scope or a call scope with its module folded in;
 * FUNCTION: a call scope; OP: an operator; NAMESPACED: an operator whose name has a namespace; FRAME: a Python
 * frame); a point's span is [ts, end), and for a CPU operator its own id and end are op_id, op_end (op_id -1 for a
 * launch point; event ids are positions, never negative). A span holds a point where they share the thread, ts <=
 * point's ts, point's end <= end, and, for an operator's point, the span is not the operator nor an identical span
 * later in the trace (attribution.sql's rule). Spans nest in attribution.sql's order: an earlier start, then a later
 * end, then a frame before an operator, then a lower id. The streams are read with the GIL held (they run DuckDB's
 * queries); the sorts and the sweep run without it.
 * It returns (points, held): points the number of points, held one bytes object of 7 int64 columns of that many
 * rows each: the point's id, then the ids of its innermost module and call scope, its innermost and outermost
 * operator, and the outermost operator inside its innermost call scope (else inside its innermost module scope, else
 * of all) and the same of those with a namespace; -1 for none.
 *
 * The rows are held apart by kind, each (pid, tid) pair as a number: 29 bytes a span and 45 a point. The points are
 * read and sorted first, so that a span in which no point of its thread starts is dropped as it is read: it holds
 * none (the sweep would drop it unread), and most operators are leaves that hold no launch (on a 1 GB trace the
 * spans held beside DuckDB's own memory were most of what put the load's peak over 1.25x the JSON).
 *
 * Exact for any spans, nested or not: a point reads every span that started before it and has not ended, in nesting
 * order, which is the rows the range join made (dead spans are dropped as the sweep passes their end); each open span
 * keeps what it and those below it give, so a point reads afresh only the spans that may not hold it, on top.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "held_rows.h"

enum { N_OUT = 7 };

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
    uint32_t *tmp = pages_realloc(NULL, (n ? n : 1) * sizeof *tmp);
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
    pages_free(tmp);
    return 1;
}

/* what the spans that hold a point give, read in nesting order: the innermost module and call scope, the innermost
 * and outermost operator, and the outermost operator (and the same with a namespace) after the innermost call scope
 * and after the innermost module scope; -1 for none */
typedef struct {
    int64_t module, function, inner, outer, outer_ns, after_function[2], after_module[2];
} Found;

static const Found NOTHING = {-1, -1, -1, -1, -1, {-1, -1}, {-1, -1}};

static void take(Found *f, int64_t id, uint8_t flags) {
    if (flags & MODULE) f->module = id, f->after_module[0] = f->after_module[1] = -1;
    if (flags & FUNCTION) f->function = id, f->after_function[0] = f->after_function[1] = -1;
    if (flags & OP) {
        f->inner = id;
        if (f->outer < 0) f->outer = id;
        if (f->after_module[0] < 0) f->after_module[0] = id;
        if (f->after_function[0] < 0) f->after_function[0] = id;
    }
    if (flags & NAMESPACED) {
        if (f->outer_ns < 0) f->outer_ns = id;
        if (f->after_module[1] < 0) f->after_module[1] = id;
        if (f->after_function[1] < 0) f->after_function[1] = id;
    }
}

/* an open span of the sweep's stack, with what it and those below it give (read in that order) and their least end:
 * a point reads the stack's spans from the first that may not hold it, not from the bottom (spans nested 10^6 deep
 * cost each point 10^6 reads, ~8 ns each) */
typedef struct {
    uint32_t span;
    int64_t least_end;
    Found found;
} Open;

/* stack[i]'s span is `span`: what it and those below give */
static void open_at(Open *stack, size_t i, const Rows *s, uint32_t span) {
    stack[i].span = span;
    stack[i].found = i ? stack[i - 1].found : NOTHING;
    stack[i].least_end = i && stack[i - 1].least_end < s->end[span] ? stack[i - 1].least_end : s->end[span];
    take(&stack[i].found, s->id[span], s->flags[span]);
}

/* the sweep: spans (s, sorted by `spans`) and points (p, sorted by `points`) of all threads; out: N_OUT columns of
 * n_points rows; stack: the spans open at once, in nesting order (grown as needed); 0 where memory ran out */
static int sweep(const Rows *s, const uint32_t *spans, const Rows *p, const uint32_t *points, int64_t *out) {
    size_t n_spans = s->rows, n_points = p->rows, next = 0, depth = 0, room = 1024;
    Open *stack = malloc(room * sizeof *stack);
    if (!stack) return 0;
    for (size_t k = 0; k < n_points; k++) {
        uint32_t a = points[k], thread = p->thread[a];
        int64_t at = p->ts[a], at_end = p->end[a], op_id = p->op_id[a], op_end = p->op_end[a];
        if (k == 0 || thread != p->thread[points[k - 1]]) depth = 0;
        /* spans of earlier threads, and of this thread that started by the point, join the stack */
        while (next < n_spans && s->thread[spans[next]] < thread) next++;
        while (next < n_spans && s->thread[spans[next]] == thread && s->ts[spans[next]] <= at) {
            if (depth == room) {
                Open *grown = realloc(stack, 2 * room * sizeof *stack);
                if (!grown) {
                    free(stack);
                    return 0;
                }
                stack = grown, room *= 2;
            }
            open_at(stack, depth++, s, spans[next++]);
        }
        /* a span that ended by the point's start holds no later point of the thread either: those from the first
         * below which every span outlasts the start (least_end falls as the stack rises) are read again */
        if (depth && stack[depth - 1].least_end <= at) {
            size_t lo = 0, hi = depth - 1;
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (stack[mid].least_end <= at) hi = mid;
                else lo = mid + 1;
            }
            size_t kept = lo;
            for (size_t i = lo; i < depth; i++)
                if (s->end[stack[i].span] > at) open_at(stack, kept++, s, stack[i].span);
            depth = kept;
        }
        /* the stack's starts rise with it, so only the spans on top that start with the point may be the operator's
         * own (or one it holds); below them none ends before the point unless the least end says so, and then every
         * span is read */
        size_t from = depth;
        while (from && s->ts[stack[from - 1].span] >= at) from--;
        if (from && stack[from - 1].least_end < at_end) from = 0;
        Found f = from ? stack[from - 1].found : NOTHING;
        for (size_t i = from; i < depth; i++) {
            uint32_t e = stack[i].span;
            uint8_t flags = s->flags[e];
            if (s->end[e] < at_end) continue;
            if (op_id >= 0 && s->ts[e] >= at && s->end[e] <= op_end && !(flags & FRAME) && s->id[e] >= op_id) continue;
            take(&f, s->id[e], flags);
        }
        const int64_t *inside = f.function >= 0 ? f.after_function : f.module >= 0 ? f.after_module : NULL;
        int64_t row[N_OUT] = {p->id[a], f.module, f.function, f.inner, f.outer, inside ? inside[0] : f.outer,
                              inside ? inside[1] : f.outer_ns};
        for (int c = 0; c < N_OUT; c++) out[(size_t)c * n_points + k] = row[c];
    }
    free(stack);
    return 1;
}

/* ------------------------------------------------------------------ Python */

static struct ArrowArrayStream *stream_of(PyObject *capsule) {
    struct ArrowArrayStream *stream = PyCapsule_GetPointer(capsule, "arrow_array_stream");
    if (stream && !stream->release) PyErr_Format(PyExc_ValueError, "hold: the stream was already read");
    return stream && stream->release ? stream : NULL;
}

/* 0..n-1 sorted by `before`, without the GIL; NULL where memory ran out */
static uint32_t *sorted(const Rows *r) {
    uint32_t *idx = pages_realloc(NULL, (r->rows ? r->rows : 1) * sizeof *idx);
    int ok = idx != NULL;
    Py_BEGIN_ALLOW_THREADS
    for (size_t i = 0; ok && i < r->rows; i++) idx[i] = (uint32_t)i;
    ok = ok && sort_rows(r, idx, r->rows);
    Py_END_ALLOW_THREADS
    if (!ok) pages_free(idx);
    return ok ? idx : NULL;
}

/* the spans' stream, asked for once the points' is read (a connection runs one query at a time) and read */
static const char *read_spans(PyObject *ask, Rows *s, Threads *t, Starts *x) {
    PyObject *capsule = PyObject_CallNoArgs(ask);
    struct ArrowArrayStream *stream = capsule ? stream_of(capsule) : NULL;
    const char *problem = stream ? read_stream(stream, s, t, x) : "";
    Py_XDECREF(capsule);
    return problem;
}

static PyObject *hold(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *point_capsule, *ask_spans;
    if (!PyArg_ParseTuple(args, "OO:hold", &point_capsule, &ask_spans)) return NULL;
    struct ArrowArrayStream *point_stream = stream_of(point_capsule);
    if (!point_stream) return NULL;
    Rows s = {0}, p = {0};
    Threads t = {0};
    Starts x = {0};
    uint32_t *spans = NULL, *points = NULL;
    PyObject *held = NULL, *result = NULL;
    const char *problem = read_stream(point_stream, &p, &t, NULL);
    if (!problem && !((points = sorted(&p)) && index_starts(&x, &p, points, t.count))) problem = "out of memory";
    if (!problem) problem = read_spans(ask_spans, &s, &t, &x);
    pages_free(x.ts);
    free(x.first);
    free(x.cursor);
    free(t.keys);
    free(t.numbers);
    if (!problem && !(spans = sorted(&s))) problem = "out of memory";
    if (!problem && !(held = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(N_OUT * p.rows * sizeof(int64_t)))))
        problem = "";
    if (!problem) {
        int ok;
        Py_BEGIN_ALLOW_THREADS
        ok = sweep(&s, spans, &p, points, (int64_t *)PyBytes_AS_STRING(held));
        Py_END_ALLOW_THREADS
        result = ok ? Py_BuildValue("(nO)", (Py_ssize_t)p.rows, held) : PyErr_NoMemory();
    } else if (strcmp(problem, "out of memory") == 0) {
        PyErr_NoMemory();
    } else if (*problem) { /* else Python's error is set */
        PyErr_Format(PyExc_ValueError, "hold: %s", problem);
    }
    Py_XDECREF(held);
    pages_free(spans);
    pages_free(points);
    free_rows(&s);
    free_rows(&p);
    return result;
}

static PyMethodDef methods[] = {
    {"hold", hold, METH_VARARGS,
     "hold(points, spans) -> (points, 7 int64 columns of that many rows as bytes): the spans that hold each point; "
     "points an Arrow C stream capsule of held_spans.sql's first statement, spans a callable giving its second's "
     "(see _held.c)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_held", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__held(void) { return PyModule_Create(&module); }
