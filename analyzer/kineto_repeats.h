/* kineto_repeats.h, a part of _kineto.c (included there once, after the parts before it): validate_repeats.sql's
 * question asked of the columns: whether a part, or two parts, repeat a launch's or device event's key. */

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
