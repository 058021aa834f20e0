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
 * One file, longer than the project's modules: the scan's hot path is small inline functions that the
 * compiler must see together, and the Arrow export below it is the scan's only output.
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

/* ------------------------------------------------------------------ buffers */

/* A growing buffer, for what is rare or small: the dictionaries' strings and a decoded string. */
typedef struct {
    char *data;
    size_t size, capacity;
    int failed;
} Bytes;

static int bytes_reserve(Bytes *b, size_t more) {
    if (b->size + more <= b->capacity) return 1;
    size_t capacity = b->capacity ? b->capacity : 4096;
    while (capacity < b->size + more) capacity *= 2;
    char *data = realloc(b->data, capacity);
    if (!data) {
        b->failed = 1;
        return 0;
    }
    b->data = data;
    b->capacity = capacity;
    return 1;
}

static inline int bytes_append(Bytes *b, const void *src, size_t n) {
    if (n == 0) return 1; /* src may be NULL then, which memcpy must not be given */
    if (!bytes_reserve(b, n)) return 0;
    memcpy(b->data + b->size, src, n);
    b->size += n;
    return 1;
}

static inline int bytes_put(Bytes *b, char c) {
    if (b->size == b->capacity && !bytes_reserve(b, 1)) return 0;
    b->data[b->size++] = c;
    return 1;
}

/* A nullable column of fixed-width values and its validity bitmap. Every column has room for the same number
 * of rows (Scan.row_capacity), checked once an event, so setting a row is a plain store; the bitmap is zeroed
 * as it grows, so a row only sets its bit (the nulls are counted once, at the end). */
typedef struct {
    void *values; /* width bytes a row; none when width is 0 (a bitmap alone) */
    uint8_t *valid;
    int width;
} Column;

/* Ask for transparent huge pages on a large buffer: its first touch then faults once per huge page, not once per
 * small one (a trace writes about its own size to these buffers, so the faults were a large share of the ingest). */
static void advise_huge(void *data, size_t size) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (size < (8u << 20)) return;
    uintptr_t start = ((uintptr_t)data + 4095) & ~(uintptr_t)4095, end = ((uintptr_t)data + size) & ~(uintptr_t)4095;
    if (end > start) madvise((void *)start, end - start, MADV_HUGEPAGE);
#else
    (void)data;
    (void)size;
#endif
}

/* a column's values and bitmap grow in pages of their own (pages.h: glibc's heap kept the old copies of a part's
 * columns, and the parts' freed columns, as memory the process held through the rest of the load) */
static int column_grow(Column *c, int64_t old_rows, int64_t rows) {
    if (c->width) {
        void *values = pages_realloc(c->values, (size_t)rows * (size_t)c->width);
        if (!values) return 0;
        c->values = values;
        advise_huge(values, (size_t)rows * (size_t)c->width);
    }
    size_t old_bytes = (size_t)(old_rows + 7) / 8, bytes = (size_t)(rows + 7) / 8;
    uint8_t *valid = pages_realloc(c->valid, bytes);
    if (!valid) return 0;
    memset(valid + old_bytes, 0, bytes - old_bytes);
    c->valid = valid;
    return 1;
}

/* present is 0 or 1; an absent row's value is 0. */
static inline void column_set_valid(Column *c, int64_t row, int present) {
    c->valid[row >> 3] |= (uint8_t)(present << (row & 7));
}

/* The rows of the first rows that are null (the bits past them are 0). */
static int64_t column_nulls(const Column *c, int64_t rows) {
    int64_t valid = 0;
    size_t bytes = (size_t)(rows + 7) / 8, i = 0;
#if defined(__GNUC__)
    for (; i + 8 <= bytes; i += 8) {
        uint64_t word;
        memcpy(&word, c->valid + i, 8);
        valid += __builtin_popcountll(word);
    }
#endif
    for (; i < bytes; i++) {
        for (unsigned byte = c->valid[i]; byte; byte &= byte - 1) valid++;
    }
    return rows - valid;
}

static inline void column_set64(Column *c, int64_t row, int64_t value, int present) {
    column_set_valid(c, row, present);
    ((int64_t *)c->values)[row] = present ? value : 0;
}

static inline void column_set32(Column *c, int64_t row, int64_t value, int present) {
    column_set_valid(c, row, present);
    ((int32_t *)c->values)[row] = present ? (int32_t)value : 0;
}

/* A dictionary of distinct strings (open addressing) and a column of int32 indices into it. */
typedef struct {
    Bytes text;      /* the strings, one after the other */
    Bytes offsets;   /* int32 offsets into text, one more than the strings */
    int32_t *slots;  /* hash table of string index + 1; 0 is empty */
    size_t n_slots;
    int32_t count;
    int32_t last, last_offset, last_length; /* the string found last */
    Column indices;
} Dictionary;

static inline int32_t offsets_after_add(const Dictionary *d, int32_t i) { return ((const int32_t *)d->offsets.data)[i]; }

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ n;
    for (; n >= 8; s += 8, n -= 8) {
        uint64_t word;
        memcpy(&word, s, 8);
        h = (h ^ word) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 32;
    }
    /* the last 0-7 bytes as memcpy into a zeroed word gives them, but from whole loads: the byte-wise copy
     * memcpy becomes for a variable length stalled the word's load that follows it (41 % of this function) */
    uint64_t tail = 0;
    if (n >= 4) {
        uint32_t low, high;
        memcpy(&low, s, 4);
        memcpy(&high, s + n - 4, 4);
        tail = low | (uint64_t)high << ((n - 4) * 8);
    } else if (n) {
        const unsigned char *u = (const unsigned char *)s;
        tail = u[0] | (uint64_t)u[n / 2] << (n / 2 * 8) | (uint64_t)u[n - 1] << ((n - 1) * 8);
    }
    h = (h ^ tail) * 0xC4CEB9FE1A85EC53ULL;
    return h ^ (h >> 29);
}

static int dictionary_grow(Dictionary *d) {
    size_t n_slots = d->n_slots ? d->n_slots * 2 : 1024;
    int32_t *slots = calloc(n_slots, sizeof(int32_t));
    if (!slots) return 0;
    const int32_t *offsets = (const int32_t *)d->offsets.data;
    for (int32_t i = 0; i < d->count; i++) {
        uint64_t h = hash_bytes(d->text.data + offsets[i], (size_t)(offsets[i + 1] - offsets[i]));
        size_t slot = h & (n_slots - 1);
        while (slots[slot]) slot = (slot + 1) & (n_slots - 1);
        slots[slot] = i + 1;
    }
    free(d->slots);
    d->slots = slots;
    d->n_slots = n_slots;
    return 1;
}

/* Index of the string s[0:n] in d, added if new; -1 when out of memory or past int32 offsets. */
static int32_t dictionary_index(Dictionary *d, const char *s, size_t n) {
    if (d->count > 0 && (size_t)d->last_length == n && (n == 0 || memcmp(d->text.data + d->last_offset, s, n) == 0))
        return d->last; /* the same as the event before: most events of a stretch share ph and cat */
    if ((size_t)(d->count + 1) * 2 > d->n_slots && !dictionary_grow(d)) return -1;
    if (d->count == 0 && d->offsets.size == 0) {
        int32_t zero = 0;
        /* text is allocated from the first string on, so that text.data + an offset is never NULL + 0 */
        if (!bytes_append(&d->offsets, &zero, 4) || !bytes_reserve(&d->text, 1)) return -1;
    }
    uint64_t h = hash_bytes(s, n);
    size_t slot = h & (d->n_slots - 1);
    const int32_t *offsets = (const int32_t *)d->offsets.data;
    while (d->slots[slot]) {
        int32_t i = d->slots[slot] - 1;
        if ((size_t)(offsets[i + 1] - offsets[i]) == n && memcmp(d->text.data + offsets[i], s, n) == 0) {
            d->last = i;
            d->last_offset = offsets[i];
            d->last_length = (int32_t)n;
            return i;
        }
        slot = (slot + 1) & (d->n_slots - 1);
    }
    if (d->text.size + n > INT32_MAX) return -1;
    if (!bytes_append(&d->text, s, n)) return -1;
    int32_t end = (int32_t)d->text.size;
    if (!bytes_append(&d->offsets, &end, 4)) return -1;
    d->slots[slot] = d->count + 1;
    d->last = d->count;
    d->last_offset = offsets_after_add(d, d->count);
    d->last_length = (int32_t)n;
    return d->count++;
}

/* ------------------------------------------------------------------ the scan */

enum { PH, CAT, NAME, PID_NAME, TID_NAME, N_DICTIONARIES };
enum { EVENT_ID, PID, TID, TS_NS, DUR_NS, CORRELATION, EXTERNAL_ID, DEVICE, STREAM, FLOW_ID, N_COLUMNS };

/* args go into one buffer with room for the whole input, because args written compact are never longer than
 * their text: each byte written stands for a byte read before it (whitespace is dropped, "\/" becomes "/",
 * a fraction's trailing zeros are dropped). So the write position never passes the read position (relative to
 * each buffer's start), and writes need no room check. Some copies store a whole word (up to ARGS_OVERRUN
 * bytes) past what they keep, but only where the input has as many bytes left, so they stay inside too; the
 * slack is there for safety all the same. */
#define ARGS_OVERRUN 16

typedef struct {
    const char *p, *end, *start;
    /* A run of digits or of whitespace that starts before these stops before the end (at the last byte that
     * is not a digit, or not whitespace), so its loop needs no end check. */
    const char *digits_stop, *space_stop;
    const char *problem; /* why the part is left to DuckDB's reader; NULL while all is well */
    const char *problem_at;
    int64_t rows, row_capacity;
    int64_t ids; /* events with an "id": flow events, whose flow_id keep_flow_ids keeps */
    Dictionary dictionaries[N_DICTIONARIES];
    Column columns[N_COLUMNS];
    char *args_text;        /* room for the whole input (see ARGS_OVERRUN) */
    char *args_end;         /* where the next args go */
    int64_t *args_offsets;  /* row_capacity + 1 */
    Column args_valid;      /* a bitmap alone */
    Bytes scratch;          /* a decoded string */
} Scan;

#define FAIL(s, why)            \
    do {                        \
        if (!(s)->problem) {    \
            (s)->problem = why; \
            (s)->problem_at = (s)->p; \
        }                       \
        return 0;               \
    } while (0)

/* Room for twice the rows (at first, for a guess from the input's length: Kineto events take 100 to 300
 * bytes, so that one rarely grows). */
