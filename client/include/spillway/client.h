/* spillway/client.h - libspillway, the trainer's side of Spillway: create a job from a pipeline and iterate
 * its batches. With a dispatcher, workers run the pipeline up to the job's cut and stream elements here,
 * the client's own threads run the rest (and whole splits of their own, work-conserving), and every sample
 * of every epoch is delivered exactly once. Without one, the pipeline runs in this process.
 * Thread model: a job is driven by one consumer thread (next/release/stats/destroy); it owns its threads.
 * Self-contained (the C standard library's headers only); build with `pkg-config --cflags --libs spillway`. */
#ifndef SPILLWAY_CLIENT_H
#define SPILLWAY_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the library exports: these declarations and nothing else (it is built with -fvisibility=hidden). */
#define SPW_API __attribute__((visibility("default")))

/* Return codes: 0 is success, negative is an error, -errno or one of these; spw_strerror says which. */
#ifndef SPW_ERR_CODES_DEFINED
#define SPW_ERR_CODES_DEFINED
enum spw_err {
    SPW_ESPEC = -1001,          /* invalid pipeline spec */
    SPW_EDECODE = -1002,        /* corrupt or undecodable input */
    SPW_ETOOBIG = -1003,        /* input exceeds a configured size cap */
    SPW_ESOURCE = -1004,        /* data source error */
    SPW_ECLOSED = -1005,        /* closed: the job delivered its last batch */
    SPW_EUNSUPPORTED = -1006,   /* unsupported input */
    SPW_EFORMAT = -1007,        /* malformed file format */
    SPW_EINTERNAL = -1008,      /* internal error */
    SPW_EFORKED = -1009,        /* used in a forked child process */
    SPW_EUSER = -1010,          /* the user's function failed (a Python op raised, crashed or hung) */
};
#endif
/* Human-readable text for a return code (a SPW_E* code or -errno). Never NULL. */
SPW_API const char *spw_strerror(int err);

/* A tensor's element type (spw_batch_tensor_at). */
#ifndef SPW_DTYPE_DEFINED
#define SPW_DTYPE_DEFINED
enum spw_dtype { SPW_DTYPE_U8 = 0, SPW_DTYPE_F32 = 1, SPW_DTYPE_F16 = 2, SPW_DTYPE_I64 = 3 };
#endif
#define SPW_TENSOR_MAX_DIMS 5

/* A batch: tensors data [n, ...] (the pipeline's dtype and element shape), int64 labels [n] and, for padded
 * (audio) batches, int64 lengths [n]; each element's key (epoch, sample, path); its place in the epoch.
 * Opaque: read it with the spw_batch_* accessors below. Never empty (n >= 1): a batch whose samples were all
 * skipped (on_error: skip) is not delivered. */
struct spw_batch;
struct spw_job;

/* spw_job_opts.cut: a group boundary K >= 0, or one of these. */
#define SPW_CUT_ALL (-1)        /* every fusion group runs on the workers; the client batches */
#define SPW_CUT_AUTO (-2)       /* planned: measure this client, let the dispatcher profile the workers and
                                   plan the cut and the local share (or no offload: the job runs in-process) */
#define SPW_CUT_DEFAULT (-3)    /* $SPILLWAY_CUT (auto, all or K) when set, else SPW_CUT_AUTO */
/* spw_job_opts.compress: a zstd level 1..19, or one of these. */
#define SPW_COMPRESS_AUTO 0     /* the plan's choice where the job is planned; raw otherwise */
#define SPW_COMPRESS_OFF (-1)   /* element payloads travel raw */

