/* client/intake.c - a worker's message into the batches (see intake.h): checked before anything of it is
 * trusted, then element by element claimed, finished (the suffix, when the worker stopped at a cut) and
 * copied once into its batch slot. Threads: the stream's; the assembler locks. */
#include "client/intake.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/remote.h"
#include "lib/err.h"
#include "pipeline/compress.h"
#include "pipeline/element_size.h"
#include "pipeline/fields.h"
#include "pipeline/op_registry.h"
#include "pipeline/produce.h"
#include "pipeline/wire.h"

static const uint8_t *contiguous(struct intake_rx *rx, size_t off, size_t len);

/* A compressed data tensor checked frame by frame and decompressed into rx->raw; the message is then read
 * from there as if it had come raw (one more copy of the elements' bytes, only on compressed streams).
 * Returns NULL or why the message is refused. */
static const char *decompress_into(struct intake_rx *rx, struct spw_wire_tensor *t, char *err, size_t errlen)
{
    const uint8_t *z = contiguous(rx, t->offset, t->nbytes);
    if (!z)
        return "out of memory for a compressed message";
    if (rx->raw_cap < t->raw_bytes) {           /* raw_bytes <= SPW_WIRE_MAX_RAW_BYTES (checked at decode) */
        uint8_t *nr = realloc(rx->raw, t->raw_bytes);
        if (!nr)
            return "out of memory for a compressed message";
        rx->raw = nr;
        rx->raw_cap = t->raw_bytes;
    }
    if (!rx->z && spw_zstd_create(0, &rx->z) != 0)
        return "out of memory for a compressed message";
    const size_t n = (size_t)t->shape[0];
    if (spw_zstd_decompress(rx->z, z, t->nbytes, n, t->raw_bytes / n, rx->raw, err, errlen) != 0)
        return err;
    rx->raw_part = (struct iovec){rx->raw, t->raw_bytes};
    rx->parts = &rx->raw_part;
    rx->n = 1;
    t->offset = 0;
    t->nbytes = t->raw_bytes;
    t->data = rx->raw;
    t->encoding = SPW_WIRE_RAW;
    return NULL;
}

/* The element's bytes contiguous: in place, or gathered into the scratch buffer. NULL: out of memory. */
static const uint8_t *contiguous(struct intake_rx *rx, size_t off, size_t len)
{
    const uint8_t *p = spw_wire_view(rx->parts, rx->n, off, len, NULL);
    if (p)
        return p;
    if (rx->scratch_cap < len) {
        uint8_t *ns = realloc(rx->scratch, len);
        if (!ns)
            return NULL;
        rx->scratch = ns;
        rx->scratch_cap = len;
    }
    spw_wire_copy(rx->parts, rx->n, off, len, rx->scratch);
    return rx->scratch;
}

/* A view of element i of a received tensor, its bytes at p, as an engine value (not owned). */
static struct spw_value view_of(const struct spw_wire_tensor *t, const uint8_t *data)
{
    struct spw_value v = {.placed = true};
    const size_t eb = t->nbytes / (size_t)t->shape[0];
    uint8_t *p = (uint8_t *)data;
    if (t->dtype == SPW_DTYPE_U8 && t->ndim == 4 && (t->shape[3] == 3 || t->shape[3] == 1)) {
        const int c = (int)t->shape[3];     /* RGB, or the one channel of a grey output */
        v.img = (struct spw_image){.w = (int)t->shape[2], .h = (int)t->shape[1], .c = c,
                                   .stride = (size_t)t->shape[2] * (size_t)c, .data = p};
    } else {
        v.is_tensor = true;
        v.t.dtype = t->dtype;
        v.t.ndim = t->ndim - 1;
        memcpy(v.t.shape, t->shape + 1, sizeof(int64_t) * (size_t)(t->ndim - 1));
        v.t.nbytes = eb;
        v.t.data = p;
    }
    return v;
}