static int grow_rows(Scan *s) {
    int64_t old_rows = s->row_capacity;
    int64_t rows = old_rows ? old_rows * 2 : (int64_t)((s->end - s->start) / 128) + 64;
    for (int c = 0; c < N_COLUMNS; c++) {
        if (!column_grow(&s->columns[c], old_rows, rows)) return 0;
    }
    for (int d = 0; d < N_DICTIONARIES; d++) {
        if (!column_grow(&s->dictionaries[d].indices, old_rows, rows)) return 0;
    }
    if (!column_grow(&s->args_valid, old_rows, rows)) return 0;
    int64_t *offsets = pages_realloc(s->args_offsets, (size_t)(rows + 1) * sizeof(int64_t));
    if (!offsets) return 0;
    s->args_offsets = offsets;
    advise_huge(offsets, (size_t)(rows + 1) * sizeof(int64_t));
    s->row_capacity = rows;
    return 1;
}

/* Bytes that stand for themselves inside a string: printable ASCII but '"' and '\\'. */
static unsigned char PLAIN[256];
/* JSON's whitespace: ' ', '\n', '\r', '\t'. */
static unsigned char SPACE[256];

/* The bytes of a word (8 bytes) that do not stand for themselves in a string ('"', '\\', below 0x20, from
 * 0x80), each flagged by its high bit. Flags past the first flagged byte may be false (a borrow runs up from
 * it), so only the first one counts. */
static inline uint64_t special_bytes(uint64_t w) {
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t quote = w ^ (ones * '"'), backslash = w ^ (ones * '\\');
    return (((quote - ones) & ~quote) | ((backslash - ones) & ~backslash) | ((w - ones * 0x20) & ~w) | w) & highs;
}

/* Where the first flagged byte of special_bytes is, where the machine's words are little-endian and GCC's
 * count of trailing zeros is there; elsewhere the bytes are looked at one by one. */
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define FIRST_FLAGGED_BYTE(flags) ((size_t)__builtin_ctzll(flags) >> 3)
#endif

/* Where SSE2 is there (every x86-64), strings are scanned 16 bytes at a time: a mask with a bit for each byte
 * that ends the run. */
#if defined(__SSE2__) && defined(__GNUC__)
#include <emmintrin.h>
#define SCAN16 1

static inline unsigned special_mask16(const char *p) {
    __m128i x = _mm_loadu_si128((const __m128i *)p);
    __m128i quote = _mm_cmpeq_epi8(x, _mm_set1_epi8('"'));
    __m128i backslash = _mm_cmpeq_epi8(x, _mm_set1_epi8('\\'));
    __m128i control_or_high = _mm_cmplt_epi8(x, _mm_set1_epi8(0x20)); /* signed: below 0x20, or from 0x80 */
    return (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control_or_high));
}
#endif

/* The first byte at or after p (before end) that does not stand for itself in a string, many bytes at a time. */
static inline const char *plain_run(const char *p, const char *end) {
#ifdef SCAN16
    for (; end - p >= 16; p += 16) {
        unsigned special = special_mask16(p);
        if (special) return p + __builtin_ctz(special);
    }
#endif
    while (end - p >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        uint64_t special = special_bytes(w);
        if (special) {
#ifdef FIRST_FLAGGED_BYTE
            return p + FIRST_FLAGGED_BYTE(special);
#else
            break;
#endif
        }
        p += 8;
    }
    while (p < end && PLAIN[(unsigned char)*p]) p++;
    return p;
}

/* plain_run that also copies the run to *out (args_text): each block is stored whole as it is read, and *out
 * moves by what of it is the run (what is past it gets overwritten; see ARGS_OVERRUN). */
static inline const char *copy_plain_run(const char *p, const char *end, char **out) {
    char *o = *out;
#ifdef SCAN16
    for (; end - p >= 16; p += 16, o += 16) {
        memcpy(o, p, 16);
        unsigned special = special_mask16(p);
        if (special) {
            size_t n = (size_t)__builtin_ctz(special);
            *out = o + n;
            return p + n;
        }
    }
#endif
    while (end - p >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        memcpy(o, &w, 8);
        uint64_t special = special_bytes(w);
        if (special) {
#ifdef FIRST_FLAGGED_BYTE
            size_t n = FIRST_FLAGGED_BYTE(special);
            *out = o + n;
            return p + n;
#else
            break;
#endif
        }
        p += 8;
        o += 8;
    }
    while (p < end && PLAIN[(unsigned char)*p]) *o++ = *p++;
    *out = o;
    return p;
}

/* n bytes from src to o (args_text), for a few bytes: one fixed 16-byte copy (no call) where the input has 16
 * bytes from src (what is past n gets overwritten; see ARGS_OVERRUN). The position after them. */
static inline char *put_text(char *o, const char *src, size_t n, const char *src_end) {
    if (n <= 16 && src_end - src >= 16) {
        memcpy(o, src, 16);
    } else {
        memcpy(o, src, n);
    }
    return o + n;
}

static inline int is_space(char c) { return (unsigned char)c <= ' ' && SPACE[(unsigned char)c]; }

/* Past whitespace, byte by byte: the runs are short, and a loop's exit is predicted where a mask computed from
 * a block of bytes (16 at a time, say) would hold up the rest of the scan, which waits for s->p. */
static inline void skip_space(Scan *s) {
    const char *p = s->p;
    if (p < s->space_stop) {
        if (*p == ' ') p++; /* the one space after ':' or ',' */
        while (is_space(*p)) p++;
    } else {
        while (p < s->end && is_space(*p)) p++;
    }
    s->p = p;
}

/* Whether the next byte but whitespace is c; s->p at that byte. */
static inline int next_is(Scan *s, char c) {
    if (s->p < s->end && *s->p == c) return 1; /* most often no whitespace comes first */
    skip_space(s);
    return s->p < s->end && *s->p == c;
}

static inline int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Where the digits from p end, and with value, their value (wrapping past 19 digits). */
static inline const char *digits_end(const Scan *s, const char *p, uint64_t *value) {
    uint64_t v = 0;
    if (p < s->digits_stop) {
        for (; is_digit(*p); p++) v = v * 10 + (uint64_t)(*p - '0');
    } else {
        for (; p < s->end && is_digit(*p); p++) v = v * 10 + (uint64_t)(*p - '0');
    }
    if (value) *value = v;
    return p;
}

/* The byte a JSON escape \c stands for; 0 for an escape this reader leaves to DuckDB (\u) or invalid JSON. */
static inline char escape_value(char c) {
    switch (c) {
    case '"': return '"';
    case '\\': return '\\';
    case '/': return '/';
    case 'b': return '\b';
    case 'f': return '\f';
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    default: return 0;
    }
}

/* After a plain run at p: the part is left to DuckDB unless p is at an escape this reader decodes (s->p is
 * then at it). The escape's byte. */
static int string_escape(Scan *s, const char *p, char *value) {
    if (p >= s->end) {
        s->p = p;
        FAIL(s, "a string runs past the end");
    }
    if (*p != '\\') {
        s->p = p;
        FAIL(s, (unsigned char)*p >= 0x80 ? "a byte outside ASCII" : "a control character in a string");
    }
    if (p + 1 >= s->end) {
        s->p = p;
        FAIL(s, "a string runs past the end");
    }
    *value = escape_value(p[1]);
    if (!*value) {
        s->p = p;
        FAIL(s, p[1] == 'u' ? "a \\u escape" : "an invalid escape");
    }
    return 1;
}

/* A string at s->p (at its '"'), checked; its decoded bytes appended to decoded unless that is NULL. Escapes
 * other than \u are decoded; \u is left to DuckDB. */
static int read_string(Scan *s, Bytes *decoded) {
    const char *p = s->p + 1;
    for (;;) {
        const char *run = p;
        p = plain_run(p, s->end);
        if (decoded && !bytes_append(decoded, run, (size_t)(p - run))) FAIL(s, "out of memory");
        if (p < s->end && *p == '"') break;
        char value;
        if (!string_escape(s, p, &value)) return 0;
        if (decoded && !bytes_put(decoded, value)) FAIL(s, "out of memory");
        p += 2;
    }
    s->p = p + 1;
    return 1;
}

/* A string at s->p written to *out (args_text) as DuckDB writes it back: escapes kept as they are but "\/",
 * written "/". */
static int copy_string(Scan *s, char **out) {
    const char *p = s->p + 1;
    char *o = *out;
    *o++ = '"';
    for (;;) {
        p = copy_plain_run(p, s->end, &o);
        if (p < s->end && *p == '"') break;
        char value;
        if (!string_escape(s, p, &value)) return 0;
        if (value == '/') {
            *o++ = '/';
        } else {
            o[0] = '\\';
            o[1] = p[1];
            o += 2;
        }
        p += 2;
    }
    *o++ = '"';
    *out = o;
    s->p = p + 1;
    return 1;
}

typedef struct {
    const char *start;
    size_t int_digits, frac_digits; /* frac_digits without trailing zeros */
    size_t raw_frac_digits;
    uint64_t int_value; /* the value of the integer digits (meaningless past 19 of them) */
    int negative, has_fraction, has_exponent;
} Number;

/* A JSON number at s->p, checked against the grammar. Inline, so that n stays in registers. */
static inline int read_number(Scan *s, Number *n) {
    const char *p = s->p, *end = s->end;
    n->start = p;
    n->negative = p < end && *p == '-';
    p += n->negative;
    const char *digits = p;
    uint64_t value = 0;
    if (p < end && *p == '0') {
        p++;
    } else {
        p = digits_end(s, p, &value);
    }
    n->int_digits = (size_t)(p - digits);
    n->int_value = value;
    if (n->int_digits == 0) FAIL(s, "invalid JSON");
    n->has_fraction = n->has_exponent = 0;
    n->frac_digits = n->raw_frac_digits = 0;
    if (p < end && *p == '.') {
        const char *frac = ++p;
        p = digits_end(s, p, NULL);
        n->raw_frac_digits = (size_t)(p - frac);
        if (n->raw_frac_digits == 0) FAIL(s, "invalid JSON");
        n->has_fraction = 1;
        size_t kept = n->raw_frac_digits;
        while (kept > 0 && frac[kept - 1] == '0') kept--;
        n->frac_digits = kept;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        const char *exp = p;
        p = digits_end(s, p, NULL);
        if (p == exp) FAIL(s, "invalid JSON");
        n->has_exponent = 1;
    }
    s->p = p;
    return 1;
}

/* The value of an integer Number that fits int64; 0 if it does not fit or is not an integer. */
static int integer_value(const Number *n, int64_t *out) {
    if (n->has_fraction || n->has_exponent || n->int_digits > 18) return 0;
    int64_t v = (int64_t)n->int_value;
    *out = n->negative ? -v : v;
    return 1;
}

