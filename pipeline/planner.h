/* pipeline/planner.h - the offload decision (DESIGN §7) as a pure function of measured costs: for every
 * candidate cut k (a fusion-group boundary) the remote capacity, the best local/remote mix (a small linear
 * program), each cut raw and with its payloads compressed (when measured: fewer bytes on links and the
 * client's NIC for the workers' compress and the client's decompress CPU), whether offloading beats local-only
 * by a margin, which cut wins (ties go to fewer workers, less client CPU, fewer bytes), and how many workers would reach the trainer's rate (the autoscaling signal).
 * Not the measuring (workers and the client do that) nor the re-planning loop. Pure; thread-safe. */
#ifndef SPW_PIPELINE_PLANNER_H
#define SPW_PIPELINE_PLANNER_H

#include <stdbool.h>

#define SPW_PLAN_MAX_CUTS 64
#define SPW_PLAN_MAX_WORKERS 256

/* A GPU producer beside the CPU threads (FusionFlow's): it makes whole elements (the last cut only). */
#define SPW_PLAN_GPU_MAX 1e7                /* elements/s: a peer claiming more is not believed */

struct spw_plan_gpu {
    double rate;                        /* elements/s the device makes at most, measured; 0 = no GPU */
    double cpu_ns;                      /* host CPU per element it makes (the decode, preparing, copies) */
};

struct spw_plan_worker {
    double cores;                       /* P_j: cores it gives the job */
    double efficiency;                  /* eta_j in (0, 1]: what P_j cores deliver under full load; 0 = 1 */
    double link_bytes_per_s;            /* B_j, worker -> client; 0 = unlimited */
    double cost_ns[SPW_PLAN_MAX_CUTS];  /* W_j(k): read + prefix + serialize + per-message, per element */
    struct spw_plan_gpu gpu;            /* its GPU: at the last cut it makes gpu.rate more, its CPU the rest */
};

struct spw_plan_input {
    int n_cuts;                         /* candidates k = 0 .. n_cuts - 1 */
    double bytes[SPW_PLAN_MAX_CUTS];    /* b_k: bytes per element on the wire at cut k */
    double remote_ns[SPW_PLAN_MAX_CUTS];/* s(k): client cost per remote element (receive + suffix + batch) */
    double local_ns;                    /* f: client cost per element produced locally (read + all + batch) */
    double client_cores;                /* C: cores the client may use, net of the trainer */
    struct spw_plan_gpu gpu;            /* the client's GPU producer (G, g): its elements cost g of C each */
    double nic_bytes_per_s;             /* B_nic at the client; 0 = unlimited */
    double rate;                        /* R: the trainer's elements/s; 0 = unlimited */
    int n_workers;
    struct spw_plan_worker workers[SPW_PLAN_MAX_WORKERS];
    double theta;                       /* offload only if it beats local-only by this factor; 0 = 0.1 */
    double tie;                         /* candidates within this fraction of the best tie; 0 = 0.02 */
    double headroom;                    /* plan workers to this fraction of their capacity; 0 = 0.9 */
    int force_cut;                      /* >= 0: use this cut (an override); -1: choose */
    bool local_off;                     /* override: the client produces nothing itself */
    /* Compression on the wire (zstd, one frame per element), per cut; a ratio of 0 = not measured there: that
     * cut is weighed raw only. */
    double zstd_ratio[SPW_PLAN_MAX_CUTS];               /* raw bytes / compressed bytes */
    double zstd_compress_ns[SPW_PLAN_MAX_CUTS];         /* a worker's CPU per raw byte compressed */
    double zstd_decompress_ns[SPW_PLAN_MAX_CUTS];       /* the client's CPU per raw byte checked + decompressed */
    double recv_ns_per_byte;            /* the client's receive CPU per wire byte (part of s(k)); 0 = unknown */
    int compress;                       /* 0: weigh each cut raw and compressed; -1: raw only; > 0: compressed
                                           wherever measured */
};

struct spw_plan_candidate {
    int k;
    double bytes;                       /* b_k */
    double remote_capacity;             /* T_r(k), elements/s */
    double remote_ns;                   /* s(k) */
    double remote_rate, local_rate;     /* x_r, x_l of the best mix */
    double gpu_rate;                    /* x_g: of x_l, made on the client's GPU */
    double throughput;                  /* T(k) = x_r + x_l */
    double client_cpu;                  /* cores the client spends at that mix */
    int workers_needed;                 /* N_k to reach R at cut k; -1: R unlimited or out of reach */
    bool helps;                         /* s(k) < f: a remote element costs the client less than a local one */
    bool compressed;                    /* the figures are for compressed payloads (bytes as sent) */
    double worker_extra_ns;             /* what compressing adds to each worker's W_j(k) per element */
};

struct spw_plan {
    int n;
    struct spw_plan_candidate c[SPW_PLAN_MAX_CUTS];
    double local_only;                  /* what the client does alone: min(C / f, R), with its GPU first */
    int best;                           /* index of the chosen candidate */
    bool offload;                       /* the plan uses workers at all */
    double local_share;                 /* x_l / T at the chosen candidate (1 when not offloading) */
    double throughput;                  /* predicted elements/s of the plan */
    int workers_needed;                 /* N* = min_k N_k, the autoscaling signal; -1 unknown */
    bool compressed;                    /* the chosen candidate compresses its payloads */
    int compress_level;                 /* ... at this zstd level (in->compress's, else the default); 0 = raw */
    char why[512];                      /* one sentence: why the winner won */
};

/* Per-element CPU measured on a running job at one cut (0 = not measured there). */
struct spw_plan_measured {
    int cut;
    double remote_ns;                   /* the client's receiving threads per remote element: s(cut) */
    double local_ns;                    /* the client's own production per element: f */
    double worker_ns[SPW_PLAN_MAX_WORKERS];     /* each worker's process per element sent: W_j(cut) */
};

/* Fold measurements of the running job into in: f is replaced; s(k) at every cut is scaled by measured /
 * modelled s at the measured cut, and each worker's W_j(k) by its own ratio - the evaluation found the
 * model's shortfall the same fraction at every cut (+31..+37%, bytes 1x..5x), so a ratio, not a per-byte
 * cost; each ratio is clamped to [1/4, 4] (one window's noise does not turn a plan over). Pure. */
void spw_plan_use_measured(struct spw_plan_input *in, const struct spw_plan_measured *m);

struct spw_profile;
/* The client's side of the input from a profile measured on the client (pipeline/profile.h): per cut k,
 * b_k and s(k) = recv_ns_per_byte * b_k + groups [k, n) + the copy into the batch; f = read + every group +
 * the copy. Sets n_cuts, bytes, remote_ns and local_ns of in. */
void spw_plan_client_costs(const struct spw_profile *me, double recv_ns_per_byte, struct spw_plan_input *in);

/* Decide. Returns 0, or -EINVAL (no candidates, a negative cost or size, a forced cut out of range) with
 * the reason in out->why. */
int spw_plan_decide(const struct spw_plan_input *in, struct spw_plan *out);

/* Calibrate to a running job: when the plan predicts more than slack x measured elements/s at cut (after
 * what the job measured of the workers is in `in`), the shortfall is the client's, so in->client_cores is
 * scaled down (bisection, not below min_share of it; throughput grows with the cores) until the prediction
 * at cut meets the measurement; out is the plan with those cores. Returns spw_plan_decide's status. */
int spw_plan_calibrate(struct spw_plan_input *in, int cut, double measured, double slack, double min_share,
                       struct spw_plan *out);

#endif