/* An owned copy of a view. */
static int own(const struct spw_value *view, struct spw_value *out)
{
    memset(out, 0, sizeof *out);
    if (view->is_tensor) {
        if (spw_tensor_alloc(&out->t, view->t.dtype, view->t.ndim, view->t.shape) != 0)
            return -ENOMEM;
        memcpy(out->t.data, view->t.data, view->t.nbytes);
        out->is_tensor = true;
        return 0;
    }
    if (spw_image_alloc(&out->img, view->img.w, view->img.h, view->img.c) != 0)
        return -ENOMEM;
    memcpy(out->img.data, view->img.data, (size_t)view->img.w * view->img.h * (size_t)view->img.c);
    return 0;
}

/* Whether group g's first op only reads its input (normalize / to_tensor write a new tensor), so it may run
 * on bytes it does not own. Image ops may work in place or free their input. */
static bool reads_input_only(const struct spw_element_ctx *ctx, int g)
{
    return spw_op_def(ctx->spec->ops[ctx->groups[g].first].kind)->cls == SPW_OPC_TO_TENSOR;
}

/* A sample could not be made (here, or on worker `from`): log it naming its file, and fail the job under
 * on_error fail. */
static void sample_failed(const struct intake *in, int64_t sample, int rc, const char *err, const char *from)
{
    const struct spw_producer p = {.spec = in->ctx->spec, .src = in->src, .ctx = in->ctx, .component = "client",
                                   .job = in->job->job};
    char msg[1024];
    if (spw_produce_failed(&p, sample, rc, err, from, msg, sizeof msg))
        asm_fail(in->a, rc, msg);
}

/* The end of take_element: v (made by rc's run) and its fields (these, or v's) handed to the assembler, a
 * failure logged (an empty value parks as a skipped sample). */
static bool finish_taken(const struct intake *in, int64_t sample, struct asm_ticket *t, enum asm_claim c, int rc,
                         struct spw_value *v, struct spw_fields *fields, const char *err)
{
    if (!fields) {          /* or those riding on the value */
        fields = v->fields;
        v->fields = NULL;
    }
    if (rc != 0) {
        sample_failed(in, sample, rc, rc == -ENOMEM && !err[0] ? "out of memory" : err, NULL);
        spw_value_free(v);
    }
    asm_finish(in->a, t, c, v, fields, rc == 0, in->elements);
    spw_value_free(v);
    return true;
}

/* Element i's fields, taken from the message's (checked when it arrived; NULL without fields). */
static struct spw_fields *element_fields(struct intake_rx *rx, size_t i)
{
    struct spw_fields *f = i < rx->n_unpacked ? rx->unpacked[i] : NULL;
    if (f)
        rx->unpacked[i] = NULL;
    return f;
}

/* Finish one received element: claim it, run the suffix if any, put it in its batch (or park it).
 * Returns false for a duplicate. */
