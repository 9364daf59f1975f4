/* pipeline/fields.h - a sample's extra fields (source.fields) as an element carries them: read from the
 * members of its tar key (text checked to be UTF-8, a .json member's string field taken out, a mask decoded
 * as a PNG label map, boxes and their class ids out of a .json), packed into bytes for the wire and unpacked
 * with every size checked against the caps before use. Pure but for the read; a fields object belongs to one thread at a time. */
#ifndef SPW_PIPELINE_FIELDS_H
#define SPW_PIPELINE_FIELDS_H

#include <stddef.h>
#include <stdint.h>

#include "ops/image.h"
#include "pipeline/source.h"
#include "pipeline/spec.h"

struct spw_field {
    enum spw_sample_field_kind kind;
    uint8_t *data;              /* text and raw: owned; text is UTF-8 without a terminating NUL */
    size_t len;
    struct spw_image mask;      /* masks: owned, HWC with three equal channels (the image kernels' layout) */
    int n_boxes;                /* boxes: how many; */
    float *boxes;               /* ... [n_boxes][4] x0 y0 x1 y1 in the image's pixels (owned) */
    int64_t *box_labels;        /* ... [n_boxes] their class ids (owned) */
};

/* One element's fields, in the spec's source.fields order. */
struct spw_fields {
    int n;
    struct spw_field f[SPW_SAMPLE_FIELDS_MAX];
};

/* Sample's fields from src (spec's source.fields) into *out. Returns 0, or with the reason in err: an I/O
 * error (-errno), SPW_ETOOBIG (a text or raw member over SPW_SAMPLE_FIELD_MAX_BYTES, a mask over the spec's
 * max_pixels), SPW_EFORMAT / SPW_EDECODE / SPW_EUNSUPPORTED (text that is not UTF-8, a .json that is not an
 * object or lacks the string field, a mask that is no palette or grey PNG), -ENOMEM. */
int spw_fields_read(const struct spw_source *src, const struct spw_pipeline_spec *spec, int64_t sample,
                    struct spw_fields **out, char *err, size_t errlen);
/* Accepts NULL. */
void spw_fields_free(struct spw_fields *f);
/* Whether any of the spec's fields moves with the image (a mask or boxes). */
bool spw_fields_have_targets(const struct spw_source_spec *spec);
struct spw_value;
/* An element's fields for its batch: those riding on v (taken from it), or, where its producer made it
 * without them (the GPU's kernels; never with masks or boxes), read from src now. *out NULL for a spec without
 * fields. Returns 0 or spw_fields_read's error with the reason in err. */
int spw_fields_take(struct spw_value *v, const struct spw_source *src, const struct spw_pipeline_spec *spec,
                    int64_t sample, struct spw_fields **out, char *err, size_t errlen);

/* Packed: per field a u32 length (little-endian) and its bytes; a mask's are u32 width, u32 height and its
 * width * height label bytes; boxes' u32 count, count * 4 float32 corners, count int64 class ids. */
size_t spw_fields_packed_size(const struct spw_fields *f);
void spw_fields_pack(const struct spw_fields *f, uint8_t *dst);
/* The fields of spec in the len bytes at p (a peer's): each length checked against the caps (a mask's size
 * against max_pixels) and what is left before allocating, text checked to be UTF-8, nothing left over.
 * Returns 0 or SPW_EFORMAT / -ENOMEM with the reason in err. */
int spw_fields_unpack(const struct spw_pipeline_spec *spec, const uint8_t *p, size_t len, struct spw_fields **out,
                      char *err, size_t errlen);

#endif
