/* kineto_strings.h, a part of _kineto.c (included there once, after the parts before it): the scan's state (Scan,
 * FAIL) and JSON's strings and whitespace, many bytes at a time. */

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
