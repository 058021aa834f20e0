/* _kineto.c: a reader for the common form of a Kineto traceEvents array, for ingest.py.
 *
 * scan(buffer, first_id, bare) reads a JSON array of trace events (one part) into the columns of the
 * `events` table (events.sql) and returns them as an Arrow C stream capsule, which DuckDB inserts without a
 * copy through Python. It gives exactly the rows that ingest.sql gives with DuckDB's JSON reader, and for
 * that it reads only what it can reproduce exactly: on anything else (a \u escape, a byte outside ASCII, a
 * number that DuckDB would rewrite, a duplicate key, JSON that is not valid…) it returns a sentence that
 * says what it met, and ingest.py loads that part with ingest.sql instead. The scan runs without the GIL,
 * so parts scan in parallel. It also counts the rows that break validate.sql's rules 1-7, so that validate.sql
 * need not pass over every event when no part has one, and, when asked, says whether the part holds the repeats
 * validate_repeats.sql looks for, with the keys of its launches and device events (as hashes) where it holds none, so
 * that repeated_across can tell whether two parts share one: a trace read in any number of parts then needs that
 * query only where a key is shared.
 *
 * What ingest.sql gives, and so what this file gives (tests/test_native_reader.py compares both):
 *  - ph, cat, name: the string, escapes decoded; missing or null: NULL. Kept as dictionaries.
 *  - pid, tid: an integer's value; a string (a name, "Spans", or digits, the 2021 format's "1441273664"): NULL, and
 *    the string, escapes decoded, in pid_name, tid_name (kept as dictionaries; NULL where pid, tid is not a string);
 *    missing or null: NULL. (ingest_scanned.sql then reads an integer's text as that integer, and gives every
 *    other name a key no integer of the trace uses.)
 *  - ts, dur: integer nanoseconds of a decimal with at most 3 fraction digits (epoch microseconds too); missing
 *    or null: NULL.
 *  - args: the object written compact, as DuckDB's JSON writer does (no whitespace, "\/" as "/", the
 *    fraction's trailing zeros dropped); missing or null: NULL. An "args" key in it (Perfetto's JSON export nests
 *    every event's args in one, which ingest.sql reads as the event's args) leaves the part to DuckDB.
 *  - correlation, "External id", device, stream: an integer's value at the top of args, or a hexadecimal string's
 *    ("0x0": roctracer's streams) as DuckDB casts it; else NULL. external_id
 *    is "external id"'s (the 2021 format's) where "External id" is missing or null.
 *  - cat: the 2021 format's categories by their later names (modernize_categories).
 *  - flow_id: a flow event's (ph "s", "t", "f") "id": an integer's value, or a string's of an integer's digits alone;
 *    NULL on other events (keep_flow_ids) and for other strings.
 *
 * One translation unit, in parts included below in order, each named for what it holds: the scan's hot path is
 * small inline functions that the compiler must see together. Here: the mapped file's SIGBUS guard and Python's glue.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "arrow_c.h"
/* the maps a load's parts free are kept for its next parts (pages.h): a part writes about its own size to ~20 arrays */
#define PAGES_KEPT 64
#include "pages.h"

#define ARROW_FLAG_NULLABLE 2

#include "kineto_buffers.h"
#include "kineto_strings.h"
#include "kineto_values.h"
#include "kineto_events.h"
#include "kineto_arrow.h"
#include "kineto_part_facts.h"
#include "kineto_repeats.h"

/* ------------------------------------------------------------------ a mapped file that shrinks */

/* A part of a plain trace is a range of the file mapped into memory (ingest.py reads it in place: no copy). Should the
 * file be truncated while it is read, touching a page past its new end raises SIGBUS, which would kill the process
 * without a word: the scan of a part catches it (the signal goes to the thread that faults, so the thread's own
 * jump), and scan() raises OSError instead. A SIGBUS outside a scan goes where it went before. */
