/* _kineto.c: a reader for the common form of a Kineto traceEvents array, for ingest.py.
 *
 * scan(buffer, first_id, bare) reads a JSON array of trace events (one part) into the columns of the
 * `events` table (events.sql) and returns them as an Arrow C stream capsule, which DuckDB inserts without a
 * copy through Python. It gives exactly the rows that ingest.sql gives with DuckDB's JSON reader, and for
 * that it reads only what it can reproduce exactly: on anything else (a \u escape, a byte outside ASCII, a
 * number that DuckDB would rewrite, a duplicate key, JSON that is not valid…) it returns a sentence that
 * says what it met, and ingest.py loads that part with ingest.sql instead. The scan runs without the GIL,
 * so parts scan in parallel.
 *
 * What ingest.sql gives, and so what this file gives (tests/test_native_reader.py compares both):
 *  - ph, cat, name: the string, escapes decoded; missing or null: NULL. Kept as dictionaries.
 *  - pid, tid: an integer's value; an empty string, or one that starts with a letter ("Spans"): NULL;
 *    missing or null: NULL.
 *  - ts, dur: integer nanoseconds of a decimal with at most 3 fraction digits; missing or null: NULL.
 *  - args: the object written compact, as DuckDB's JSON writer does (no whitespace, "\/" as "/", the
 *    fraction's trailing zeros dropped); missing or null: NULL.
 *  - correlation, "External id", device, stream: an integer's value at the top of args; else NULL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The Arrow C data interface (https://arrow.apache.org/docs/format/CDataInterface.html). */
struct ArrowSchema {
    const char *format;
    const char *name;
    const char *metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};

struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};

struct ArrowArrayStream {
    int (*get_schema)(struct ArrowArrayStream *, struct ArrowSchema *out);
    int (*get_next)(struct ArrowArrayStream *, struct ArrowArray *out);
    const char *(*get_last_error)(struct ArrowArrayStream *);
    void (*release)(struct ArrowArrayStream *);
    void *private_data;
};

#define ARROW_FLAG_NULLABLE 2

/* ------------------------------------------------------------------ growing buffers */

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

/* A nullable column of fixed-width values: values and a validity bitmap, growing together. */
typedef struct {
    Bytes values;
    Bytes valid;
    int64_t nulls;
    int width;
} Column;

