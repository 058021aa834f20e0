/* kineto_values.h, a part of _kineto.c (included there once, after the parts before it): JSON's numbers (checked,
 * copied as DuckDB writes them back), any value written compact, and object keys. */

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