struct spw_job_opts {
    const char *dispatcher;     /* "HOST:PORT"; NULL = run in-process (no service) */
    const char *auth_token;     /* bearer token for the dispatcher and workers; NULL = none */
    const char *tls_ca;         /* TLS: PEM CA the dispatcher's and workers' certificates are signed by; NULL =
                                   plaintext (or the process's own TLS settings, as spillctl sets them) */
    const char *tls_cert, *tls_key;     /* PEM certificate and key this client presents (mutual TLS); NULL =
                                   none */
    bool insecure;              /* send auth_token without TLS (in the clear); without it such a job is
                                   refused */
    int local_cores;            /* client threads producing whole splits (and finishing remote elements);
                                   -1 = default: in-process all online CPUs, with a dispatcher 1 */
    int cut;                    /* with a dispatcher: groups [0, cut) run on workers, or SPW_CUT_ALL,
                                   SPW_CUT_AUTO (planned), SPW_CUT_DEFAULT (the default: planned unless
                                   $SPILLWAY_CUT says otherwise) */
    int max_workers;            /* use at most this many workers (the first N alive); 0 = all of them */
    int compress;               /* with a dispatcher: workers send element payloads zstd-compressed at this
                                   level (1..19; each element its own frame, checked here before use), or
                                   SPW_COMPRESS_OFF, or SPW_COMPRESS_AUTO (the default) */
    double trainer_rate;        /* the trainer's elements/s, for planning; 0 = unknown / unlimited */
    int64_t prefetch_bytes;     /* batches assembled ahead (3/4; at least 2 batches) and elements parked
                                   beyond them (1/4); 0 = 256 MiB */
    int64_t credit_bytes;       /* bytes workers may have in flight to this client, all streams; 0 = 64 MiB */
    bool ordered;               /* deliver batches in epoch order (byte-identical to a local run); else any
                                   complete batch first (same contents, possibly another order) */
    int64_t max_batches;        /* stop after this many; 0 = until the source's epochs end */
    int split_size;             /* samples per split; 0 = the dispatcher's default */
    int rescue_after_ms;        /* the client computes the missing elements of a head batch that has gained
                                   nothing for this long (a lost or stalled producer); 0 = 3000 */
    int dispatcher_wait_ms;     /* a dispatcher that stops answering (restarting, rescheduled) is retried this
                                   long, streams and own threads going on meanwhile, before the job fails;
                                   0 = 300000 (5 minutes) for a job that exists, 30000 before it does (a
                                   wrong address fails within 30 s; a resume waits the 5 minutes) */
    int rank, world_size;       /* data-parallel trainers: this rank gets its own share of every epoch,
                                   disjoint from the others', with as many batches (pipeline/order.h: short
                                   shares pad, or drop with batch.drop_remainder); world 0/1 = one trainer.
                                   With a dispatcher the ranks share one job (job_name) and its workers */
    const char *job_name;       /* with a dispatcher: ranks giving the same name share one job (the first
                                   creates it); required with world_size > 1. A-Z a-z 0-9 . _ : -, <= 128 */
    struct spw_checkpoint {     /* resume from a checkpoint (spw_job_checkpoint); batches 0 = from the start;
                                   read while the job is created only */
        int64_t batches;        /* delivered since the run began (the run goes on after them, mid-epoch if
                                   need be) */
        uint64_t manifest;      /* the dataset listing's hash: another listing is refused (0 = not checked) */
        uint64_t job;           /* the dispatcher's job it was taken in (0 = none): rejoined while unfinished */
        uint64_t job_secret;    /* that job's secret: without it the job is not rejoined (a new one is made) */
        int split_size;         /* the split size the ranks' shares were cut with (0 = the default) */
        size_t places_len;      /* bytes at places */
        uint8_t *places;        /* bitmap of the delivered places of the epoch in progress; NULL = its first
                                   batches (what an ordered run delivers) */
    } resume;
    struct spw_world_change {   /* resume onto another world size (elastic training): the old run's
                                   checkpoints, one per rank (ranks[r] rank r's, taken at the same step).
                                   Then this job is the rest of the old run's epoch in progress: the
                                   samples no old rank delivered, this rank's share of them (world_size
                                   ranks, padded or dropped as batches are), made in this process, as one
                                   epoch of spw_job_batches_per_epoch batches; spw_job_rest_of says which
                                   epoch and where a job of the new world size goes on after it (its
                                   resume.batches, no places). resume.batches may resume this job's own
                                   checkpoint. Read while the job is created only */
        int world;              /* the old run's ranks; 0: no change (a plain resume) */
        const struct spw_checkpoint *ranks;
    } rest_of;
    bool gpu;                   /* in-process: one more thread makes micro-batches on CUDA device gpu_device
                                   (FusionFlow's CPU+GPU split, host batches); without the plugin, a driver or
                                   the device the job logs why once and runs on the CPU */
    int gpu_device;
    const char *gpu_mem_budget; /* device memory reserved at start: bytes (K/M/G/Ki/Mi/Gi) or a fraction of
                                   what is free (NULL = 0.25); never more than is free, never grown */
    bool device_batches;        /* with gpu in-process: batches' data stay on the device (FusionFlow's hand-over
                                   without a copy; spw_batch_device, spw_batch_dlpack): made there, the rows made
                                   on the CPU uploaded into them; a batch that finds no room in the arena, and
                                   every batch after a device error, comes in host memory */
    const volatile int *cancel; /* when *cancel turns non-zero (a SIGTERM/SIGINT handler sets it), a waiting
                                   spw_job_create_* returns -ECANCELED within 100 ms (a dispatcher not up, a
                                   CreateJob retried), and so does spw_job_next, also every later call; then
                                   spw_job_destroy ends the job unless kept. NULL = never */
    bool keep_job;              /* with a dispatcher: spw_job_destroy of an unfinished job leaves it paused
                                   for a resume (rejoinable for the dispatcher's --paused-job-ms) instead of
                                   ending it; spw_job_checkpoint keeps it too */
};