static bool take_element(const struct intake *in, struct intake_rx *rx, const struct spw_wire_batch *b, size_t i)
{
    struct asm_ticket t;
    enum asm_claim c = asm_claim(in->a, b->epoch, b->positions[i], &t);
    if (c == ASM_DUP || c == ASM_DROP)
        return c == ASM_DROP;
    rx->parked += c == ASM_PARK;
    const enum spw_layout layout = in->ctx->spec->batch.layout;
    const struct spw_wire_tensor *wt = &b->tensors[0];
    const size_t eb = wt->nbytes / (size_t)wt->shape[0], off = wt->offset + i * eb;
    char err[256] = "";
    int rc = 0;
    struct spw_fields *fields = element_fields(rx, i);
    struct spw_value shape_only = view_of(wt, NULL), v = {0};
    if (b->cut == in->job->groups && c == ASM_PLACE && (shape_only.is_tensor || layout == SPW_LAYOUT_HWC)) {
        /* The one copy: from the received parts straight into the batch. */
        enum spw_dtype dt;
        int ndim;
        int64_t shape[SPW_TENSOR_MAX_DIMS];
        spw_value_out_shape(&shape_only, layout, &dt, &ndim, shape);
        uint8_t *dst = asm_dst(in->a, &t, dt, ndim, shape);
        if (dst)
            spw_wire_copy(rx->parts, rx->n, off, eb, dst);
        struct spw_value written = {.placed = true};
        asm_finish(in->a, &t, c, &written, fields, dst != NULL, in->elements);
        return true;
    }
    if (b->cut < in->job->groups && !shape_only.is_tensor && spw_element_rows_group(in->ctx, b->cut)) {
        /* What is left is the pipeline's last normalize: it reads the rows where they arrived (a 150 KB
         * image spans three of gRPC's 64 KB slices; no gather) and writes into the batch. */
        struct asm_place place;
        struct spw_element_dest dest = asm_element_dest(in->a, &t, &place);
        rc = spw_element_run_rows(in->ctx, b->cut, shape_only.img.w, shape_only.img.h, rx->parts, rx->n, off, &v,
                                  c == ASM_PLACE ? &dest : NULL, err, sizeof err);
        return finish_taken(in, b->samples[i], &t, c, rc, &v, fields, err);
    }
    const uint8_t *bytes = contiguous(rx, off, eb);
    if (!bytes) {
        asm_finish(in->a, &t, c, &v, fields, false, NULL);
        asm_fail(in->a, -ENOMEM, "out of memory receiving an element");
        return true;
    }
    struct spw_value view = view_of(wt, bytes);
    if (b->cut == in->job->groups && c == ASM_PLACE) {
        struct spw_value copy = view;   /* copied once, into the batch; the message stays the owner */
        copy.placed = false;
        asm_finish(in->a, &t, c, &copy, fields, true, in->elements);
        return true;
    }
    struct asm_place place;
    struct spw_element_dest dest = asm_element_dest(in->a, &t, &place);
    /* the suffix runs with the fields riding on the value (its geometric ops move a mask too) */
    if (b->cut == 0) {      /* the encoded file: the whole pipeline runs here */
        v.fields = fields;
        rc = spw_element_run(in->ctx, 0, in->job->groups, b->epoch, b->samples[i], view.t.data, view.t.nbytes, &v,
                             NULL, c == ASM_PLACE ? &dest : NULL, err, sizeof err);
    } else if (b->cut < in->job->groups && c == ASM_PLACE && reads_input_only(in->ctx, b->cut)) {
        /* The suffix reads the element where it arrived (its first op makes a new tensor and leaves its input
         * alone): no copy. */
        v = view;
        v.fields = fields;
        rc = spw_element_run(in->ctx, b->cut, in->job->groups, b->epoch, b->samples[i], NULL, 0, &v, NULL, &dest, err,
                             sizeof err);
    } else if ((rc = own(&view, &v)) == 0) {
        v.fields = fields;
        if (b->cut < in->job->groups)
            rc = spw_element_run(in->ctx, b->cut, in->job->groups, b->epoch, b->samples[i], NULL, 0, &v, NULL, NULL,
                                 err, sizeof err);
    } else {
        spw_fields_free(fields);
    }
    return finish_taken(in, b->samples[i], &t, c, rc, &v, NULL, err);
}

/* Check what a worker controls before trusting it: the job, the cut, the counts and sizes, and that each
 * position's sample is the one the epoch order puts there. Returns NULL or the reason. */