static __thread sigjmp_buf *bus_jump;
static struct sigaction previous_bus;

static void on_bus(int signal, siginfo_t *info, void *context) {
    if (bus_jump) siglongjmp(*bus_jump, 1);
    if ((previous_bus.sa_flags & SA_SIGINFO) && previous_bus.sa_sigaction) {
        previous_bus.sa_sigaction(signal, info, context);
    } else if (!(previous_bus.sa_flags & SA_SIGINFO) && previous_bus.sa_handler != SIG_DFL &&
               previous_bus.sa_handler != SIG_IGN) {
        previous_bus.sa_handler(signal);
    } else {
        sigaction(SIGBUS, &previous_bus, NULL); /* the fault recurs on return, with the action it had */
    }
}

static void catch_bus_errors(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_bus;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, &previous_bus);
}

/* scan_array, or -1 when the buffer's pages went away under it (SIGBUS). */
static int scan_array_guarded(Scan *s, int64_t first_id, int bare) {
    sigjmp_buf jump;
    volatile int ok = -1;
    if (sigsetjmp(jump, 1) == 0) {
        bus_jump = &jump;
        ok = scan_array(s, first_id, bare);
    }
    bus_jump = NULL;
    return ok;
}

/* ------------------------------------------------------------------ Python */

static PyObject *scan(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    long long first_id;
    int bare = 0, want_repeats = 0;
    if (!PyArg_ParseTuple(args, "y*L|pp", &view, &first_id, &bare, &want_repeats)) return NULL;
    Scan *s = calloc(1, sizeof *s);
    if (!s) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    s->start = s->p = view.buf;
    s->end = s->p + view.len;
    for (int c = 0; c < N_COLUMNS; c++) s->columns[c].width = (c == DEVICE || c == STREAM) ? 4 : 8;
    for (int d = 0; d < N_DICTIONARIES; d++) s->dictionaries[d].indices.width = 4;
    int ok;
    int64_t broken = -1; /* -1: out of memory */
    int repeats = -2;    /* -2: not asked for; -1: out of memory */
    int facts = 0;
    Bytes keys = {0};
    Py_BEGIN_ALLOW_THREADS
    ok = scan_array_guarded(s, first_id, bare);
    if (ok == 1 && modernize_categories(s) && complete_instants(s) && keep_flow_ids(s) && streams_from_tids(s)) {
        broken = rows_breaking_rules(s);
        if (want_repeats && broken >= 0) repeats = has_repeats(s, &keys);
        facts = part_facts(s);
    }
    Py_END_ALLOW_THREADS
    PyObject *result;
    if (ok < 0) {
        result = PyErr_Format(PyExc_OSError, "the buffer's pages went away while it was read (a mapped file truncated)");
    } else if (!ok) {
        if (!s->problem) s->problem = "invalid JSON", s->problem_at = s->p;
        int out_of_memory = strcmp(s->problem, "out of memory") == 0;
        result = out_of_memory ? PyErr_NoMemory()
                               : Py_BuildValue("(Osn)", Py_None, s->problem, (Py_ssize_t)(s->problem_at - s->start));
    } else if (broken < 0 || repeats == -1) {
        result = PyErr_NoMemory();
    } else {
        struct ArrowArrayStream *stream = export_stream(s);
        PyObject *capsule = stream ? PyCapsule_New(stream, "arrow_array_stream", capsule_destructor) : NULL;
        if (!capsule) {
            if (stream) {
                stream->release(stream);
                free(stream);
            }
            result = stream ? NULL : PyErr_NoMemory();
        } else {
            PyObject *repeated = repeats == -2 ? Py_None : repeats ? Py_True : Py_False;
            PyObject *key_bytes = repeats == 0 ? PyBytes_FromStringAndSize(keys.data, (Py_ssize_t)keys.size) : Py_None;
            if (repeats == 0 && !key_bytes) Py_DECREF(capsule); /* its destructor releases the stream */
            result = !key_bytes ? NULL
                                : Py_BuildValue("(LNLOOi)", (long long)s->rows, capsule, (long long)broken, repeated,
                                                key_bytes, facts);
            if (repeats == 0) Py_XDECREF(key_bytes);
        }
    }
    free(keys.data);
    free_scan(s);
    free(s);
    PyBuffer_Release(&view);
    return result;
}

