/* pipeline/channels.h - one-channel image outputs. A top-level grayscale with num_output_channels 1 makes
 * what the pipeline outputs after it one channel, as torchvision's "L" image: the tensor normalize or
 * to_tensor makes ([1, H, W]), or the uint8 image a batch holds. Between the two, images stay RGB with R = G
 * = B, which every op allowed after it treats as Pillow treats an "L" image; the sinks that make the output
 * write one channel. spw_spec_check_channels holds the rules that keep that true. Pure; thread-safe. */
#ifndef SPW_PIPELINE_CHANNELS_H
#define SPW_PIPELINE_CHANNELS_H

#include <stddef.h>

#include "pipeline/spec.h"

/* Channels of an output made at op index `at` (a normalize / to_tensor), or of the pipeline's image output
 * (at = spec->n_ops): 1 when the last top-level grayscale before it has num_output_channels 1, else 3. */
int spw_out_channels(const struct spw_pipeline_spec *spec, int at);

/* 0, or 1 with the field's location ("ops[4].fill") in loc and the reason in msg: a one-channel grayscale
 * inside a combinator or with views; after one, an op that needs three channels (aug_mix, user code), a
 * grayscale in a combinator, or a fill, normalize mean / std or erasing value whose channels differ. */
int spw_spec_check_channels(const struct spw_pipeline_spec *spec, char *loc, size_t loclen, char *msg,
                            size_t msglen);

#endif