/* Set o to the defaults. */
SPW_API void spw_job_opts_init(struct spw_job_opts *o);

/* Create a job from a pipeline spec in JSON (text) and start producing. Returns 0, SPW_ESPEC (bad spec),
 * SPW_ESOURCE, -ECONNREFUSED / -EIO (the dispatcher refused or is unreachable; the message says which) or
 * -ENOMEM, with a message in err. */
SPW_API int spw_job_create_json(const char *json, const struct spw_job_opts *o, struct spw_job **out,
                                char *err, size_t errlen);
/* The same from a serialized spillway.v1.Pipeline. */
SPW_API int spw_job_create_proto(const uint8_t *pipeline, size_t len, const struct spw_job_opts *o,
                                 struct spw_job **out, char *err, size_t errlen);

/* Next batch (caller owns it until spw_job_release). Returns 0, SPW_ECLOSED after the last one, or an error
 * (on_error: fail, a lost dispatcher, use after fork) with the reason in spw_job_errmsg. */
SPW_API int spw_job_next(struct spw_job *job, struct spw_batch **out);
/* Give a batch back (its memory is reused for later batches). Accepts NULL. May be called from any thread,
 * also while another is in spw_job_next (a binding releases a batch when its last array dies); not after
 * spw_job_destroy: release every batch first (a batch's memory ends with its job). */
SPW_API void spw_job_release(struct spw_job *job, struct spw_batch *b);
SPW_API const char *spw_job_errmsg(const struct spw_job *job);