/* repeated_across(keys): whether two parts share a key, from the keys scan gave each part (a hash found twice: where
 * it is, validate_repeats.sql settles whether the keys themselves are the same). */
static PyObject *repeated_across(PyObject *self, PyObject *arg) {
    (void)self;
    PyObject *parts = PySequence_Tuple(arg);
    if (!parts) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(parts), held = 0;
    Py_buffer *views = calloc((size_t)n + 1, sizeof *views);
    const char **values = calloc((size_t)n + 1, sizeof *values);
    size_t *counts = calloc((size_t)n + 1, sizeof *counts);
    PyObject *result = NULL;
    if (!views || !values || !counts) {
        PyErr_NoMemory();
        goto done;
    }
    for (; held < n; held++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(parts, held), &views[held], PyBUF_SIMPLE) != 0) goto done;
        if (views[held].len % (Py_ssize_t)sizeof(uint64_t)) {
            held++;
            PyErr_Format(PyExc_ValueError, "repeated_across: keys of %zd bytes, not a whole number of keys",
                         views[held - 1].len);
            goto done;
        }
        values[held] = views[held].buf;
        counts[held] = (size_t)views[held].len / sizeof(uint64_t);
    }
    int twice;
    Py_BEGIN_ALLOW_THREADS
    twice = any_twice(values, counts, (size_t)n);
    Py_END_ALLOW_THREADS
    result = twice < 0 ? PyErr_NoMemory() : PyBool_FromLong(twice);
done:
    for (Py_ssize_t i = 0; i < held; i++) PyBuffer_Release(&views[i]);
    free(views);
    free(values);
    free(counts);
    Py_DECREF(parts);
    return result;
}

/* keep_pages(on): a load starts (True) or stops (False) keeping the maps its parts' arrays free for its next ones */
static PyObject *keep_pages(PyObject *self, PyObject *arg) {
    (void)self;
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    if (on)
        pages_start_keeping();
    else
        pages_stop_keeping();
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"keep_pages", keep_pages, METH_O,
     "keep_pages(on) -> None: a load starts (True) or stops (False) keeping the maps its parts' arrays free, to give "
     "them to its next parts' arrays (fresh pages cost a fault and their zeroing each); the last to stop unmaps them."},
    {"repeated_across", repeated_across, METH_O,
     "repeated_across(keys) -> whether a key occurs twice among the parts' keys (each the last item of scan's result "
     "with repeats=True, where the part held no repeat): then validate_repeats.sql is to settle it."},
    {"scan", scan, METH_VARARGS,
     "scan(buffer, first_id, bare=False, repeats=False) -> (rows, arrow_array_stream capsule, rows breaking "
     "validate.sql's rules 1-7, whether the part holds what validate_repeats.sql looks for (None unless repeats), the "
     "keys of its launches and device events as bytes for repeated_across (None unless it holds none), its facts: "
     "1 a device event or launching call, 2 a python_function event, 4 a name holding '%', 8 a launch of another "
     "runtime than CUDA's, 16 a pid or tid written as a string), "
     "or (None, problem, offset) for "
     "a part this reader leaves to DuckDB's JSON reader. The buffer holds a JSON array of events or, with bare, "
     "the events alone ({...}, {...})."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kineto", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__kineto(void) {
    for (int c = 0x20; c < 0x80; c++) PLAIN[c] = c != '"' && c != '\\';
    SPACE[' '] = SPACE['\n'] = SPACE['\r'] = SPACE['\t'] = 1;
    init_quoted_event_keys();
    catch_bus_errors();
    return PyModule_Create(&module);
}
