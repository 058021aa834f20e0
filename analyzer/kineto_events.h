/* kineto_events.h, a part of _kineto.c (included there once, after the parts before it): an event's fields (keys,
 * args' join keys, times, flow ids, names), one event, and the array of them. */
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
