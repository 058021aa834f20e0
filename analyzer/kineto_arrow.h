/* kineto_arrow.h, a part of _kineto.c (included there once, after the parts before it): the scanned columns
 * exported as an Arrow C stream of one struct batch. */

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
