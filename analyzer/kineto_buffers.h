/* kineto_buffers.h, a part of _kineto.c (included there once, after the parts before it): the buffers the scan
 * fills: a growing byte buffer, nullable columns of fixed-width values, and dictionaries of distinct strings (open
 * addressing) with their index columns. */

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
