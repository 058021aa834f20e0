/* kineto_part_facts.h, a part of _kineto.c (included there once, after the parts before it): what is read off a
 * part's columns after its scan: the 2021 format's names, validate.sql's rules 1-7, each device event's stream, and
 * the part's facts. */

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