static int column_push(Column *c, int64_t row, int64_t value, int present) {
    if ((row & 7) == 0 && !bytes_put(&c->valid, 0)) return 0;
    if (present) {
        c->valid.data[row >> 3] |= (char)(1 << (row & 7));
    } else {
        c->nulls++;
        value = 0;
    }
    if (c->width == 8) {
        return bytes_append(&c->values, &value, 8);
    }
    int32_t narrow = (int32_t)value;
    return bytes_append(&c->values, &narrow, 4);
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
    uint64_t tail = 0;
    memcpy(&tail, s, n);
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
    if (d->count > 0 && (size_t)d->last_length == n && memcmp(d->text.data + d->last_offset, s, n) == 0)
        return d->last; /* the same as the event before: most events of a stretch share ph and cat */
    if ((size_t)(d->count + 1) * 2 > d->n_slots && !dictionary_grow(d)) return -1;
    if (d->count == 0 && d->offsets.size == 0) {
        int32_t zero = 0;
        if (!bytes_append(&d->offsets, &zero, 4)) return -1;
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

enum { PH, CAT, NAME, N_DICTIONARIES };
enum { EVENT_ID, PID, TID, TS_NS, DUR_NS, CORRELATION, EXTERNAL_ID, DEVICE, STREAM, N_COLUMNS };

typedef struct {
    const char *p, *end, *start;
    const char *problem; /* why the part is left to DuckDB's reader; NULL while all is well */
    const char *problem_at;
    int64_t rows;
    Dictionary dictionaries[N_DICTIONARIES];
    Column columns[N_COLUMNS];
    Bytes args_text;
    Bytes args_offsets; /* int64 */
    Column args_valid;  /* its values are unused: only the bitmap */
    Bytes scratch;      /* a decoded string */
} Scan;

#define FAIL(s, why)            \
    do {                        \
        if (!(s)->problem) {    \
            (s)->problem = why; \
            (s)->problem_at = (s)->p; \
        }                       \
        return 0;               \
    } while (0)

/* Bytes that stand for themselves inside a string: printable ASCII but '"' and '\\'. */
static unsigned char PLAIN[256];

/* The first byte at or after p (before end) that does not stand for itself in a string, 8 bytes at a time. */
static inline const char *plain_run(const char *p, const char *end) {
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    while (end - p >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        uint64_t quote = w ^ (ones * '"'), backslash = w ^ (ones * '\\');
        uint64_t special = ((quote - ones) & ~quote) | ((backslash - ones) & ~backslash) | ((w - ones * 0x20) & ~w) | w;
        if (special & highs) break;
        p += 8;
    }
    while (p < end && PLAIN[(unsigned char)*p]) p++;
    return p;
}

static inline void skip_space(Scan *s) {
    while (s->p < s->end && (unsigned char)*s->p <= ' ' &&
           (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t'))
        s->p++;
}

static inline int is_digit(char c) { return c >= '0' && c <= '9'; }

/* A string at s->p (at its '"'). out: the decoded bytes (or NULL to only check); compact: the bytes as
 * DuckDB writes the string back (or NULL). Escapes other than \u are kept; \u is left to DuckDB. */
static int read_string(Scan *s, Bytes *decoded, Bytes *compact) {
    const char *p = s->p + 1;
    if (compact && !bytes_put(compact, '"')) FAIL(s, "out of memory");
    for (;;) {
        const char *run = p;
        p = plain_run(p, s->end);
        if (decoded && !bytes_append(decoded, run, (size_t)(p - run))) FAIL(s, "out of memory");
        if (compact && !bytes_append(compact, run, (size_t)(p - run))) FAIL(s, "out of memory");
        if (p >= s->end) {
            s->p = p;
            FAIL(s, "a string runs past the end");
        }
        if (*p == '"') break;
        if (*p != '\\') {
            s->p = p;
            FAIL(s, (unsigned char)*p >= 0x80 ? "a byte outside ASCII" : "a control character in a string");
        }
        if (p + 1 >= s->end) {
            s->p = p;
            FAIL(s, "a string runs past the end");
        }
        char c = p[1], value;
        switch (c) {
        case '"': value = '"'; break;
        case '\\': value = '\\'; break;
        case '/': value = '/'; break;
        case 'b': value = '\b'; break;
        case 'f': value = '\f'; break;
        case 'n': value = '\n'; break;
        case 'r': value = '\r'; break;
        case 't': value = '\t'; break;
        default:
            s->p = p;
            FAIL(s, c == 'u' ? "a \\u escape" : "an invalid escape");
        }
        if (decoded && !bytes_put(decoded, value)) FAIL(s, "out of memory");
        if (compact) {
            if (c == '/') {
                if (!bytes_put(compact, '/')) FAIL(s, "out of memory");
            } else if (!bytes_append(compact, p, 2)) {
                FAIL(s, "out of memory");
            }
        }
        p += 2;
    }
    if (compact && !bytes_put(compact, '"')) FAIL(s, "out of memory");
    s->p = p + 1;
    return 1;
}

typedef struct {
    const char *start;
    size_t int_digits, frac_digits; /* frac_digits without trailing zeros */
    size_t raw_frac_digits;
    int negative, has_fraction, has_exponent;
} Number;

/* A JSON number at s->p, checked against the grammar. */
static int read_number(Scan *s, Number *n) {
    const char *p = s->p;
    memset(n, 0, sizeof *n);
    n->start = p;
    if (p < s->end && *p == '-') {
        n->negative = 1;
        p++;
    }
    const char *digits = p;
    if (p < s->end && *p == '0') {
        p++;
    } else {
        while (p < s->end && is_digit(*p)) p++;
    }
    n->int_digits = (size_t)(p - digits);
    if (n->int_digits == 0) FAIL(s, "invalid JSON");
    if (p < s->end && *p == '.') {
        const char *frac = ++p;
        while (p < s->end && is_digit(*p)) p++;
        n->raw_frac_digits = (size_t)(p - frac);
        if (n->raw_frac_digits == 0) FAIL(s, "invalid JSON");
        n->has_fraction = 1;
        size_t kept = n->raw_frac_digits;
        while (kept > 0 && frac[kept - 1] == '0') kept--;
        n->frac_digits = kept;
    }
    if (p < s->end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < s->end && (*p == '+' || *p == '-')) p++;
        const char *exp = p;
        while (p < s->end && is_digit(*p)) p++;
        if (p == exp) FAIL(s, "invalid JSON");
        n->has_exponent = 1;
    }
    s->p = p;
    return 1;
}

/* The value of an integer Number that fits int64; 0 if it does not fit or is not an integer. */
static int integer_value(const Number *n, int64_t *out) {
    if (n->has_fraction || n->has_exponent || n->int_digits > 18) return 0;
    const char *p = n->start + n->negative;
    int64_t v = 0;
    for (size_t i = 0; i < n->int_digits; i++) v = v * 10 + (p[i] - '0');
    *out = n->negative ? -v : v;
    return 1;
}

/* Whether the decimal text of n (up to s->p) is the shortest form of the double it reads as, and the closest
 * of that length: what a shortest round-trip writer (DuckDB's, Kineto's) prints for that double. */
static int shortest_form(Scan *s, const Number *n) {
    char digits[32], buffer[40];
    size_t k = 0;
    int leading = 1;
    for (const char *p = n->start + n->negative; p < s->p; p++) {
        if (*p == '.') continue;
        if (leading && *p == '0') continue;
        leading = 0;
        if (k == sizeof digits) return 0;
        digits[k++] = *p;
    }
    while (k > 0 && digits[k - 1] == '0') k--;
    if (k == 0 || k > 17) return 0;
    char *parsed_end;
    double value = strtod(n->start, &parsed_end);
    if (parsed_end != s->p) return 0;
    snprintf(buffer, sizeof buffer, "%.*e", (int)k - 1, value < 0 ? -value : value);
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

/* Copy a number into args as DuckDB writes it back, or say it cannot be copied exactly. */
static int copy_number(Scan *s, const Number *n, Bytes *out) {
    if (n->has_exponent) FAIL(s, "a number with an exponent in args");
    if (!n->has_fraction) {
        if (n->negative && n->int_digits == 1 && n->start[1] == '0') FAIL(s, "-0 in args");
        if (!bytes_append(out, n->start, (size_t)(s->p - n->start))) FAIL(s, "out of memory");
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
    if (!bytes_append(out, n->start, (size_t)(frac - n->start) + kept)) FAIL(s, "out of memory");
    return 1;
}

static int expect_literal(Scan *s, const char *word, size_t n) {
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0) FAIL(s, "invalid JSON");
    s->p += n;
    return 1;
}

/* Any JSON value at s->p (after whitespace); written compact into out when out is not NULL. */
static int copy_value(Scan *s, Bytes *out, int depth) {
    if (depth > 64) FAIL(s, "nesting deeper than 64");
    if (s->p >= s->end) FAIL(s, "invalid JSON");
    char c = *s->p;
    if (c == '"') return read_string(s, NULL, out);
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        s->p++;
        if (out && !bytes_put(out, c)) FAIL(s, "out of memory");
        skip_space(s);
        if (s->p < s->end && *s->p == close) {
            s->p++;
            if (out && !bytes_put(out, close)) FAIL(s, "out of memory");
            return 1;
        }
        for (;;) {
            if (c == '{') {
                if (s->p >= s->end || *s->p != '"') FAIL(s, "invalid JSON");
                if (!read_string(s, NULL, out)) return 0;
                skip_space(s);
                if (s->p >= s->end || *s->p != ':') FAIL(s, "invalid JSON");
                s->p++;
                if (out && !bytes_put(out, ':')) FAIL(s, "out of memory");
                skip_space(s);
            }
            if (!copy_value(s, out, depth + 1)) return 0;
            skip_space(s);
            if (s->p < s->end && *s->p == ',') {
                s->p++;
                if (out && !bytes_put(out, ',')) FAIL(s, "out of memory");
                skip_space(s);
                continue;
            }
            if (s->p < s->end && *s->p == close) {
                s->p++;
                if (out && !bytes_put(out, close)) FAIL(s, "out of memory");
                return 1;
            }
            FAIL(s, "invalid JSON");
        }
    }
    if (c == '-' || is_digit(c)) {
        Number n;
        if (!read_number(s, &n)) return 0;
        return out ? copy_number(s, &n, out) : 1;
    }
    const char *word = c == 't' ? "true" : c == 'f' ? "false" : "null";
    size_t len = strlen(word);
    if (!expect_literal(s, word, len)) return 0;
    if (out && !bytes_append(out, word, len)) FAIL(s, "out of memory");
    return 1;
}

static inline int at_null(Scan *s) {
    return (size_t)(s->end - s->p) >= 4 && memcmp(s->p, "null", 4) == 0;
}

/* The key at s->p, undecoded; keys with escapes are left to DuckDB. */
static int read_key(Scan *s, const char **key, size_t *len) {
    if (s->p >= s->end || *s->p != '"') FAIL(s, "invalid JSON");
    const char *start = ++s->p;
    s->p = plain_run(s->p, s->end);
    if (s->p >= s->end || *s->p != '"') FAIL(s, "a key with an escape or a byte outside ASCII");
    *key = start;
    *len = (size_t)(s->p - start);
    s->p++;
    skip_space(s);
    if (s->p >= s->end || *s->p != ':') FAIL(s, "invalid JSON");
    s->p++;
    skip_space(s);
    return 1;
}

#define KEY_IS(key, len, word) ((len) == sizeof(word) - 1 && memcmp((key), (word), sizeof(word) - 1) == 0)

/* args: copied compact, and the four join keys read from its top level. */
static int read_args(Scan *s, int64_t keys[4], int found[4]) {
    Bytes *out = &s->args_text;
    s->p++;
    if (!bytes_put(out, '{')) FAIL(s, "out of memory");
    skip_space(s);
    if (s->p < s->end && *s->p == '}') {
        s->p++;
        if (!bytes_put(out, '}')) FAIL(s, "out of memory");
        return 1;
    }
    for (;;) {
        const char *key;
        size_t len;
        const char *key_start = s->p;
        if (!read_key(s, &key, &len)) return 0;
        if (!bytes_append(out, key_start, len + 2) || !bytes_put(out, ':')) FAIL(s, "out of memory");
        int which = KEY_IS(key, len, "correlation")   ? 0
                    : KEY_IS(key, len, "External id") ? 1
                    : KEY_IS(key, len, "device")      ? 2
                    : KEY_IS(key, len, "stream")      ? 3
                                                      : -1;
        if (which >= 0) {
            if (found[which]) FAIL(s, "a join key twice in args");
            found[which] = 1;
            if (s->p < s->end && (*s->p == '-' || is_digit(*s->p))) {
                const char *value_start = s->p;
                Number n;
                if (!read_number(s, &n)) return 0;
                int64_t value;
                if (!integer_value(&n, &value)) FAIL(s, "a join key that is not an integer");
                if (which >= 2 && (value > INT32_MAX || value < INT32_MIN)) FAIL(s, "a device or stream past int32");
                if (n.negative && value == 0) FAIL(s, "-0 in args");
                keys[which] = value;
                if (!bytes_append(out, value_start, (size_t)(s->p - value_start))) FAIL(s, "out of memory");
            } else if (at_null(s)) {
                found[which] = 2; /* null: NULL */
                s->p += 4;
                if (!bytes_append(out, "null", 4)) FAIL(s, "out of memory");
            } else {
                FAIL(s, "a join key that is not an integer");
            }
        } else if (!copy_value(s, out, 1)) {
            return 0;
        }
        skip_space(s);
        if (s->p < s->end && *s->p == ',') {
            s->p++;
            if (!bytes_put(out, ',')) FAIL(s, "out of memory");
            skip_space(s);
            continue;
        }
        if (s->p < s->end && *s->p == '}') {
            s->p++;
            if (!bytes_put(out, '}')) FAIL(s, "out of memory");
            return 1;
        }
        FAIL(s, "invalid JSON");
    }
}

/* ts or dur: integer nanoseconds of a decimal with at most 3 fraction digits. */
static int read_time(Scan *s, int64_t *ns, int *present) {
    if (at_null(s)) {
        s->p += 4;
        *present = 0;
        return 1;
    }
    if (s->p >= s->end || !(*s->p == '-' || is_digit(*s->p))) FAIL(s, "a ts or dur that is not a number");
    Number n;
    if (!read_number(s, &n)) return 0;
    if (n.has_exponent || n.raw_frac_digits > 3 || n.int_digits > 15) FAIL(s, "a ts or dur DuckDB would round");
    const char *p = n.start + n.negative;
    int64_t v = 0;
    for (size_t i = 0; i < n.int_digits; i++) v = v * 10 + (p[i] - '0');
    int64_t frac = 0;
    const char *f = p + n.int_digits + 1;
    for (size_t i = 0; i < 3; i++) frac = frac * 10 + (i < n.raw_frac_digits ? f[i] - '0' : 0);
    v = v * 1000 + frac;
    *ns = n.negative ? -v : v;
    *present = 1;
    return 1;
}

/* pid or tid: an integer, or a string that TRY_CAST makes NULL. */
static int read_id(Scan *s, int64_t *value, int *present) {
    *present = 0;
    if (at_null(s)) {
        s->p += 4;
        return 1;
    }
    if (s->p < s->end && *s->p == '"') {
        char first = s->p + 1 < s->end ? s->p[1] : 0;
        if (!((first >= 'A' && first <= 'Z') || (first >= 'a' && first <= 'z') || first == '"'))
            FAIL(s, "a pid or tid string that may read as a number");
        return read_string(s, NULL, NULL);
    }
    if (s->p >= s->end || !(*s->p == '-' || is_digit(*s->p))) FAIL(s, "a pid or tid of another type");
    Number n;
    if (!read_number(s, &n)) return 0;
    if (!integer_value(&n, value)) FAIL(s, "a pid or tid that is not an int64");
    *present = 1;
    return 1;
}

static int read_text(Scan *s, Dictionary *d, int64_t row, int *seen) {
    if (*seen) FAIL(s, "a key twice in an event");
    *seen = 1;
    if (at_null(s)) {
        s->p += 4;
        if (!column_push(&d->indices, row, 0, 0)) FAIL(s, "out of memory");
        return 1;
    }
    if (s->p >= s->end || *s->p != '"') FAIL(s, "a ph, cat or name that is not a string");
    const char *text = s->p + 1, *p = text;
    p = plain_run(p, s->end);
    size_t length = (size_t)(p - text);
    if (p < s->end && *p == '"') { /* no escape: the bytes as they are */
        s->p = p + 1;
    } else {
        s->scratch.size = 0;
        if (!read_string(s, &s->scratch, NULL)) return 0;
        text = s->scratch.data ? s->scratch.data : "";
        length = s->scratch.size;
    }
    int32_t index = dictionary_index(d, text, length);
    if (index < 0) FAIL(s, "out of memory");
    if (!column_push(&d->indices, row, index, 1)) FAIL(s, "out of memory");
    return 1;
}

static int read_event(Scan *s, int64_t row, int64_t first_id) {
    if (s->p >= s->end || *s->p != '{') FAIL(s, "an element of traceEvents that is not an object");
    s->p++;
    skip_space(s);
    int seen[8] = {0}; /* ph cat name pid tid ts dur args */
    int64_t pid = 0, tid = 0, ts = 0, dur = 0;
    int has_pid = 0, has_tid = 0, has_ts = 0, has_dur = 0, has_args = 0;
    int64_t keys[4] = {0};
    int found[4] = {0};
    size_t args_start = s->args_text.size;
    if (s->p < s->end && *s->p == '}') {
        s->p++;
    } else {
        for (;;) {
            const char *key;
            size_t len;
            if (!read_key(s, &key, &len)) return 0;
            int ok = 1;
            if (KEY_IS(key, len, "ph")) {
                ok = read_text(s, &s->dictionaries[PH], row, &seen[0]);
            } else if (KEY_IS(key, len, "cat")) {
                ok = read_text(s, &s->dictionaries[CAT], row, &seen[1]);
            } else if (KEY_IS(key, len, "name")) {
                ok = read_text(s, &s->dictionaries[NAME], row, &seen[2]);
            } else if (KEY_IS(key, len, "pid") || KEY_IS(key, len, "tid") || KEY_IS(key, len, "ts") ||
                       KEY_IS(key, len, "dur")) {
                int which = key[0] == 'p' ? 3 : key[0] == 't' && key[1] == 'i' ? 4 : key[0] == 't' ? 5 : 6;
                if (seen[which]) FAIL(s, "a key twice in an event");
                seen[which] = 1;
                ok = which == 3   ? read_id(s, &pid, &has_pid)
                     : which == 4 ? read_id(s, &tid, &has_tid)
                     : which == 5 ? read_time(s, &ts, &has_ts)
                                  : read_time(s, &dur, &has_dur);
            } else if (KEY_IS(key, len, "args")) {
                if (seen[7]) FAIL(s, "a key twice in an event");
                seen[7] = 1;
                if (at_null(s)) {
                    s->p += 4;
                } else if (s->p < s->end && *s->p == '{') {
                    ok = read_args(s, keys, found);
                    has_args = 1;
                } else {
                    FAIL(s, "args that is not an object");
                }
            } else {
                ok = copy_value(s, NULL, 1);
            }
            if (!ok) return 0;
            skip_space(s);
            if (s->p < s->end && *s->p == ',') {
                s->p++;
                skip_space(s);
                continue;
            }
            if (s->p < s->end && *s->p == '}') {
                s->p++;
                break;
            }
            FAIL(s, "invalid JSON");
        }
    }
    for (int d = 0; d < N_DICTIONARIES; d++) {
        if (!seen[d] && !column_push(&s->dictionaries[d].indices, row, 0, 0)) FAIL(s, "out of memory");
    }
    Column *c = s->columns;
    int pushed = column_push(&c[EVENT_ID], row, first_id + row, 1) && column_push(&c[PID], row, pid, has_pid) &&
                 column_push(&c[TID], row, tid, has_tid) && column_push(&c[TS_NS], row, ts, has_ts) &&
                 column_push(&c[DUR_NS], row, dur, has_dur);
    for (int k = 0; k < 4 && pushed; k++) {
        pushed = column_push(&c[CORRELATION + k], row, keys[k], found[k] == 1);
    }
    if (!has_args) s->args_text.size = args_start;
    int64_t args_end = (int64_t)s->args_text.size;
    pushed = pushed && column_push(&s->args_valid, row, 0, has_args) && bytes_append(&s->args_offsets, &args_end, 8);
    if (!pushed) FAIL(s, "out of memory");
    return 1;
}

/* A JSON array of events, or with bare, the events alone: {…}, {…} (an empty or blank buffer: none). */
static int scan_array(Scan *s, int64_t first_id, int bare) {
    int64_t zero = 0;
    if (!bytes_append(&s->args_offsets, &zero, 8)) FAIL(s, "out of memory");
    skip_space(s);
    if (!bare) {
        if (s->p >= s->end || *s->p != '[') FAIL(s, "not a JSON array");
        s->p++;
        skip_space(s);
    }
    const char close = bare ? 0 : ']';
    if (bare ? s->p == s->end : (s->p < s->end && *s->p == ']')) {
        s->p++;
    } else {
        for (;;) {
            if (!read_event(s, s->rows, first_id)) return 0;
            s->rows++;
            skip_space(s);
            if (s->p < s->end && *s->p == ',') {
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

/* Each exported array owns its buffers (private_data: a NULL-terminated list of pointers to free) and
 * releases its children and dictionary, so a consumer may move any of them out. */
static void release_array(struct ArrowArray *array) {
    if (!array->release) return;
    void **owned = array->private_data;
    for (void **p = owned; p && *p; p++) free(*p);
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

/* An array over buffers (taken: freed on release), NULL entries standing for no buffer. */
static struct ArrowArray *new_array(struct ArrowArray *array, int64_t length, int64_t nulls, int n_buffers,
                                    void *b0, void *b1, void *b2) {
    if (!array) array = calloc(1, sizeof *array);
    void **owned = calloc(4, sizeof(void *));
    const void **buffers = calloc(3, sizeof(void *));
    if (!array || !owned || !buffers) {
        free(owned);
        free(buffers);
        return NULL;
    }
    void *given[3] = {b0, b1, b2};
    int n_owned = 0;
    for (int i = 0; i < n_buffers; i++) {
        buffers[i] = given[i];
        if (given[i]) owned[n_owned++] = given[i];
    }
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
                                           "external_id", "device",   "stream",      "args"};
#define N_FIELDS 13

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
        if (i >= 1 && i <= 3) {
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

static void free_scan(Scan *s) {
    for (int d = 0; d < N_DICTIONARIES; d++) {
        free(s->dictionaries[d].text.data);
        free(s->dictionaries[d].offsets.data);
        free(s->dictionaries[d].slots);
        free(s->dictionaries[d].indices.values.data);
        free(s->dictionaries[d].indices.valid.data);
    }
    for (int c = 0; c < N_COLUMNS; c++) {
        free(s->columns[c].values.data);
        free(s->columns[c].valid.data);
    }
    free(s->args_text.data);
    free(s->args_offsets.data);
    free(s->args_valid.values.data);
    free(s->args_valid.valid.data);
    free(s->scratch.data);
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
        if (i >= 1 && i <= 3) {
            Dictionary *d = &s->dictionaries[i - 1];
            if (d->offsets.size == 0) {
                int32_t zero = 0;
                bytes_append(&d->offsets, &zero, 4);
                if (d->offsets.failed) goto fail;
            }
            struct ArrowArray *values = new_array(NULL, d->count, 0, 3, NULL, take(&d->offsets), take(&d->text));
            if (!values) goto fail;
            int64_t nulls = d->indices.nulls;
            child = new_array(NULL, rows, nulls, 2, nulls ? take(&d->indices.valid) : NULL,
                              take(&d->indices.values), NULL);
            if (!child) {
                release_array(values);
                free(values);
                goto fail;
            }
            child->dictionary = values;
        } else if (i == 12) {
            int64_t nulls = s->args_valid.nulls;
            child = new_array(NULL, rows, nulls, 3, nulls ? take(&s->args_valid.valid) : NULL,
                              take(&s->args_offsets), take(&s->args_text));
        } else {
            Column *c = &s->columns[i == 0 ? EVENT_ID : i - 3];
            int64_t nulls = c->nulls;
            child = new_array(NULL, rows, nulls, 2, nulls ? take(&c->valid) : NULL, take(&c->values), NULL);
        }
        if (!child) goto fail;
        children[i] = child;
    }
    if (!new_array(&state->batch, rows, 0, 1, NULL, NULL, NULL)) goto fail;
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

/* ------------------------------------------------------------------ Python */

static PyObject *scan(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    long long first_id;
    int bare = 0;
    if (!PyArg_ParseTuple(args, "y*L|p", &view, &first_id, &bare)) return NULL;
    Scan *s = calloc(1, sizeof *s);
    if (!s) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    s->start = s->p = view.buf;
    s->end = s->p + view.len;
    for (int c = 0; c < N_COLUMNS; c++) s->columns[c].width = (c == DEVICE || c == STREAM) ? 4 : 8;
    for (int d = 0; d < N_DICTIONARIES; d++) s->dictionaries[d].indices.width = 4;
    s->args_valid.width = 4;
    int ok;
    Py_BEGIN_ALLOW_THREADS
    ok = scan_array(s, first_id, bare);
    Py_END_ALLOW_THREADS
    PyObject *result;
    if (!ok) {
        int out_of_memory = strcmp(s->problem, "out of memory") == 0;
        result = out_of_memory ? PyErr_NoMemory()
                               : Py_BuildValue("(Osn)", Py_None, s->problem, (Py_ssize_t)(s->problem_at - s->start));
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
            result = Py_BuildValue("(LN)", (long long)s->rows, capsule);
        }
    }
    free_scan(s);
    free(s);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(buffer, first_id, bare=False) -> (rows, arrow_array_stream capsule), or (None, problem, offset) for "
     "a part this reader leaves to DuckDB's JSON reader. The buffer holds a JSON array of events or, with bare, "
     "the events alone ({...}, {...})."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kineto", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__kineto(void) {
    for (int c = 0x20; c < 0x80; c++) PLAIN[c] = c != '"' && c != '\\';
    return PyModule_Create(&module);
}
