/* fuzz_kineto.c: a libFuzzer harness around the native reader (analyzer/_kineto.c), built with AddressSanitizer
 * and UBSan by benchmarks/libfuzzer/fuzz_kineto.sh (which also says how to run it).
 *
 * Each input is one part: its first byte picks the form (bit 0: bare events, no brackets), the rest is the part,
 * copied into a buffer of exactly its size so that a read past either end is a heap overflow. The input goes
 * through what scan() runs without the GIL (scan_array, modernize_categories, keep_flow_ids, rows_breaking_rules,
 * has_repeats with its keys, part_facts) and the Arrow export, and the exported batch is checked: every column as
 * long as the rows, dictionary indices and args offsets inside their buffers, each args text an object that the
 * reader reads back to the same text. Python's part (the buffer protocol, the capsule) is left out: it holds
 * nothing the input reaches. Agreement with DuckDB's reader is checked apart, on the corpus this grows
 * (benchmarks/fuzz_kineto.py diff).
 */
#include "../../analyzer/_kineto.c"

#include <assert.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    for (int c = 0x20; c < 0x80; c++) PLAIN[c] = c != '"' && c != '\\';
    SPACE[' '] = SPACE['\n'] = SPACE['\r'] = SPACE['\t'] = 1;
    init_quoted_event_keys();
    return 0;
}

static Scan *new_scan(const char *data, size_t size) {
    Scan *s = calloc(1, sizeof *s);
    assert(s);
    s->start = s->p = data;
    s->end = data + size;
    for (int c = 0; c < N_COLUMNS; c++) s->columns[c].width = (c == DEVICE || c == STREAM) ? 4 : 8;
    for (int d = 0; d < N_DICTIONARIES; d++) s->dictionaries[d].indices.width = 4;
    return s;
}

static int is_valid(const struct ArrowArray *a, int64_t row) {
    const uint8_t *bitmap = a->buffers[0];
    return !bitmap || ((bitmap[row >> 3] >> (row & 7)) & 1);
}

/* args text read back: [{"args": text}] scans to one row whose args is the same text. */
static void check_args_round_trip(const char *text, size_t n) {
    static const char head[] = "[{\"args\":", tail[] = "}]";
    size_t size = sizeof head - 1 + n + sizeof tail - 1;
    char *event = malloc(size);
    assert(event);
    memcpy(event, head, sizeof head - 1);
    memcpy(event + sizeof head - 1, text, n);
    memcpy(event + sizeof head - 1 + n, tail, sizeof tail - 1);
    Scan *s = new_scan(event, size);
    int ok = scan_array(s, 0, 0);
    if (ok != 1) {
        fprintf(stderr, "args written %.*s do not read back: %s\n", (int)n, text, s->problem);
        abort();
    }
    assert(s->rows == 1);
    size_t again = (size_t)(s->args_offsets[1] - s->args_offsets[0]);
    if (again != n || memcmp(s->args_text, text, n) != 0) {
        fprintf(stderr, "args written %.*s read back as %.*s\n", (int)n, text, (int)again, s->args_text);
        abort();
    }
    free_scan(s);
    free(s);
    free(event);
}

static void check_batch(struct ArrowArrayStream *stream, int64_t rows) {
    struct ArrowSchema schema;
    assert(stream->get_schema(stream, &schema) == 0);
    assert(schema.n_children == N_FIELDS);
    schema.release(&schema);
    struct ArrowArray batch;
    assert(stream->get_next(stream, &batch) == 0);
    assert(batch.release && batch.length == rows && batch.n_children == N_FIELDS);
    for (int i = 0; i < N_FIELDS; i++) {
        const struct ArrowArray *child = batch.children[i];
        assert(child->length == rows && child->null_count >= 0 && child->null_count <= rows);
        int64_t nulls = 0;
        for (int64_t row = 0; row < rows; row++) nulls += !is_valid(child, row);
        assert(nulls == child->null_count);
        if ((i >= 1 && i <= 3) || i >= 14) { /* ph, cat, name, pid_name, tid_name */
            const struct ArrowArray *d = child->dictionary;
            const int32_t *offsets = d->buffers[1];
            assert(offsets[0] == 0);
            for (int64_t k = 0; k < d->length; k++) assert(offsets[k] <= offsets[k + 1]);
            const int32_t *index = child->buffers[1];
            for (int64_t row = 0; row < rows; row++) {
                if (is_valid(child, row)) assert(index[row] >= 0 && index[row] < d->length);
            }
        } else if (i == 12) {
            const int64_t *offsets = child->buffers[1];
            const char *text = child->buffers[2];
            assert(offsets[0] == 0);
            for (int64_t row = 0; row < rows; row++) {
                assert(offsets[row] <= offsets[row + 1]);
                size_t n = (size_t)(offsets[row + 1] - offsets[row]);
                if (!is_valid(child, row)) {
                    assert(n == 0);
                    continue;
                }
                assert(n >= 2 && text[offsets[row]] == '{' && text[offsets[row + 1] - 1] == '}');
                check_args_round_trip(text + offsets[row], n);
            }
        }
    }
    batch.release(&batch);
    struct ArrowArray end;
    assert(stream->get_next(stream, &end) == 0 && end.release == NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    int bare = data[0] & 1;
    size--;
    char *part = malloc(size ? size : 1);
    assert(part);
    memcpy(part, data + 1, size);
    Scan *s = new_scan(part, size);
    int ok = scan_array(s, (int64_t)1 << 40, bare);
    if (ok == 1) {
        assert(modernize_categories(s) && keep_flow_ids(s));
        int64_t broken = rows_breaking_rules(s);
        assert(broken >= 0 && broken <= s->rows);
        Bytes keys = {0};
        int repeats = has_repeats(s, &keys);
        assert(repeats == 0 || repeats == 1);
        assert(keys.size % 8 == 0 && keys.size / 8 <= (size_t)s->rows); /* one a launch or device event */
        free(keys.data);
        int facts = part_facts(s);
        assert(facts >= 0 && facts < 16); /* the FACT_ bits of part_facts */
        int64_t rows = s->rows;
        struct ArrowArrayStream *stream = export_stream(s);
        assert(stream);
        check_batch(stream, rows);
        stream->release(stream);
        free(stream);
    } else {
        assert(s->problem && s->problem_at >= s->start && s->problem_at <= s->end);
        assert(strcmp(s->problem, "out of memory") != 0);
    }
    free_scan(s);
    free(s);
    free(part);
    return 0;
}
