/* pipeline/mix.h - MixUp and CutMix on a whole batch (the spec's batch.mix), as torchvision's classification
 * references do them in the collate step: a RandomChoice of RandomMixup and RandomCutmix, each pairing
 * element i with element i - 1 (the batch rolled by one), lambda from Beta(alpha, alpha), labels one-hot
 * float32 then mixed by the same lambda (CutMix: by the box's area). The draws come from a stream keyed by
 * (seed, epoch, batch index), so an ordered run mixes the same way wherever its elements were made. Called by
 * spw_batch_build (the executor's and the client's). Pure; thread-safe. */
#ifndef SPW_PIPELINE_MIX_H
#define SPW_PIPELINE_MIX_H

#include <stdint.h>

#include "lib/tensor.h"
#include "pipeline/source.h"
#include "pipeline/spec.h"

enum spw_mix_kind { SPW_MIX_NONE = 0, SPW_MIX_MIXUP = 1, SPW_MIX_CUTMIX = 2 };

/* What one batch draws: which (none when the p draw says so), lambda, and CutMix's box [x1, x2) x [y1, y2). */
struct spw_mix_draw {
    enum spw_mix_kind kind;
    double lambda;                      /* CutMix: 1 - the box's share of the image, as the reference */
    int x1, y1, x2, y2;
};

/* The draws of batch (epoch, index) of a w x h image batch. */
void spw_mix_plan(const struct spw_mix_spec *m, uint64_t seed, int64_t epoch, int64_t index, int w, int h,
                  struct spw_mix_draw *d);
/* Mix data ([n, C, H, W] float32, in place) and make labels: from int64 [n] classes to float32
 * [n, num_classes] (replaced; the old tensor freed). Returns 0, -EINVAL (data not a float32 [n, C, H, W]
 * tensor, or a label outside [0, num_classes)) or -ENOMEM. */
int spw_batch_mix(const struct spw_mix_spec *m, const struct spw_mix_draw *d, struct spw_tensor *data,
                  struct spw_tensor *labels);
/* Whether every label the source holds is below num_classes: 0, or SPW_ESPEC with a message. */
int spw_mix_check_source(const struct spw_mix_spec *m, const struct spw_source *src, char *err, size_t errlen);

#endif