/* Whether the decimal text of n (up to s->p) is the shortest form of the double it reads as, and the closest
 * of that length: what a shortest round-trip writer (DuckDB's, Kineto's) prints for that double. The text is
 * not NUL-terminated (it may end the buffer), so strtod reads a copy: its significant digits and exponent,
 * which name the same decimal value. */
static int shortest_form(Scan *s, const Number *n) {
    char digits[32], buffer[48];
    size_t k = 0;
    int leading = 1;
    long exponent = 0; /* of the first significant digit */
    long position = (long)n->int_digits - 1; /* the power of ten of the digit at p */
    for (const char *p = n->start + n->negative; p < s->p; p++) {
        if (*p == '.') continue;
        if (leading && *p == '0') {
            position--;
            continue;
        }
        if (leading) exponent = position;
        leading = 0;
        if (k == sizeof digits) return 0;
        digits[k++] = *p;
        position--;
    }
    while (k > 0 && digits[k - 1] == '0') k--;
    if (k == 0 || k > 17) return 0;
    size_t length = 0;
    buffer[length++] = digits[0];
    buffer[length++] = '.';
    memcpy(buffer + length, digits + 1, k - 1);
    length += k - 1;
    snprintf(buffer + length, sizeof buffer - length, "e%ld", exponent);
    double value = strtod(buffer, NULL);
    snprintf(buffer, sizeof buffer, "%.*e", (int)k - 1, value);
    size_t j = 0;
    for (const char *p = buffer; *p && *p != 'e'; p++) {
        if (*p == '.') continue;
        if (j >= k || *p != digits[j]) return 0;
        j++;
    }
    if (j != k) return 0;
    if (k > 1) {
        snprintf(buffer, sizeof buffer, "%.*e", (int)k - 2, value);
        if (strtod(buffer, NULL) == value) return 0;
    }
    return 1;
}

/* Copy a number into *out (args_text) as DuckDB writes it back, or say it cannot be copied exactly. */
static int copy_number(Scan *s, const Number *n, char **out) {
    if (n->has_exponent) FAIL(s, "a number with an exponent in args");
    if (!n->has_fraction) {
        if (n->negative && n->int_digits == 1 && n->start[1] == '0') FAIL(s, "-0 in args");
        *out = put_text(*out, n->start, (size_t)(s->p - n->start), s->end);
        return 1;
    }
    /* DuckDB reads a decimal as a double and writes its shortest form, in fixed notation from 1e-6 up: the
     * same text with the fraction's trailing zeros dropped, when the text is that shortest form. Up to 15
     * significant digits it always is; longer texts are checked. */
    const char *int_part = n->start + n->negative;
    const char *frac = int_part + n->int_digits + 1;
    size_t significant;
    if (n->int_digits == 1 && int_part[0] == '0') {
        size_t zeros = 0;
        while (zeros < n->frac_digits && frac[zeros] == '0') zeros++;
        if (n->frac_digits == 0) FAIL(s, "a zero with a fraction in args");
        if (zeros > 5) FAIL(s, "a number below 1e-6 in args");
        significant = n->frac_digits - zeros;
    } else {
        if (n->int_digits > 16) FAIL(s, "a number of more than 16 integer digits in args");
        significant = n->int_digits + n->frac_digits;
    }
    if (significant > 15 && !shortest_form(s, n)) FAIL(s, "a number that is not in its shortest form in args");
    size_t kept = n->frac_digits ? n->frac_digits : 1;
    *out = put_text(*out, n->start, (size_t)(frac - n->start) + kept, s->end);
    return 1;
}

static int expect_literal(Scan *s, const char *word, size_t n) {
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0) FAIL(s, "invalid JSON");
    s->p += n;
    return 1;
}

static inline void put_char(char **out, char c) {
    if (out) *(*out)++ = c;
}

/* After a member of an object or an element of an array: 1 past a ',' (another follows), 0 past the closing
 * byte, -1 at anything else. The byte passed is copied to *out, when out is not NULL. */
static inline int after_member(Scan *s, char close, char **out) {
    if (next_is(s, ',')) {
        s->p++;
        put_char(out, ',');
        skip_space(s);
        return 1;
    }
    if (s->p < s->end && *s->p == close) {
        s->p++;
        put_char(out, close);
        return 0;
    }
    return -1;
}

/* Any JSON value at s->p (after whitespace); written compact to *out (args_text) when out is not NULL. */
static int copy_value(Scan *s, char **out, int depth) {
    if (depth > 64) FAIL(s, "nesting deeper than 64");
    if (s->p >= s->end) FAIL(s, "invalid JSON");
    char c = *s->p;
    if (c == '"') return out ? copy_string(s, out) : read_string(s, NULL);
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        s->p++;
        put_char(out, c);
        skip_space(s);
        if (s->p < s->end && *s->p == close) {
            s->p++;
            put_char(out, close);
            return 1;
        }
        for (;;) {
            if (c == '{') {
                if (s->p >= s->end || *s->p != '"') FAIL(s, "invalid JSON");
                if (!(out ? copy_string(s, out) : read_string(s, NULL))) return 0;
                if (!next_is(s, ':')) FAIL(s, "invalid JSON");
                s->p++;
                put_char(out, ':');
                skip_space(s);
            }
            if (!copy_value(s, out, depth + 1)) return 0;
            int more = after_member(s, close, out);
            if (more < 0) FAIL(s, "invalid JSON");
            if (!more) return 1;
        }
    }
    if (c == '-' || is_digit(c)) {
        Number n;
        if (!read_number(s, &n)) return 0;
        return out ? copy_number(s, &n, out) : 1;
    }
    const char *word = c == 't' ? "true" : c == 'f' ? "false" : "null";
    size_t len = c == 'f' ? 5 : 4;
    if (!expect_literal(s, word, len)) return 0;
    if (out) {
        memcpy(*out, word, len);
        *out += len;
    }
    return 1;
}

static inline int at_number(Scan *s) {
    return s->p < s->end && (*s->p == '-' || is_digit(*s->p));
}

static inline int at_null(Scan *s) {
    return (size_t)(s->end - s->p) >= 4 && memcmp(s->p, "null", 4) == 0;
}

/* After a key (s->p past its closing '"'): past the ':' and the space after it. */
static inline int after_key(Scan *s) {
    if (!next_is(s, ':')) FAIL(s, "invalid JSON");
    s->p++;
    skip_space(s);
    return 1;
}

/* After a key's text (s->p at its closing '"' or what stopped it): past the ':' and the space after it. */
static inline int end_key(Scan *s) {
    if (s->p >= s->end || *s->p != '"') FAIL(s, "a key with an escape or a byte outside ASCII");
    s->p++;
    return after_key(s);
}

/* The key at s->p, undecoded; keys with escapes are left to DuckDB. */
static inline int read_key(Scan *s, const char **key, size_t *len) {
    if (s->p >= s->end || *s->p != '"') FAIL(s, "invalid JSON");
    const char *start = ++s->p;
    s->p = plain_run(s->p, s->end);
    *key = start;
    *len = (size_t)(s->p - start);
    return end_key(s);
}

/* The keys of an event this reader reads; the others are skipped. Kineto writes them in this order (a flow's "id"
 * after its "ph"). */
enum { KEY_PH, KEY_CAT, KEY_NAME, KEY_PID, KEY_TID, KEY_TS, KEY_DUR, KEY_ARGS, KEY_ID, N_EVENT_KEYS,
       KEY_OTHER = N_EVENT_KEYS };

static inline int event_key(const char *key, size_t len) {
    switch (len) {
    case 2:
        if (key[0] == 'p' && key[1] == 'h') return KEY_PH;
        if (key[0] == 't' && key[1] == 's') return KEY_TS;
        if (key[0] == 'i' && key[1] == 'd') return KEY_ID;
        break;
    case 3:
        if (memcmp(key, "cat", 3) == 0) return KEY_CAT;
        if (memcmp(key, "pid", 3) == 0) return KEY_PID;
        if (memcmp(key, "tid", 3) == 0) return KEY_TID;
        if (memcmp(key, "dur", 3) == 0) return KEY_DUR;
        break;
    case 4:
        if (memcmp(key, "name", 4) == 0) return KEY_NAME;
        if (memcmp(key, "args", 4) == 0) return KEY_ARGS;
        break;
    }
    return KEY_OTHER;
}

/* An event key as it stands in the text, quotes included (at most 8 bytes): those bytes as a word, a mask of
 * them in the word, and their count. */
typedef struct {
    uint64_t word, mask;
    size_t length;
} QuotedKey;