struct spw_job_stats {
    uint64_t job;               /* the dispatcher's job id; 0 in-process */
    int cut, groups;            /* the cut elements arrive at; fusion groups */
    int64_t samples;            /* in the source's manifest */
    uint64_t manifest_hash;
    int64_t elements, batches, skipped;
    int64_t remote_elements;    /* delivered elements produced by workers */
    int64_t local_elements;     /* ... by this client's threads on its own splits */
    int64_t rescued_elements;   /* ... by this client for a stalled head batch */
    int64_t duplicates_dropped; /* elements that arrived twice (re-leased or speculative splits) */
    int64_t bytes_received;     /* ElementBatch bytes from workers (compressed ones as received) */
    int compress_level;         /* the zstd level workers were asked for (0: raw) */
    int workers;                /* workers streamed from */
    bool planned;               /* the job was planned (SPW_CUT_AUTO) */
    bool offloaded;             /* ... and the plan used the workers */
    double predicted;           /* the plan's predicted elements/s */
    int64_t gpu_elements;       /* in-process with gpu: made on the device */
    int64_t device_batches;     /* ... batches handed over on the device (opts.device_batches) */
    int64_t gpu_arena_bytes, gpu_arena_used, gpu_arena_peak;   /* the arena: reserved, in use now, at most */
    char plan_why[512];         /* the planner's reason */
};
SPW_API void spw_job_stats(struct spw_job *job, struct spw_job_stats *out);

/* Where the trainer's time went since the job was created: in spw_job_next waiting for batches (wait_s), and
 * between those calls ready to run but without a CPU (starved_s: the calling thread's run delay, e.g. a
 * container's CPU quota spent by the producing threads; 0 where the kernel does not say). wait_s / elapsed_s
 * near 0: the input keeps up; near 1: the trainer starves. */
struct spw_job_times {
    double elapsed_s, wait_s, starved_s;
};
SPW_API void spw_job_times(struct spw_job *job, struct spw_job_times *out);
/* The CPU time of each step of the pipeline over the elements this process made itself in-process (no
 * dispatcher): step i from 0, a fused group one step named "a+b+c". Returns 0, or -ENOENT past the last step
 * (and for a job through a dispatcher: the workers' per-element costs are in `spillctl job`). */
struct spw_op_time {
    char name[160];
    int64_t elements;           /* elements that ran the step */
    int64_t ns_total;           /* their time in it, all threads together */
};
SPW_API int spw_job_op_time(struct spw_job *job, int i, struct spw_op_time *out);

/* Stop everything and free the job; accepts NULL. With a dispatcher, an unfinished job is ended there (its
 * leases released, its workers freed), unless opts.keep_job or a spw_job_checkpoint asked to keep it for a
 * resume: then it is paused, rejoinable with that checkpoint. In a data-parallel job, the last rank to
 * close decides. */
SPW_API void spw_job_destroy(struct spw_job *job);
/* Stop making batches, as spw_job_destroy stops them (with a dispatcher: the job ended there, or paused when
 * kept), while the batches already given stay valid until released: for a binding whose batches outlive the
 * job's handle. Then only spw_job_release and spw_job_destroy may be called. Accepts NULL. */
SPW_API void spw_job_stop(struct spw_job *job);

/* A checkpoint: what this job has delivered to the trainer (spw_job_next returned) since the start of the
 * run, counting the batches a resumed job started after. Give it back as opts.resume to a new job of the same
 * spec, rank and world size (a new process; with a dispatcher, the same or another one): it delivers exactly
 * the samples not yet delivered (ordered: the same batches; the order is a function of seed and epoch),
 * then continues. out->places is allocated (spw_checkpoint_clear frees it). Returns 0 or -ENOMEM. */
SPW_API int spw_job_checkpoint(struct spw_job *job, struct spw_checkpoint *out);
SPW_API void spw_checkpoint_clear(struct spw_checkpoint *c);

/* The source's class names in label order (image or wav folders; none for tar shards): the count, with
 * *names pointing at the job's own array (valid until destroy). */
SPW_API int spw_job_classes(const struct spw_job *job, const char *const **names);
/* Batches one epoch delivers (the last one short unless the spec drops it). */
SPW_API int64_t spw_job_batches_per_epoch(const struct spw_job *job);
/* A job made with opts.rest_of: returns 1 with the old run's epoch it is the rest of (*epoch), the batch of
 * the run at the new world size after it (*next_batch: the next epoch's start, or this epoch's when no old
 * rank had started it) and that run's batches per epoch; 0 for any other job. An empty rest (all delivered, or a share too short for a
 * dropped remainder) makes a job that ends at once. */