static const char *check_batch(const struct intake *in, uint64_t job, const struct spw_wire_batch *b)
{
    if (b->job != job)
        return "message for another job";
    if (b->cut < 0 || b->cut > in->job->groups)
        return "cut outside the pipeline's groups";
    if (b->n_samples != b->n_positions)
        return "positions and samples differ in count";
    if (b->n_positions && (b->n_tensors < 1 || b->tensors[0].ndim < 2 ||
                           b->tensors[0].shape[0] != (int64_t)b->n_positions ||
                           b->tensors[0].raw_bytes % b->n_positions != 0))
        return "tensor does not hold one element per position";
    if (b->n_positions) {
        const struct spw_wire_tensor *t = &b->tensors[0];
        size_t elem = spw_dtype_size(t->dtype);
        for (int d = 1; d < t->ndim; d++)
            elem *= (size_t)t->shape[d];
        if (elem == 0 || t->raw_bytes / b->n_positions != elem)
            return "element size does not match its shape";
        /* Where the pipeline fixes an element's size at this cut (a crop, a two-sided resize), a worker's
         * element must have it: one the pipeline cannot have made would reach a batch of other shapes and
         * fail the job. */
        int64_t fixed;
        int op;
        const struct spw_group *last = b->cut > 0 ? &in->ctx->groups[b->cut - 1] : NULL;
        if (last && spw_element_fixed_bytes(in->ctx->spec, last->first + last->count, &fixed, &op) &&
            (int64_t)elem != fixed)
            return "element size is not what the pipeline makes at this cut";
    }
    const bool fields = in->ctx->spec->source.n_fields > 0;
    if (b->n_positions && fields && b->n_tensors != 4)
        return "elements without their fields (source.fields)";
    if (b->n_positions && fields) {
        const struct spw_wire_tensor *f = &b->tensors[2], *o = &b->tensors[3];
        if (f->dtype != SPW_DTYPE_U8 || f->ndim != 1 || f->encoding != SPW_WIRE_RAW || o->dtype != SPW_DTYPE_I64 ||
            o->ndim != 1 || o->encoding != SPW_WIRE_RAW || o->shape[0] != (int64_t)b->n_positions + 1)
            return "fields tensors of the wrong type or count";
    }
    for (size_t i = 0; i < b->n_positions; i++) {
        if (b->positions[i] < 0 || b->positions[i] >= in->job->samples)
            return "position outside the epoch";
        if (spw_order_at(in->order, b->epoch, b->positions[i]) != b->samples[i])
            return "sample does not match the epoch order (different seed or manifest?)";
    }
    for (size_t i = 0; i < b->n_tombstones; i++)
        if (b->tombstones[i] < 0 || b->tombstones[i] >= in->job->samples)
            return "tombstone outside the epoch";
    return NULL;
}

/* Tombstone i of a worker's message: the sample is skipped (or, under on_error fail, fails the job) unless
 * another producer delivered it already. */
static void take_tombstone(const struct intake *in, const struct spw_wire_batch *b, size_t i, const char *from)
{
    struct asm_ticket t;
    const int64_t pos = b->tombstones[i];
    enum asm_claim c = asm_claim(in->a, b->epoch, pos, &t);
    if (c == ASM_PLACE || c == ASM_PARK) {
        const char *why = i < b->n_tombstone_errors && b->tombstone_errors[i][0] ? b->tombstone_errors[i]
                                                                                   : "no reason given";
        sample_failed(in, spw_order_at(in->order, b->epoch, pos), SPW_ESOURCE, why, from);
    }
    if (c == ASM_PLACE) {
        asm_done(in->a, &t, false);
    } else if (c == ASM_PARK) {
        struct spw_value none = {0};
        asm_park(in->a, &t, &none, NULL);
    }
}

static void drop_unpacked(struct intake_rx *rx)
{
    for (size_t i = 0; i < rx->n_unpacked; i++)
        spw_fields_free(rx->unpacked[i]);
    rx->n_unpacked = 0;
}

/* The fields of a checked message, each element's unpacked into rx->unpacked: the offsets from 0, in order,
 * ending at the bytes sent, and what each slice holds checked by spw_fields_unpack (lengths against the caps,
 * text as UTF-8). A worker lying about one element's fields has the whole message refused (nothing of it is
 * claimed: the split goes to another producer). Returns NULL or why the message is refused (in err). */