static const char *const EVENT_KEYS[N_EVENT_KEYS] = {"ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "id"};
static QuotedKey QUOTED_EVENT_KEYS[N_EVENT_KEYS];

static void init_quoted_event_keys(void) {
    for (int k = 0; k < N_EVENT_KEYS; k++) {
        char text[8] = {0}, mask[8] = {0};
        size_t length = strlen(EVENT_KEYS[k]) + 2;
        text[0] = text[length - 1] = '"';
        memcpy(text + 1, EVENT_KEYS[k], length - 2);
        memset(mask, 0xFF, length);
        memcpy(&QUOTED_EVENT_KEYS[k].word, text, 8);
        memcpy(&QUOTED_EVENT_KEYS[k].mask, mask, 8);
        QUOTED_EVENT_KEYS[k].length = length;
    }
}

/* The event key at s->p (KEY_OTHER for one this reader skips), read past its ':'; -1 on a problem. The key
 * expected (the next in Kineto's order) is tried first, by one word compare: where it matches, the scan goes
 * on at a known length, without waiting for a search for the closing quote. */
static inline int read_event_key(Scan *s, int expected) {
    if (expected < N_EVENT_KEYS && s->end - s->p >= 8) {
        const QuotedKey *quoted = &QUOTED_EVENT_KEYS[expected];
        uint64_t w;
        memcpy(&w, s->p, 8);
        if ((w & quoted->mask) == quoted->word) {
            s->p += quoted->length;
            return after_key(s) ? expected : -1;
        }
    }
    const char *key;
    size_t len;
    if (!read_key(s, &key, &len)) return -1;
    return event_key(key, len);
}

/* The join keys read from the top of args: 0 correlation, 1 "External id", 2 device, 3 stream, 4 "external id"
 * (the 2021 format's, on launches and device events: external_id where "External id" is missing or null);
 * else -1. */
enum { N_JOIN_KEYS = 5 };

static inline int join_key(const char *key, size_t len) {
    if (len == 11) {
        if (memcmp(key, "correlation", 11) == 0) return 0;
        if (memcmp(key, "External id", 11) == 0) return 1;
        if (memcmp(key, "external id", 11) == 0) return 4;
    } else if (len == 6) {
        if (memcmp(key, "device", 6) == 0) return 2;
        if (memcmp(key, "stream", 6) == 0) return 3;
    }
    return -1;
}

/* A join key written as a string of a hexadecimal number, "0x…" or "0X…" and nothing else (roctracer's traces write a
 * launch's stream so, "0x0"): its value as DuckDB's cast of the string gives it, NULL (*is_null) past int64, or past
 * int32 for device and stream (narrow); the string copied to *out and s->p past it. 0 for any other string (s->p
 * unmoved): DuckDB's reader reads that part. */
static int read_hex_key(Scan *s, char **out, int64_t *value, int *is_null, int narrow) {
    const char *p = s->p + 1;
    if (s->end - p < 4 || p[0] != '0' || (p[1] != 'x' && p[1] != 'X')) return 0;
    p += 2;
    const char *digits = p;
    uint64_t v = 0;
    int overflow = 0;
    for (; p < s->end; p++) {
        unsigned d = (unsigned char)*p;
        d = d >= '0' && d <= '9' ? d - '0' : (d | 0x20) >= 'a' && (d | 0x20) <= 'f' ? (d | 0x20) - 'a' + 10 : 16;
        if (d == 16) break;
        overflow |= (v >> 60) != 0;
        v = v << 4 | d;
    }
    if (p == digits || p >= s->end || *p != '"') return 0;
    *is_null = overflow || v > (uint64_t)(narrow ? INT32_MAX : INT64_MAX);
    *value = (int64_t)v;
    size_t n = (size_t)(p + 1 - s->p);
    memcpy(*out, s->p, n);
    *out += n;
    s->p = p + 1;
    return 1;
}

/* args: copied compact to args_text, and the four join keys read from its top level. */
static int read_args(Scan *s, int64_t keys[N_JOIN_KEYS], int found[N_JOIN_KEYS]) {
    char *o = s->args_end;
    s->p++;
    *o++ = '{';
    skip_space(s);
    if (s->p < s->end && *s->p == '}') {
        s->p++;
        *o++ = '}';
        s->args_end = o;
        return 1;
    }
    for (;;) {
        /* the key, copied as it is read */
        if (s->p >= s->end || *s->p != '"') FAIL(s, "invalid JSON");
        *o++ = '"';
        const char *key = ++s->p;
        s->p = copy_plain_run(s->p, s->end, &o);
        size_t len = (size_t)(s->p - key);
        if (!end_key(s)) return 0;
        o[0] = '"';
        o[1] = ':';
        o += 2;
        if (len == 4 && memcmp(key, "args", 4) == 0) FAIL(s, "args nested in args");
        int which = join_key(key, len);
        if (which >= 0) {
            if (found[which]) FAIL(s, "a join key twice in args");
            found[which] = 1;
            if (at_number(s)) {
                const char *value_start = s->p;
                Number n;
                if (!read_number(s, &n)) return 0;
                int64_t value;
                if (!integer_value(&n, &value)) FAIL(s, "a join key that is not an integer");
                if ((which == 2 || which == 3) && (value > INT32_MAX || value < INT32_MIN))
                    FAIL(s, "a device or stream past int32");
                if (n.negative && value == 0) FAIL(s, "-0 in args");
                keys[which] = value;
                o = put_text(o, value_start, (size_t)(s->p - value_start), s->end);
            } else if (at_null(s)) {
                found[which] = 2; /* null: NULL */
                s->p += 4;
                memcpy(o, "null", 4);
                o += 4;
            } else {
                int64_t value;
                int is_null;
                if (s->p >= s->end || *s->p != '"' || !read_hex_key(s, &o, &value, &is_null, which == 2 || which == 3))
                    FAIL(s, "a join key that is not an integer");
                if (is_null) found[which] = 2;
                keys[which] = value;
            }
        } else if (!copy_value(s, &o, 1)) {
            return 0;
        }
        int more = after_member(s, '}', &o);
        if (more < 0) FAIL(s, "invalid JSON");
        if (!more) {
            s->args_end = o;
            return 1;
        }
    }
}

/* ts or dur: integer nanoseconds of a decimal with at most 3 fraction digits. Up to 16 integer digits: epoch
 * microseconds (1.6e15 in 2021) hold 16, and their nanoseconds fit int64 until 2262; past int64 the part is
 * left to DuckDB's reader, which refuses it. */
static int read_time(Scan *s, int64_t *ns, int *present) {
    if (!at_number(s)) {
        if (!at_null(s)) FAIL(s, "a ts or dur that is not a number");
        s->p += 4;
        *present = 0;
        return 1;
    }
    Number n;
    if (!read_number(s, &n)) return 0;
    if (n.has_exponent || n.raw_frac_digits > 3) FAIL(s, "a ts or dur DuckDB would round");
    if (n.int_digits > 16) FAIL(s, "a ts or dur past int64 nanoseconds");
    const char *f = n.start + n.negative + n.int_digits + 1;
    uint64_t frac = 0;
    for (size_t i = 0; i < 3; i++) frac = frac * 10 + (i < n.raw_frac_digits ? (uint64_t)(f[i] - '0') : 0);
    uint64_t v = n.int_value * 1000 + frac; /* below 10^19: no wrap */
    if (v > (uint64_t)INT64_MAX) FAIL(s, "a ts or dur past int64 nanoseconds");
    *ns = n.negative ? -(int64_t)v : (int64_t)v;
    *present = 1;
    return 1;
}

/* A flow id string of an integer's digits alone, "-?(0|[1-9][0-9]*)" of at most 18 digits: its value, as TRY_CAST
 * gives it; s->p past it. 0 for any other string (s->p unmoved). */
static int read_id_digits(Scan *s, int64_t *value) {
    const char *p = s->p + 1;
    int negative = p < s->end && *p == '-';
    p += negative;
    uint64_t v;
    const char *end = digits_end(s, p, &v);
    size_t n = (size_t)(end - p);
    if (n == 0 || n > 18 || (n > 1 && *p == '0') || end >= s->end || *end != '"') return 0;
    *value = negative ? -(int64_t)v : (int64_t)v;
    s->p = end + 1;
    return 1;
}

/* A flow's id: an integer, a string of one (read_id_digits), or a string that TRY_CAST makes NULL. */
static int read_id(Scan *s, int64_t *value, int *present) {
    *present = 0;
    if (!at_number(s)) {
        if (at_null(s)) {
            s->p += 4;
            return 1;
        }
        if (s->p < s->end && *s->p == '"') {
            char first = s->p + 1 < s->end ? s->p[1] : 0;
            if ((first == '-' || is_digit(first)) && read_id_digits(s, value)) {
                *present = 1;
                return 1;
            }
            if (!((first >= 'A' && first <= 'Z') || (first >= 'a' && first <= 'z') || first == '"'))
                FAIL(s, "an id string that may read as a number");
            return read_string(s, NULL);
        }
        FAIL(s, "an id of another type");
    }
    Number n;
    if (!read_number(s, &n)) return 0;
    if (!integer_value(&n, value)) FAIL(s, "an id that is not an int64");
    *present = 1;
    return 1;
}

/* ph, cat or name: its index in d, or not present (null). */
static int read_text(Scan *s, Dictionary *d, int32_t *index, int *present) {
    if (s->p >= s->end || *s->p != '"') {
        if (!at_null(s)) FAIL(s, "a ph, cat or name that is not a string");
        s->p += 4;
        *present = 0;
        return 1;
    }
    const char *text = s->p + 1, *p = text;
    p = plain_run(p, s->end);
    size_t length = (size_t)(p - text);
    if (p < s->end && *p == '"') { /* no escape: the bytes as they are */
        s->p = p + 1;
    } else {
        s->scratch.size = 0;
        if (!read_string(s, &s->scratch)) return 0;
        text = s->scratch.data ? s->scratch.data : "";
        length = s->scratch.size;
    }
    *index = dictionary_index(d, text, length);
    if (*index < 0) FAIL(s, "out of memory");
    *present = 1;
    return 1;
}

/* pid or tid: an integer's value, or a string (any: Chrome takes any value there) as a name in d, or null. */
static int read_thread_key(Scan *s, int64_t *value, int *present, Dictionary *d, int32_t *name, int *named) {
    *present = *named = 0;
    if (at_number(s)) {
        Number n;
        if (!read_number(s, &n)) return 0;
        if (!integer_value(&n, value)) FAIL(s, "a pid or tid that is not an int64");
        *present = 1;
        return 1;
    }
    if ((s->p < s->end && *s->p == '"') || at_null(s)) return read_text(s, d, name, named);
    FAIL(s, "a pid or tid of another type");
}

static int read_event(Scan *s, int64_t row, int64_t first_id) {
    if (s->p >= s->end || *s->p != '{') FAIL(s, "an element of traceEvents that is not an object");
    if (row == s->row_capacity && !grow_rows(s)) FAIL(s, "out of memory");
    s->p++;
    skip_space(s);
    int seen[N_EVENT_KEYS] = {0};
    int32_t text[N_DICTIONARIES] = {0};
    int64_t pid = 0, tid = 0, ts = 0, dur = 0, id = 0;
    int has_text[N_DICTIONARIES] = {0}, has_pid = 0, has_tid = 0, has_ts = 0, has_dur = 0, has_args = 0, has_id = 0;
    int64_t keys[N_JOIN_KEYS] = {0};
    int found[N_JOIN_KEYS] = {0};
    if (s->p < s->end && *s->p == '}') {
        s->p++;
    } else {
        for (int expected = KEY_PH;;) {
            int which = read_event_key(s, expected);
            if (which < 0) return 0;
            if (which != KEY_OTHER) {
                expected = which + 1;
                if (seen[which]) FAIL(s, "a key twice in an event");
                seen[which] = 1;
            }
            int ok;
            switch (which) {
            case KEY_PH: ok = read_text(s, &s->dictionaries[PH], &text[PH], &has_text[PH]); break;
            case KEY_CAT: ok = read_text(s, &s->dictionaries[CAT], &text[CAT], &has_text[CAT]); break;
            case KEY_NAME: ok = read_text(s, &s->dictionaries[NAME], &text[NAME], &has_text[NAME]); break;
            case KEY_PID:
                ok = read_thread_key(s, &pid, &has_pid, &s->dictionaries[PID_NAME], &text[PID_NAME],
                                     &has_text[PID_NAME]);
                break;
            case KEY_TID:
                ok = read_thread_key(s, &tid, &has_tid, &s->dictionaries[TID_NAME], &text[TID_NAME],
                                     &has_text[TID_NAME]);
                break;
            case KEY_TS: ok = read_time(s, &ts, &has_ts); break;
            case KEY_DUR: ok = read_time(s, &dur, &has_dur); break;
            case KEY_ID: ok = read_id(s, &id, &has_id); break;
            case KEY_ARGS:
                if (at_null(s)) {
                    s->p += 4;
                    ok = 1;
                } else if (s->p < s->end && *s->p == '{') {
                    ok = read_args(s, keys, found);
                    has_args = 1;
                } else {
                    FAIL(s, "args that is not an object");
                }
                break;
            default: ok = copy_value(s, NULL, 1); break;
            }
            if (!ok) return 0;
            int more = after_member(s, '}', NULL);
            if (more < 0) FAIL(s, "invalid JSON");
            if (!more) break;
        }
    }
    for (int d = 0; d < N_DICTIONARIES; d++) column_set32(&s->dictionaries[d].indices, row, text[d], has_text[d]);
    Column *c = s->columns;
    ((int64_t *)c[EVENT_ID].values)[row] = first_id + row; /* never null: its bitmap is not exported */
    column_set64(&c[PID], row, pid, has_pid);
    column_set64(&c[TID], row, tid, has_tid);
    column_set64(&c[TS_NS], row, ts, has_ts);
    column_set64(&c[DUR_NS], row, dur, has_dur);
    column_set64(&c[CORRELATION], row, keys[0], found[0] == 1);
    int legacy_external = found[1] != 1 && found[4] == 1;
    column_set64(&c[EXTERNAL_ID], row, legacy_external ? keys[4] : keys[1], found[1] == 1 || legacy_external);
    column_set32(&c[DEVICE], row, keys[2], found[2] == 1);
    column_set32(&c[STREAM], row, keys[3], found[3] == 1);
    column_set64(&c[FLOW_ID], row, id, has_id);
    s->ids += has_id;
    column_set_valid(&s->args_valid, row, has_args);
    s->args_offsets[row + 1] = (int64_t)(s->args_end - s->args_text);
    return 1;
}

/* A JSON array of events, or with bare, the events alone: {…}, {…} (an empty or blank buffer: none). */
static int scan_array(Scan *s, int64_t first_id, int bare) {
    const char *p = s->end;
    while (p > s->start && is_digit(p[-1])) p--;
    s->digits_stop = p;
    for (p = s->end; p > s->start && SPACE[(unsigned char)p[-1]];) p--;
    s->space_stop = p;
    s->args_text = s->args_end = pages_realloc(NULL, (size_t)(s->end - s->start) + ARGS_OVERRUN);
    if (s->args_text) advise_huge(s->args_text, (size_t)(s->end - s->start));
    if (!s->args_text || !grow_rows(s)) FAIL(s, "out of memory");
    s->args_offsets[0] = 0;
    skip_space(s);
    if (!bare) {
        if (s->p >= s->end || *s->p != '[') FAIL(s, "not a JSON array");
        s->p++;
        skip_space(s);
    }
    const char close = bare ? 0 : ']';
    if (bare ? s->p == s->end : (s->p < s->end && *s->p == ']')) {
        s->p += !bare;
    } else {
        for (;;) {
            if (!read_event(s, s->rows, first_id)) return 0;
            s->rows++;
            if (next_is(s, ',')) {
                s->p++;
                skip_space(s);
                continue;
            }
            if (bare ? s->p == s->end : (s->p < s->end && *s->p == close)) {
                s->p += !bare;
                break;
            }
            FAIL(s, "invalid JSON");
        }
    }
    skip_space(s);
    if (s->p != s->end) FAIL(s, "text after the array");
    return 1;
}

/* ------------------------------------------------------------------ Arrow export */

/* what an exported array owns: its buffers, from pages.h (the columns) or from malloc (the dictionaries) */
typedef struct {
    void *buffers[3];
    int paged;
} Owned;

/* Each exported array owns its buffers (private_data: an Owned) and
 * releases its children and dictionary, so a consumer may move any of them out. */
static void release_array(struct ArrowArray *array) {
    if (!array->release) return;
    Owned *owned = array->private_data;
    for (int i = 0; owned && i < 3; i++) {
        if (owned->paged) pages_free(owned->buffers[i]);
        else free(owned->buffers[i]);
    }
    free(owned);
    for (int64_t i = 0; i < array->n_children; i++) {
        if (array->children[i]->release) array->children[i]->release(array->children[i]);
        free(array->children[i]);
    }
    free(array->children);
    if (array->dictionary) {
        if (array->dictionary->release) array->dictionary->release(array->dictionary);
        free(array->dictionary);
    }
    free((void *)array->buffers);
    array->release = NULL;
}

/* An array over buffers (taken: freed on release; paged: from pages.h, else from malloc), NULL entries standing for
 * no buffer. */
static struct ArrowArray *new_array(struct ArrowArray *array, int64_t length, int64_t nulls, int n_buffers, int paged,
                                    void *b0, void *b1, void *b2) {
    if (!array) array = calloc(1, sizeof *array);
    Owned *owned = calloc(1, sizeof *owned);
    const void **buffers = calloc(3, sizeof(void *));
    if (!array || !owned || !buffers) {
        free(owned);
        free(buffers);
        return NULL;
    }
    void *given[3] = {b0, b1, b2};
    owned->paged = paged;
    for (int i = 0; i < n_buffers; i++) buffers[i] = owned->buffers[i] = given[i];
    array->length = length;
    array->null_count = nulls;
    array->n_buffers = n_buffers;
    array->buffers = buffers;
    array->private_data = owned;
    array->release = release_array;
    return array;
}

static const char *const COLUMN_NAMES[] = {"event_id", "ph",          "cat",         "name",   "pid",
                                           "tid",      "ts_ns",       "dur_ns",      "correlation",
                                           "external_id", "device",   "stream",      "args",   "flow_id",
                                           "pid_name", "tid_name"};
#define N_FIELDS 16

/* args is valid JSON (this reader parsed it), so it goes out as the canonical extension type arrow.json, which
 * DuckDB reads as JSON without parsing it again (half the insert's cost). Metadata: int32 count, then int32
 * length and bytes of each key and value. */
static const char JSON_EXTENSION[] = "\x02\0\0\0"
                                     "\x14\0\0\0ARROW:extension:name"
                                     "\x0a\0\0\0arrow.json"
                                     "\x18\0\0\0ARROW:extension:metadata"
                                     "\0\0\0\0";

static void release_schema(struct ArrowSchema *schema) {
    if (!schema->release) return;
    for (int64_t i = 0; i < schema->n_children; i++) {
        if (schema->children[i]->release) schema->children[i]->release(schema->children[i]);
        free(schema->children[i]);
    }
    free(schema->children);
    if (schema->dictionary) {
        if (schema->dictionary->release) schema->dictionary->release(schema->dictionary);
        free(schema->dictionary);
    }
    schema->release = NULL;
}

static int fill_schema(struct ArrowSchema *out) {
    memset(out, 0, sizeof *out);
    out->format = "+s";
    out->name = "";
    out->release = release_schema;
    out->children = calloc(N_FIELDS, sizeof(struct ArrowSchema *));
    if (!out->children) return ENOMEM;
    out->n_children = N_FIELDS;
    for (int i = 0; i < N_FIELDS; i++) {
        struct ArrowSchema *child = calloc(1, sizeof *child);
        if (!child) return ENOMEM;
        out->children[i] = child;
        child->name = COLUMN_NAMES[i];
        child->release = release_schema;
        child->flags = i == 0 ? 0 : ARROW_FLAG_NULLABLE;
        if ((i >= 1 && i <= 3) || i >= 14) {
            child->format = "i";
            child->dictionary = calloc(1, sizeof(struct ArrowSchema));
            if (!child->dictionary) return ENOMEM;
            child->dictionary->format = "u";
            child->dictionary->name = "";
            child->dictionary->flags = ARROW_FLAG_NULLABLE;
            child->dictionary->release = release_schema;
        } else if (i == 10 || i == 11) {
            child->format = "i";
        } else if (i == 12) {
            child->format = "U";
            child->metadata = JSON_EXTENSION;
        } else {
            child->format = "l";
        }
    }
    return 0;
}

typedef struct {
    struct ArrowArray batch; /* released (release == NULL) once handed out */
} StreamState;

static int stream_get_schema(struct ArrowArrayStream *stream, struct ArrowSchema *out) {
    (void)stream;
    int error = fill_schema(out);
    if (error) release_schema(out);
    return error;
}

static int stream_get_next(struct ArrowArrayStream *stream, struct ArrowArray *out) {
    StreamState *state = stream->private_data;
    *out = state->batch;          /* moved: the end of the stream is a released array */
    state->batch.release = NULL;
    return 0;
}

static const char *stream_last_error(struct ArrowArrayStream *stream) {
    (void)stream;
    return NULL;
}

static void stream_release(struct ArrowArrayStream *stream) {
    if (!stream->release) return;
    StreamState *state = stream->private_data;
    if (state->batch.release) state->batch.release(&state->batch);
    free(state);
    stream->release = NULL;
}

static void capsule_destructor(PyObject *capsule) {
    struct ArrowArrayStream *stream = PyCapsule_GetPointer(capsule, "arrow_array_stream");
    if (!stream) return;
    if (stream->release) stream->release(stream);
    free(stream);
}

static void *take(Bytes *b) {
    void *data = b->data;
    b->data = NULL;
    b->size = b->capacity = 0;
    return data ? data : malloc(1);
}

/* A buffer handed over, with what is past its first size bytes given back (the buffers have room for more
 * rows and args than there are; shrinking in place is cheap). */
static void *shrunk(void *data, size_t size) {
    void *smaller = pages_realloc(data, size ? size : 1);
    return smaller ? smaller : data;
}

static void free_column(Column *c) {
    pages_free(c->values);
    pages_free(c->valid);
}

static void free_scan(Scan *s) {
    for (int d = 0; d < N_DICTIONARIES; d++) {
        free(s->dictionaries[d].text.data);
        free(s->dictionaries[d].offsets.data);
        free(s->dictionaries[d].slots);
        free_column(&s->dictionaries[d].indices);
    }
    for (int c = 0; c < N_COLUMNS; c++) free_column(&s->columns[c]);
    pages_free(s->args_text);
    pages_free(s->args_offsets);
    free_column(&s->args_valid);
    free(s->scratch.data);
}

/* A column's values and, when it has nulls, its bitmap, for rows rows (taken from c); nulls: -1 to count them. */
static struct ArrowArray *column_array(Column *c, int64_t rows, int64_t nulls) {
    if (nulls < 0) nulls = column_nulls(c, rows);
    void *valid = nulls ? shrunk(c->valid, (size_t)(rows + 7) / 8) : NULL;
    void *values = shrunk(c->values, (size_t)rows * (size_t)c->width);
    if (valid) c->valid = NULL;
    c->values = NULL;
    return new_array(NULL, rows, nulls, 2, 1, valid, values, NULL);
}

/* The scanned columns as one struct batch; NULL when out of memory (s keeps what was not taken). */
static struct ArrowArrayStream *export_stream(Scan *s) {
    StreamState *state = calloc(1, sizeof *state);
    struct ArrowArrayStream *stream = calloc(1, sizeof *stream);
    struct ArrowArray **children = calloc(N_FIELDS, sizeof(struct ArrowArray *));
    if (!state || !stream || !children) goto fail;
    int64_t rows = s->rows;
    for (int i = 0; i < N_FIELDS; i++) {
        struct ArrowArray *child = NULL;
        if ((i >= 1 && i <= 3) || i >= 14) {
            Dictionary *d = &s->dictionaries[i <= 3 ? i - 1 : PID_NAME + (i - 14)];
            if (d->offsets.size == 0) {
                int32_t zero = 0;
                bytes_append(&d->offsets, &zero, 4);
                if (d->offsets.failed) goto fail;
            }
            struct ArrowArray *values = new_array(NULL, d->count, 0, 3, 0, NULL, take(&d->offsets), take(&d->text));
            if (!values) goto fail;
            child = column_array(&d->indices, rows, -1);
            if (!child) {
                release_array(values);
                free(values);
                goto fail;
            }
            child->dictionary = values;
        } else if (i == 12) {
            Column *valid = &s->args_valid;
            int64_t nulls = column_nulls(valid, rows);
            void *bitmap = nulls ? shrunk(valid->valid, (size_t)(rows + 7) / 8) : NULL;
            void *offsets = shrunk(s->args_offsets, (size_t)(rows + 1) * sizeof(int64_t));
            void *text = shrunk(s->args_text, (size_t)(s->args_end - s->args_text));
            if (bitmap) valid->valid = NULL;
            s->args_offsets = NULL;
            s->args_text = s->args_end = NULL;
            child = new_array(NULL, rows, nulls, 3, 1, bitmap, offsets, text);
        } else if (i == 13) {
            child = column_array(&s->columns[FLOW_ID], rows, -1);
        } else {
            /* event_id is never null: its bitmap is left unset */
            child = column_array(&s->columns[i == 0 ? EVENT_ID : i - 3], rows, i == 0 ? 0 : -1);
        }
        if (!child) goto fail;
        children[i] = child;
    }
    if (!new_array(&state->batch, rows, 0, 1, 0, NULL, NULL, NULL)) goto fail;
    state->batch.n_children = N_FIELDS;
    state->batch.children = children;
    stream->get_schema = stream_get_schema;
    stream->get_next = stream_get_next;
    stream->get_last_error = stream_last_error;
    stream->release = stream_release;
    stream->private_data = state;
    return stream;
fail:
    if (children) {
        for (int i = 0; i < N_FIELDS; i++) {
            if (children[i]) {
                release_array(children[i]);
                free(children[i]);
            }
        }
        free(children);
    }
    free(state);
    free(stream);
    return NULL;
}

/* ------------------------------------------------------------------ the 2021 format's names */

/* Categories as torch 1.8-1.9 (Kineto of early 2021) named them, read as their later names, as ingest.sql does;
 * and a memory event of that format ("[memory]", ph "i", no cat) gets the category later versions give it. */
static const char *const LEGACY_CATEGORIES[][2] = {
    {"Kernel", "kernel"},        {"Memcpy", "gpu_memcpy"}, {"Memset", "gpu_memset"},
    {"Runtime", "cuda_runtime"}, {"Operator", "cpu_op"},   {"User", "gpu_user_annotation"},
};
#define N_LEGACY_CATEGORIES (sizeof LEGACY_CATEGORIES / sizeof LEGACY_CATEGORIES[0])

static int text_is(const Dictionary *d, int32_t i, const char *text) {
    const int32_t *offsets = (const int32_t *)d->offsets.data;
    size_t n = strlen(text);
    return (size_t)(offsets[i + 1] - offsets[i]) == n && memcmp(d->text.data + offsets[i], text, n) == 0;
}

/* The index of text in d, or -1. */
static int32_t dictionary_find(const Dictionary *d, const char *text) {
    for (int32_t i = 0; i < d->count; i++) {
        if (text_is(d, i, text)) return i;
    }
    return -1;
}

static inline int is_present(const Column *c, int64_t row) { return (c->valid[row >> 3] >> (row & 7)) & 1; }

static int text_ends(const Dictionary *d, int32_t i, const char *suffix) {
    const int32_t *offsets = (const int32_t *)d->offsets.data;
    size_t n = strlen(suffix), length = (size_t)(offsets[i + 1] - offsets[i]);
    return length >= n && memcmp(d->text.data + offsets[i + 1] - n, suffix, n) == 0;
}

/* The name Kineto gives the device events of category i of a fork for another device (privateuse1_kernel,
 * mlu_memcpy, memset…) and MTIA's (mtia_ccp_events, which Kineto's ActivityType.h now aliases to its kernels), as
 * ingest.sql reads them; NULL for any other category, and for Kineto's own names. */
static const char *device_category(const Dictionary *cat, int32_t i) {
    if (text_is(cat, i, "kernel") || text_is(cat, i, "gpu_memcpy") || text_is(cat, i, "gpu_memset")) return NULL;
    if (text_ends(cat, i, "_kernel") || text_is(cat, i, "mtia_ccp_events")) return "kernel";
    if (text_is(cat, i, "memcpy") || text_ends(cat, i, "_memcpy")) return "gpu_memcpy";
    if (text_is(cat, i, "memset") || text_ends(cat, i, "_memset")) return "gpu_memset";
    return NULL;
}

/* Rewrite the 2021 format's category names, and the device categories of Kineto's forks, in the cat dictionary
 * (merging any with the later name already there), and give its memory events their category; 0 when out of memory.
 * Costs nothing on a later trace but a look at each distinct cat and name. */
static int modernize_categories(Scan *s) {
    Dictionary *cat = &s->dictionaries[CAT];
    const char **renamed = calloc((size_t)cat->count + 1, sizeof(char *));
    if (!renamed) return 0;
    int any = 0;
    for (int32_t i = 0; i < cat->count; i++) {
        for (size_t j = 0; j < N_LEGACY_CATEGORIES; j++) {
            if (text_is(cat, i, LEGACY_CATEGORIES[j][0])) {
                renamed[i] = LEGACY_CATEGORIES[j][1];
                any = 1;
            }
        }
        if (!renamed[i] && (renamed[i] = device_category(cat, i))) any = 1;
    }
    if (any) {
        Dictionary modern = {0};
        int32_t *index = malloc(((size_t)cat->count + 1) * sizeof(int32_t));
        int ok = index != NULL;
        const int32_t *offsets = (const int32_t *)cat->offsets.data;
        for (int32_t i = 0; ok && i < cat->count; i++) {
            const char *text = renamed[i] ? renamed[i] : cat->text.data + offsets[i];
            size_t n = renamed[i] ? strlen(renamed[i]) : (size_t)(offsets[i + 1] - offsets[i]);
            index[i] = dictionary_index(&modern, text, n);
            ok = index[i] >= 0;
        }
        if (ok) {
            int32_t *values = cat->indices.values;
            for (int64_t row = 0; row < s->rows; row++) {
                if (is_present(&cat->indices, row)) values[row] = index[values[row]];
            }
            free(cat->text.data);
            free(cat->offsets.data);
            free(cat->slots);
            modern.indices = cat->indices;
            *cat = modern;
        } else {
            free(modern.text.data);
            free(modern.offsets.data);
            free(modern.slots);
        }
        free(index);
        if (!ok) {
            free(renamed);
            return 0;
        }
    }
    free(renamed);
    int32_t memory = dictionary_find(&s->dictionaries[NAME], "[memory]");
    int32_t instant = dictionary_find(&s->dictionaries[PH], "i");
    if (memory < 0 || instant < 0) return 1;
    const Column *name = &s->dictionaries[NAME].indices, *ph = &s->dictionaries[PH].indices;
    const int32_t *name_index = name->values, *ph_index = ph->values;
    int32_t instant_event = -1;
    for (int64_t row = 0; row < s->rows; row++) {
        if (is_present(&cat->indices, row) || !is_present(name, row) || name_index[row] != memory ||
            !is_present(ph, row) || ph_index[row] != instant)
            continue;
        if (instant_event < 0 && (instant_event = dictionary_index(cat, "cpu_instant_event", 17)) < 0) return 0;
        column_set32(&cat->indices, row, instant_event, 1);
    }
    return 1;
}

/* ------------------------------------------------------------------ validate.sql's rules 1-7 */

/* CAT_OPERATOR: cpu_op and user_annotation; CAT_LAUNCH: another runtime's launches (xpu_…, privateuse1_…, any
 * <device>_runtime or _driver, Kineto's device-agnostic runtime and driver), which only rules 1-3 hold; CAT_OTHER:
 * what no rule holds */
enum { CAT_OTHER, CAT_DEVICE, CAT_RUNTIME, CAT_OPERATOR, CAT_LAUNCH };
enum { PH_COMPLETE = 1, PH_BEGIN = 2, PH_END = 3 };

/* Of each ph string, PH_COMPLETE for "X", PH_BEGIN for "B" (a span paired_spans.sql makes complete), PH_END for "E"
 * (which ends one, whatever cat it repeats), else 0; and the
 * kind (CAT_…) of each cat string; 0 when out of memory. */
static int classify(const Scan *s, uint8_t **complete, uint8_t **kind) {
    const Dictionary *ph = &s->dictionaries[PH], *cat = &s->dictionaries[CAT];
    *complete = calloc((size_t)ph->count + 1, 1);
    *kind = calloc((size_t)cat->count + 1, 1);
    if (!*complete || !*kind) {
        free(*complete);
        free(*kind);
        return 0;
    }
    for (int32_t i = 0; i < ph->count; i++)
        (*complete)[i] = text_is(ph, i, "X")   ? PH_COMPLETE
                         : text_is(ph, i, "B") ? PH_BEGIN
                         : text_is(ph, i, "E") ? PH_END
                                               : 0;
    for (int32_t i = 0; i < cat->count; i++) {
        (*kind)[i] = text_is(cat, i, "kernel") || text_is(cat, i, "gpu_memcpy") || text_is(cat, i, "gpu_memset")
                         ? CAT_DEVICE
                     : text_is(cat, i, "cuda_runtime") || text_is(cat, i, "cuda_driver")  ? CAT_RUNTIME
                     : text_is(cat, i, "cpu_op") || text_is(cat, i, "user_annotation") ? CAT_OPERATOR
                     : text_ends(cat, i, "_runtime") || text_ends(cat, i, "_driver") || text_is(cat, i, "runtime") ||
                             text_is(cat, i, "driver")
                         ? CAT_LAUNCH
                         : CAT_OTHER;
    }
    return 1;
}

/* An instant (ph "i" or "I") of a device, launch or operator category is a complete event of no duration: Perfetto's
 * JSON export writes every slice of 0 ns on a thread so (export_json.cc: "I", scope "t", no dur), as ingest.sql reads
 * it. 0 when out of memory. */
static int complete_instants(Scan *s) {
    Dictionary *ph = &s->dictionaries[PH];
    int32_t lower = dictionary_find(ph, "i"), upper = dictionary_find(ph, "I");
    if (lower < 0 && upper < 0) return 1;
    uint8_t *complete, *kind;
    if (!classify(s, &complete, &kind)) return 0;
    const Column *cat = &s->dictionaries[CAT].indices;
    const int32_t *cat_index = cat->values;
    int32_t *ph_index = ph->indices.values;
    int32_t x = -1;
    int ok = 1;
    for (int64_t row = 0; row < s->rows; row++) {
        if (!is_present(&ph->indices, row) || (ph_index[row] != lower && ph_index[row] != upper) ||
            !is_present(cat, row) || kind[cat_index[row]] == CAT_OTHER)
            continue;
        if (x < 0 && (x = dictionary_index(ph, "X", 1)) < 0) {
            ok = 0;
            break;
        }
        ph_index[row] = x;
        column_set64(&s->columns[DUR_NS], row, 0, 1);
    }
    free(complete);
    free(kind);
    return ok;
}

/* ------------------------------------------------------------------ what the part holds */

/* Facts of the part that spare a small trace's load a query each where every part tells them (ingest.py, TraceHeader
 * .facts): FACT_DEVICE_WORK, a device event or a runtime or driver call that may launch one (frames_needed.sql's
 * device_work: ks_launch_category of scope_names.sql); FACT_PYTHON_FRAMES, a python_function event (what frames.sql
 * reads); FACT_PERCENT_NAME, a name that holds '%' (what validate.py's validate_escapes reads); FACT_OTHER_RUNTIME, a
 * runtime or driver call of another runtime than CUDA's (ks_launch_family other than 'cuda': without one, a trace's
 * launches are of one runtime, and attribution.sql's guard of two runtimes sharing a correlation is not asked);
 * FACT_TEXT_IDS, a pid or tid written as a string (without one, ingest.py inserts the part's pid and tid as they are:
 * ingest_scanned.sql, not ingest_scanned_text_ids.sql). Read off the dictionaries, whose strings are those of the
 * part's rows (modernize_categories rebuilds cat's). */
enum { FACT_DEVICE_WORK = 1, FACT_PYTHON_FRAMES = 2, FACT_PERCENT_NAME = 4, FACT_OTHER_RUNTIME = 8, FACT_TEXT_IDS = 16 };

static int part_facts(const Scan *s) {
    const Dictionary *cat = &s->dictionaries[CAT], *name = &s->dictionaries[NAME];
    int facts = 0;
    for (int32_t i = 0; i < cat->count; i++) {
        int launch = text_ends(cat, i, "_runtime") || text_ends(cat, i, "_driver") || text_is(cat, i, "runtime") ||
                     text_is(cat, i, "driver");
        if (launch || text_is(cat, i, "kernel") || text_is(cat, i, "gpu_memcpy") || text_is(cat, i, "gpu_memset"))
            facts |= FACT_DEVICE_WORK;
        if (launch && !text_is(cat, i, "cuda_runtime") && !text_is(cat, i, "cuda_driver")) facts |= FACT_OTHER_RUNTIME;
        if (text_is(cat, i, "python_function")) facts |= FACT_PYTHON_FRAMES;
    }
    const int32_t *offsets = (const int32_t *)name->offsets.data;
    if (name->count && memchr(name->text.data, '%', (size_t)offsets[name->count])) facts |= FACT_PERCENT_NAME;
    if (s->dictionaries[PID_NAME].count || s->dictionaries[TID_NAME].count) facts |= FACT_TEXT_IDS;
    return facts;
}

/* How many rows break one of validate.sql's rules 1-7 (-1: out of memory), read off the columns as DuckDB will
 * hold them: when no part read here has any, and DuckDB's reader read none, validate.sql skips its scan of every
 * event for them. The rules, on complete events (ph "X"): no ts, no dur, a negative dur (of a device, launch or
 * operator event),
 * a device or runtime event without correlation, a device, runtime or operator event without name, a runtime or
 * operator event without pid or tid; and a device event whose ph is not "X" (nor "E"). A "B" event counts too: it becomes a
 * complete event only once paired with its "E" (paired_spans.sql), and is then checked by validate.sql. */
/* flow_id only where the event is a flow (ph "s", "t", "f"), as ingest.sql keeps it: an "id" of another event is
 * dropped. 0 when out of memory. */
static int keep_flow_ids(Scan *s) {
    if (!s->ids) return 1;
    const Dictionary *ph = &s->dictionaries[PH];
    uint8_t *flow = calloc((size_t)ph->count + 1, 1);
    if (!flow) return 0;
    for (int32_t i = 0; i < ph->count; i++) flow[i] = text_is(ph, i, "s") || text_is(ph, i, "t") || text_is(ph, i, "f");
    Column *ids = &s->columns[FLOW_ID];
    const int32_t *phs = ph->indices.values;
    for (int64_t row = 0; row < s->rows; row++) {
        if (is_present(ids, row) && !(is_present(&ph->indices, row) && flow[phs[row]])) {
            ids->valid[row >> 3] &= (uint8_t)~(1u << (row & 7));
            ((int64_t *)ids->values)[row] = 0;
        }
    }
    free(flow);
    return 1;
}

static int64_t rows_breaking_rules(const Scan *s) {
    const Dictionary *ph = &s->dictionaries[PH], *cat = &s->dictionaries[CAT];
    uint8_t *complete, *kind;
    if (!classify(s, &complete, &kind)) return -1;
    const int32_t *ph_index = ph->indices.values, *cat_index = cat->indices.values;
    const Column *c = s->columns, *name = &s->dictionaries[NAME].indices;
    const int64_t *dur = c[DUR_NS].values;
    int64_t broken = 0;
    for (int64_t row = 0; row < s->rows; row++) {
        int k = is_present(&cat->indices, row) ? kind[cat_index[row]] : CAT_OTHER;
        if (!(is_present(&ph->indices, row) && complete[ph_index[row]] == PH_COMPLETE)) {
            int how = is_present(&ph->indices, row) ? complete[ph_index[row]] : 0;
            broken += (k == CAT_DEVICE && how != PH_END) || how == PH_BEGIN;
            continue;
        }
        broken += (k != CAT_OTHER && (!is_present(&c[TS_NS], row) || !is_present(&c[DUR_NS], row) || dur[row] < 0)) ||
                  ((k == CAT_DEVICE || k == CAT_RUNTIME) && !is_present(&c[CORRELATION], row)) ||
                  (k != CAT_OTHER && k != CAT_LAUNCH && !is_present(name, row)) ||
                  ((k == CAT_RUNTIME || k == CAT_OPERATOR) &&
                   !((is_present(&c[PID], row) || is_present(&s->dictionaries[PID_NAME].indices, row)) &&
                     (is_present(&c[TID], row) || is_present(&s->dictionaries[TID_NAME].indices, row))));
    }
    free(complete);
    free(kind);
    return broken;
}

/* ------------------------------------------------------------------ validate_repeats.sql */

static inline uint64_t mix64(uint64_t x) { /* splitmix64's finalizer */
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

/* A nullable column's value for grouping: NULLs are one group apart from every value (as in SQL's GROUP BY). */
static inline int same_value(const Column *c, int64_t a, int64_t b) {
    int present = is_present(c, a);
    if (present != is_present(c, b)) return 0;
    if (!present) return 1;
    return c->width == 4 ? ((const int32_t *)c->values)[a] == ((const int32_t *)c->values)[b]
                         : ((const int64_t *)c->values)[a] == ((const int64_t *)c->values)[b];
}

static inline uint64_t value_hash(const Column *c, int64_t row) {
    if (!is_present(c, row)) return 0x5851F42D4C957F2DULL;
    return mix64(c->width == 4 ? (uint64_t)(int64_t)((const int32_t *)c->values)[row]
                               : (uint64_t)((const int64_t *)c->values)[row]);
}

/* A device event's stream as ingest.sql gives it: its stream arg, else its tid where the trace wrote that as an integer
 * within int32 (Kineto writes a device event's queue as its tid); *present 0 where it has neither. */
static inline int32_t device_stream(const Column *c, int64_t row, int *present) {
    if (is_present(&c[STREAM], row)) {
        *present = 1;
        return ((const int32_t *)c[STREAM].values)[row];
    }
    int64_t tid = ((const int64_t *)c[TID].values)[row];
    *present = is_present(&c[TID], row) && tid >= INT32_MIN && tid <= INT32_MAX;
    return *present ? (int32_t)tid : 0;
}

/* Each device event's stream as ingest.sql gives it (device_stream), in the stream column: so the insert copies the
 * column (ingest_scanned.sql), where its CASE over every row cost ~5 % of the insert (benchmarks/RESULTS.md). Runs
 * after modernize_categories, as ingest.sql's rule reads the cat it inserts. 0 when out of memory. */
static int streams_from_tids(Scan *s) {
    const Dictionary *cat = &s->dictionaries[CAT];
    uint8_t *device = calloc((size_t)cat->count + 1, 1);
    if (!device) return 0;
    int any = 0;
    for (int32_t i = 0; i < cat->count; i++) {
        device[i] = text_is(cat, i, "kernel") || text_is(cat, i, "gpu_memcpy") || text_is(cat, i, "gpu_memset");
        any |= device[i];
    }
    Column *c = s->columns;
    const int32_t *cat_index = cat->indices.values;
    for (int64_t row = 0; any && row < s->rows; row++) {
        if (is_present(&c[STREAM], row) || !is_present(&cat->indices, row) || !device[cat_index[row]]) continue;
        int present;
        int32_t stream = device_stream(c, row, &present);
        if (present) column_set32(&c[STREAM], row, stream, 1);
    }
    free(device);
    return 1;
}

static inline int same_stream(const Column *c, int64_t a, int64_t b) {
    int has_a, has_b;
    int32_t stream_a = device_stream(c, a, &has_a), stream_b = device_stream(c, b, &has_b);
    return has_a == has_b && (!has_a || stream_a == stream_b);
}

/* The length of the runtime's name that launch category i begins with, as ks_launch_family reads it: the text before
 * "_runtime" or "_driver" (cuda_runtime and cuda_driver are both CUDA's), none in Kineto's device-agnostic runtime and
 * driver. */
static size_t family_length(const Dictionary *cat, int32_t i) {
    const int32_t *offsets = (const int32_t *)cat->offsets.data;
    size_t length = (size_t)(offsets[i + 1] - offsets[i]);
    return text_ends(cat, i, "_runtime") ? length - 8 : text_ends(cat, i, "_driver") ? length - 7 : 0;
}

/* Of each launch category (CAT_RUNTIME, CAT_LAUNCH), its runtime as the first category of the dictionary whose
 * runtime it is, so that two launches are of one runtime where their families are equal; 0 when out of memory. A hash
 * table of the families met: a trace may name a million categories, which a comparison of each with each before it
 * would take hours over. */
static int32_t *launch_families(const Dictionary *cat, const uint8_t *kind) {
    size_t n_slots = 16;
    while (n_slots < (size_t)cat->count * 2) n_slots *= 2;
    int32_t *family = calloc((size_t)cat->count + 1, sizeof(int32_t));
    int32_t *slots = calloc(n_slots, sizeof(int32_t)); /* the first category of each family + 1; 0 is empty */
    if (!family || !slots) {
        free(family);
        free(slots);
        return NULL;
    }
    const int32_t *offsets = (const int32_t *)cat->offsets.data;
    for (int32_t i = 0; i < cat->count; i++) {
        family[i] = i;
        if (kind[i] != CAT_RUNTIME && kind[i] != CAT_LAUNCH) continue;
        size_t n = family_length(cat, i);
        const char *text = cat->text.data + offsets[i];
        for (size_t slot = (size_t)hash_bytes(text, n) & (n_slots - 1);; slot = (slot + 1) & (n_slots - 1)) {
            if (!slots[slot]) {
                slots[slot] = i + 1;
                break;
            }
            int32_t j = slots[slot] - 1;
            if (family_length(cat, j) == n && memcmp(text, cat->text.data + offsets[j], n) == 0) {
                family[i] = j;
                break;
            }
        }
    }
    free(slots);
    return family;
}

/* A launch's key (its runtime's text and correlation) and a device event's (correlation, device, stream, start, each
 * maybe NULL), hashed from values alone, so that the same key hashes alike in every part; the two kinds apart. */
#define DEVICE_KEY 0xD6E8FEB86659FD93ULL

/* Whether the part holds what validate_repeats.sql looks for (1), or not (0); -1 when out of memory: two launches
 * (complete events of a category ks_launch_category names: CAT_RUNTIME and CAT_LAUNCH) of one runtime (ks_launch_family:
 * each runtime numbers its own calls) with one correlation, or two
 * device events (complete) with one correlation, device, stream (device_stream) and start, among those with a
 * correlation. For a trace read as one part this is the query's answer, which validate.py then need not run; a repeat across parts
 * repeated_across finds from each part's keys: their hashes, appended to `keys` (where the part holds no repeat, one
 * for each of its launches and device events). A hash set of rows per group, which stops at the first repeat. */
static int has_repeats(const Scan *s, Bytes *keys) {
    const Dictionary *ph = &s->dictionaries[PH], *cat = &s->dictionaries[CAT];
    uint8_t *complete, *kind;
    if (!classify(s, &complete, &kind)) return -1;
    int32_t *family = launch_families(cat, kind);
    if (!family) {
        free(complete);
        free(kind);
        return -1;
    }
    const int32_t *ph_index = ph->indices.values, *cat_index = cat->indices.values;
    const Column *c = s->columns;
    int64_t candidates = 0;
    for (int64_t row = 0; row < s->rows; row++) {
        candidates += is_present(&cat->indices, row) && kind[cat_index[row]] != CAT_OTHER &&
                      kind[cat_index[row]] != CAT_OPERATOR && is_present(&ph->indices, row) &&
                      complete[ph_index[row]] == PH_COMPLETE && is_present(&c[CORRELATION], row);
    }
    size_t n_slots = 16;
    while (n_slots < (size_t)candidates * 2) n_slots *= 2;
    /* one table per group: launches in the first half, device events in the second; a slot holds row + 1 */
    int64_t *slots = calloc(n_slots * 2, sizeof(int64_t));
    uint64_t *family_key = calloc((size_t)cat->count + 1, sizeof(uint64_t)); /* of a runtime's text, not its index */
    /* room for a key more than there are candidates, so that the first is never stored past a NULL buffer */
    if (!slots || !family_key || !bytes_reserve(keys, (size_t)(candidates + 1) * sizeof(uint64_t))) {
        free(slots);
        free(family_key);
        free(family);
        free(complete);
        free(kind);
        return -1;
    }
    for (int32_t i = 0; i < cat->count; i++)
        if (kind[i] == CAT_RUNTIME || kind[i] == CAT_LAUNCH)
            family_key[i] = hash_bytes(cat->text.data + ((const int32_t *)cat->offsets.data)[i], family_length(cat, i));
    uint64_t *key = (uint64_t *)(keys->data + keys->size);
    const int64_t *correlation = c[CORRELATION].values;
    int repeat = 0;
    for (int64_t row = 0; row < s->rows && !repeat; row++) {
        if (!is_present(&cat->indices, row) || !is_present(&ph->indices, row) || complete[ph_index[row]] != PH_COMPLETE ||
            !is_present(&c[CORRELATION], row))
            continue;
        int k = kind[cat_index[row]];
        if (k != CAT_DEVICE && k != CAT_RUNTIME && k != CAT_LAUNCH) continue;
        int device = k == CAT_DEVICE;
        uint64_t h = mix64((uint64_t)correlation[row]);
        if (device) {
            h = mix64(h ^ value_hash(&c[DEVICE], row));
            int has_stream;
            int32_t stream = device_stream(c, row, &has_stream);
            h = mix64(h ^ (has_stream ? mix64((uint64_t)(int64_t)stream) : 0x5851F42D4C957F2DULL));
            h = mix64(h ^ value_hash(&c[TS_NS], row));
            h = mix64(h ^ DEVICE_KEY);
        } else {
            h = mix64(h ^ family_key[cat_index[row]]);
        }
        *key++ = h;
        int64_t *table = slots + (device ? n_slots : 0);
        for (size_t i = (size_t)h & (n_slots - 1);; i = (i + 1) & (n_slots - 1)) {
            if (!table[i]) {
                table[i] = row + 1;
                break;
            }
            int64_t other = table[i] - 1;
            if (correlation[other] == correlation[row] &&
                (device ? (same_value(&c[DEVICE], other, row) && same_stream(c, other, row) &&
                             same_value(&c[TS_NS], other, row))
                        : family[cat_index[other]] == family[cat_index[row]])) {
                repeat = 1;
                break;
            }
        }
    }
    if (!repeat) keys->size = (size_t)((char *)key - keys->data);
    free(slots);
    free(family_key);
    free(family);
    free(complete);
    free(kind);
    return repeat;
}

/* The values one hash set holds at most: repeated_across goes a slice of the hash space at a time, so that its set is
 * a few MB however many keys a trace's parts hold (a 9 GB trace's ~8 M keys in one set were 128 MB outside DuckDB's
 * memory limit), for a pass over the keys per slice. */
#define SLICE_VALUES (1u << 19)

static inline uint64_t part_value(const char *const *values, size_t part, size_t j) {
    uint64_t v;
    memcpy(&v, values[part] + j * sizeof v, sizeof v); /* a buffer may not be aligned */
    return v;
}

/* A value's slice, by its high bits, and its slot, by its low bits: the values are hashes already (has_repeats's). */
static inline size_t slice_of(uint64_t v, unsigned bits) { return bits ? (size_t)(v >> (64 - bits)) : 0; }

/* Whether a value occurs twice among the parts' uint64 values (a hash set of each slice of them; 0 stands for itself
 * apart from the empty slot); -1 when out of memory. */
static int any_twice(const char *const *values, const size_t *counts, size_t parts) {
    size_t total = 0;
    for (size_t i = 0; i < parts; i++) total += counts[i];
    unsigned bits = 0;
    while ((total >> bits) > SLICE_VALUES && bits < 20) bits++;
    size_t n_slices = (size_t)1 << bits, zeros = 0, most = 0;
    size_t *in_slice = calloc(n_slices, sizeof *in_slice);
    if (!in_slice) return -1;
    for (size_t i = 0; i < parts; i++) {
        for (size_t j = 0; j < counts[i]; j++) {
            uint64_t v = part_value(values, i, j);
            if (v == 0) zeros++;
            else in_slice[slice_of(v, bits)]++;
        }
    }
    for (size_t slice = 0; slice < n_slices; slice++) most = in_slice[slice] > most ? in_slice[slice] : most;
    size_t capacity = 16;
    while (capacity < most * 2) capacity *= 2;
    uint64_t *slots = zeros > 1 ? NULL : malloc(capacity * sizeof(uint64_t));
    int twice = zeros > 1;
    if (!twice && !slots) {
        free(in_slice);
        return -1;
    }
    for (size_t slice = 0; slice < n_slices && !twice; slice++) {
        if (in_slice[slice] < 2) continue; /* one value alone occurs once */
        size_t n_slots = 16;
        while (n_slots < in_slice[slice] * 2) n_slots *= 2;
        memset(slots, 0, n_slots * sizeof(uint64_t));
        for (size_t i = 0; i < parts && !twice; i++) {
            for (size_t j = 0; j < counts[i] && !twice; j++) {
                uint64_t v = part_value(values, i, j);
                if (v == 0 || slice_of(v, bits) != slice) continue;
                size_t at = (size_t)v & (n_slots - 1);
                while (slots[at] && slots[at] != v) at = (at + 1) & (n_slots - 1);
                twice = slots[at] == v;
                slots[at] = v;
            }
        }
    }
    free(slots);
    free(in_slice);
    return twice;
}

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