SPW_API int spw_job_rest_of(const struct spw_job *job, int64_t *epoch, int64_t *next_batch,
                            int64_t *per_epoch_after);

/* ---- a batch's contents (struct spw_batch is opaque) ---- */

/* Elements in the batch (>= 1), and samples of its positions skipped (on_error: skip). */
SPW_API int spw_batch_elements(const struct spw_batch *b);
SPW_API int spw_batch_skipped(const struct spw_batch *b);
/* Its tensors, each a named part: "data" [n, ...], "labels" int64 [n] (float32 [n, classes] when batch.mix
 * mixes), "lengths" int64 [n] (padded audio batches); with views, "view0" .. "view<k-1>", one [n, ...] per
 * view instance, in the data's place. Tensor i: dtype (enum spw_dtype), ndim and up to SPW_TENSOR_MAX_DIMS
 * dims into shape, its data (owned by the batch) and size. -EINVAL for an index out of range. */
SPW_API int spw_batch_tensor_count(const struct spw_batch *b);
/* With views: how many of its tensors are view instances (the first ones); 0 for a pipeline without. */
SPW_API int spw_batch_view_count(const struct spw_batch *b);
SPW_API int spw_batch_tensor_at(const struct spw_batch *b, int i, int *dtype, int *ndim, int64_t *shape,
                                void **data, size_t *nbytes);
/* Tensor i's part name (owned by the batch; NULL for an index out of range), and the index of the part
 * called name (-ENOENT when the batch has none). */
SPW_API const char *spw_batch_tensor_name(const struct spw_batch *b, int i);
SPW_API int spw_batch_tensor_index(const struct spw_batch *b, const char *name);
/* Element i's key: its epoch, its sample index in the source's manifest, its path (owned by the batch). */
SPW_API int spw_batch_key_at(const struct spw_batch *b, int i, int64_t *epoch, int64_t *sample,
                             const char **path);
/* The batch's epoch and its index within the epoch (this rank's batches). */
SPW_API int spw_batch_position(const struct spw_batch *b, int64_t *epoch, int64_t *index);
/* Where tensor i's data is, as a DLPack DLDevice: type 1 (kDLCPU, host memory) or, for a device batch's
 * data (opts.device_batches), 2 (kDLCUDA) and the device. -EINVAL for an index out of range. */
SPW_API int spw_batch_device(const struct spw_batch *b, int i, int *type, int *id);
/* Tensor i as a DLPack (v0.6+, dlpack/dlpack.h) managed tensor, sharing the batch's memory: its deleter
 * calls on_free(ctx) (may be NULL), where the caller releases the batch once it has no other use for it.
 * NULL for an index out of range or no memory. */
struct DLManagedTensor;
SPW_API struct DLManagedTensor *spw_batch_dlpack(const struct spw_batch *b, int i, void (*on_free)(void *ctx),
                                                 void *ctx);

/* ---- log lines ---- */

/* What libspillway logs (a skipped sample, a dispatcher that does not answer, the plan) is one line per event
 * on stderr, `ts level component msg`, unless a callback takes the lines. Process-wide settings: they apply to
 * every job, and to lines logged before any job exists. */
#ifndef SPW_LOG_LEVELS_DEFINED
#define SPW_LOG_LEVELS_DEFINED
enum spw_log_level { SPW_LOG_DEBUG = 0, SPW_LOG_INFO = 1, SPW_LOG_WARN = 2, SPW_LOG_ERROR = 3 };
#endif
/* Send each line to fn instead of stderr (fn NULL: stderr again): level (enum spw_log_level), component (the
 * part of the library: "client", "executor", "source", ...) and msg (the text, no timestamp, no newline), both
 * valid during the call only; user as given. One call per line, whole; lines below spw_set_log_level's level
 * are dropped before any call. Thread model: fn is called on whichever library thread logs (the caller of
 * spw_job_create_* or spw_job_next, a job's own threads, gRPC's), possibly on several at once, so it must be
 * thread-safe; a line logged from inside fn goes to stderr. When this returns, no thread is inside the
 * previous fn any more (its user data may be freed). Returns 0, or -EDEADLK when called from inside fn. */