static const char *gather_fields(const struct spw_pipeline_spec *spec, struct intake_rx *rx,
                                 const struct spw_wire_batch *b, char *err, size_t errlen)
{
    const struct spw_wire_tensor *f = &b->tensors[2], *o = &b->tensors[3];
    const size_t n_off = b->n_positions + 1;
    if (rx->field_offsets_cap < n_off) {
        int64_t *no = realloc(rx->field_offsets, n_off * sizeof *no);
        if (!no)
            return "out of memory for an element's fields";
        rx->field_offsets = no;
        rx->field_offsets_cap = n_off;
    }
    if (rx->fields_cap < f->nbytes + 1) {
        uint8_t *nf = realloc(rx->fields, f->nbytes + 1);
        if (!nf)
            return "out of memory for an element's fields";
        rx->fields = nf;
        rx->fields_cap = f->nbytes + 1;
    }
    spw_wire_copy(rx->parts, rx->n, o->offset, n_off * 8, (uint8_t *)rx->field_offsets);
    spw_wire_copy(rx->parts, rx->n, f->offset, f->nbytes, rx->fields);
    if (rx->field_offsets[0] != 0 || rx->field_offsets[b->n_positions] != (int64_t)f->nbytes)
        return "fields offsets do not span the fields sent";
    for (size_t i = 0; i < b->n_positions; i++)
        if (rx->field_offsets[i + 1] < rx->field_offsets[i])
            return "fields offsets out of order";
    if (rx->unpacked_cap < b->n_positions) {
        struct spw_fields **nu = realloc(rx->unpacked, b->n_positions * sizeof *nu);
        if (!nu)
            return "out of memory for an element's fields";
        rx->unpacked = nu;
        rx->unpacked_cap = b->n_positions;
    }
    for (size_t i = 0; i < b->n_positions; i++) {
        const int64_t at = rx->field_offsets[i], len = rx->field_offsets[i + 1] - at;
        char why[200];
        if (spw_fields_unpack(spec, rx->fields + at, (size_t)len, &rx->unpacked[i], why, sizeof why) != 0) {
            drop_unpacked(rx);
            snprintf(err, errlen, "element %zu: %s", i, why);
            return err;
        }
        rx->n_unpacked = i + 1;
    }
    return NULL;
}

const char *intake_message(const struct intake *in, struct intake_rx *rx, uint64_t job, const struct iovec *parts,
                           int n, const char *from, int64_t *elements, int64_t *dups, char *err, size_t errlen)
{
    struct spw_wire_batch b;
    const char *bad = NULL;
    rx->parts = parts;
    rx->n = n;
    rx->parked = 0;
    *elements = *dups = 0;
    if (spw_wire_decode_parts(parts, n, &b, err, errlen) != 0)
        return err;
    if (b.direct_port)      /* the channel takes the one offer it asked for, first */
        bad = "a data connection offered unasked";
    else if (!(bad = check_batch(in, job, &b)) && b.n_positions && in->ctx->spec->source.n_fields)
        bad = gather_fields(in->ctx->spec, rx, &b, err, errlen);  /* before a decompression points
                                                                               the parts elsewhere */
    if (!bad && b.n_positions && b.tensors[0].encoding == SPW_WIRE_ZSTD)
        bad = decompress_into(rx, &b.tensors[0], err, errlen);
    if (!bad) {
        *elements = (int64_t)b.n_positions;
        for (size_t i = 0; i < b.n_positions; i++)
            *dups += !take_element(in, rx, &b, i);
        for (size_t i = 0; i < b.n_tombstones; i++)
            take_tombstone(in, &b, i, from);
    }
    drop_unpacked(rx);                  /* duplicates' */
    spw_wire_batch_free(&b);
    return bad;
}

void intake_rx_free(struct intake_rx *rx)
{
    free(rx->scratch);
    free(rx->raw);
    drop_unpacked(rx);
    free(rx->unpacked);
    free(rx->fields);
    free(rx->field_offsets);
    spw_zstd_destroy(rx->z);
    memset(rx, 0, sizeof *rx);
}