SPW_API int spw_set_log_callback(void (*fn)(int level, const char *component, const char *msg, void *user),
                                 void *user);
/* Drop lines below level (SPW_LOG_DEBUG .. SPW_LOG_ERROR; the default is info, or $SPILLWAY_LOG_LEVEL when
 * set before the first line, which this overrides). Returns 0, or -EINVAL for another value. */
SPW_API int spw_set_log_level(int level);

/* ---- a flat face for language bindings (ctypes; client/binding.c): no struct layouts to mirror ---- */

/* Options with the defaults, set by name ("dispatcher", "auth_token", "local_cores", "cut" (as
 * spw_job_cut_parse, or "default"), "max_workers", "compress" (as spw_job_compress_parse), "trainer_rate", "prefetch_bytes", "credit_bytes", "ordered" (0/1), "insecure" (0/1),
 * "max_batches", "split_size", "rescue_after_ms", "rank", "world_size", "job_name", "gpu" (a device, or -1),
 * "gpu_mem_budget", "device_batches" (0/1), and a checkpoint's "resume_batches", "resume_manifest" (hex),
 * "resume_job", "resume_job_secret" (hex), "resume_split_size", "resume_places" (hex), and for rest_of each old
 * rank's checkpoint in rank order as "rest_of_rank": "BATCHES MANIFEST_HEX SPLIT PLACES_HEX") from strings,
 * which are copied. set returns 0, -ENOENT (unknown key) or -EINVAL (bad value). Free with spw_job_opts_free. */
SPW_API struct spw_job_opts *spw_job_opts_new(void);
SPW_API int spw_job_opts_set(struct spw_job_opts *o, const char *key, const char *value);
SPW_API void spw_job_opts_free(struct spw_job_opts *o);
/* Set o->cancel (for bindings that cannot write a pointer field): the flag must outlive the job. */
SPW_API void spw_job_opts_cancel_flag(struct spw_job_opts *o, const volatile int *flag);
/* A cut as users write it: "auto", "all" or a group boundary 0..255 into *cut (SPW_CUT_AUTO, SPW_CUT_ALL, K).
 * Returns 0 or -EINVAL (then *cut is untouched). */
SPW_API int spw_job_cut_parse(const char *s, int *cut);
/* Compression as users write it: "auto", "off", "zstd" (level 1) or "zstd:N" (N in 1..19) into *compress.
 * Returns 0 or -EINVAL (then *compress is untouched). */
SPW_API int spw_job_compress_parse(const char *s, int *compress);
/* spw_job_stats as a JSON object into buf (cap bytes); returns the length it needs, as snprintf. */
SPW_API int spw_job_stats_json(struct spw_job *job, char *buf, size_t cap);
/* spw_job_checkpoint with the places bitmap as hex (the value for "resume_places"): allocated, free it with
 * spw_free; NULL when out of memory. */
SPW_API char *spw_job_checkpoint_flat(struct spw_job *job, int64_t *batches, uint64_t *manifest,
                                      uint64_t *job_id, uint64_t *job_secret, int *split_size);
SPW_API void spw_free(void *p);
/* Every op this build runs, as JSON (pipeline/op_schema.h: names, docs, positional arguments, fields with
 * their types, choices, ranges and defaults): what bindings build their pipeline methods from. Allocated,
 * free it with spw_free; NULL when out of memory. */
SPW_API char *spw_op_schema(void);

#ifdef __cplusplus
}
#endif

#endif
