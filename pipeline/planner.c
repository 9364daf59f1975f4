/* pipeline/planner.c - the offload decision (see planner.h; formulas of DESIGN §7). Rates are elements/s,
 * costs ns per element, so a core is 1e9 ns/s. "Unlimited" (a rate, a link) is +infinity inside. Pure
 * functions of the input; nothing measured here. */
#include "pipeline/planner.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "pipeline/compress.h"
#include "pipeline/profile.h"

#define NS_PER_S 1e9

static double or_inf(double v)
{
    return v > 0 ? v : INFINITY;
}

/* What worker j delivers at cut k of n: its cores over its cost (at the last cut, plus its GPU's elements,
 * whose host CPU its cores pay first), capped by its link. */
static double worker_capacity(const struct spw_plan_worker *w, int k, int n, double bytes, double extra_ns)
{
    const double eff = w->efficiency > 0 ? w->efficiency : 1.0, cpu = eff * w->cores * NS_PER_S;
    const double xg = k == n - 1 && w->gpu.rate > 0 ? fmin(w->gpu.rate, cpu / fmax(w->gpu.cpu_ns, 1)) : 0;
    const double compute = xg + (cpu - xg * w->gpu.cpu_ns) / (w->cost_ns[k] + extra_ns);
    const double link = bytes > 0 ? or_inf(w->link_bytes_per_s) / bytes : INFINITY;
    return compute < link ? compute : link;
}

static int invalid(struct spw_plan *out, const char *why)
{
    snprintf(out->why, sizeof out->why, "%s", why);
    return -EINVAL;
}

static int check_input(const struct spw_plan_input *in, struct spw_plan *out)
{
    if (in->n_cuts < 1 || in->n_cuts > SPW_PLAN_MAX_CUTS)
        return invalid(out, "no candidate cuts");
    if (in->n_workers < 0 || in->n_workers > SPW_PLAN_MAX_WORKERS)
        return invalid(out, "worker count out of range");
    if (!(in->local_ns > 0) || !(in->client_cores >= 0) || in->rate < 0 || in->nic_bytes_per_s < 0)
        return invalid(out, "client costs must be positive, rates and budgets non-negative");
    if (in->force_cut >= in->n_cuts)
        return invalid(out, "the forced cut is not a candidate");
    for (int k = 0; k < in->n_cuts; k++) {
        if (!(in->bytes[k] >= 0) || !(in->remote_ns[k] >= 0))
            return invalid(out, "bytes and client costs per element must be non-negative");
        for (int j = 0; j < in->n_workers; j++)
            if (!(in->workers[j].cost_ns[k] > 0) || !(in->workers[j].cores >= 0) ||
                in->workers[j].efficiency < 0 || in->workers[j].link_bytes_per_s < 0 ||
                !(in->workers[j].gpu.rate >= 0) || !(in->workers[j].gpu.cpu_ns >= 0))
                return invalid(out, "worker costs must be positive, cores, links and GPUs non-negative");
    }
    if (!(in->gpu.rate >= 0) || !(in->gpu.cpu_ns >= 0) || !isfinite(in->gpu.rate))
        return invalid(out, "the client's GPU rate and cost must be finite and non-negative");
    for (int k = 0; k < in->n_cuts; k++)
        if (!(in->zstd_ratio[k] >= 0) || !isfinite(in->zstd_ratio[k]) || !(in->zstd_compress_ns[k] >= 0) ||
            !(in->zstd_decompress_ns[k] >= 0) || !isfinite(in->zstd_compress_ns[k]) ||
            !isfinite(in->zstd_decompress_ns[k]))
            return invalid(out, "compression ratios and costs must be finite and non-negative");
    if (!(in->recv_ns_per_byte >= 0) || !isfinite(in->recv_ns_per_byte))
        return invalid(out, "the receive cost per byte must be finite and non-negative");
    return 0;
}

/* One way the client gets elements: what each costs its CPU, and at most how many per second. */
struct source_of {
    double cost_ns, cap;
    double *x;                  /* what the mix takes */
};

/* Maximise the elements taken within the CPU budget and the rate: every element counts the same, so the
 * cheapest first (a fractional knapsack: the LP's optimum). Sources are tried in the given order on ties. */
static void fill(struct source_of *src, int n, double budget_ns, double rate)
{
    for (int i = 1; i < n; i++)                 /* stable insertion sort by cost */
        for (int k = i; k > 0 && src[k].cost_ns < src[k - 1].cost_ns; k--) {
            const struct source_of t = src[k];
            src[k] = src[k - 1];
            src[k - 1] = t;
        }
    for (int i = 0; i < n; i++) {
        const double by_cpu = src[i].cost_ns > 0 ? fmax(0, budget_ns) / src[i].cost_ns : INFINITY;
        *src[i].x = fmax(0, fmin(fmin(src[i].cap, rate), by_cpu));
        budget_ns -= *src[i].x * src[i].cost_ns;
        rate -= *src[i].x;
    }
}

/* The best mix at cut k: maximise x_r + x_g + x_c with x_r <= T_r, x_g <= G, x_r s + x_g g + x_c f <= C and
 * x_r + x_g + x_c <= R. A remote element is worth taking while it costs the client less than a local one
 * (s < f); the client's GPU elements (host CPU g each) the same way. */
static void mix(const struct spw_plan_input *in, struct spw_plan_candidate *c, double budget_ns, double rate)
{
    double xr = 0, xg = 0, xc = 0;
    struct source_of src[3] = {
        {in->gpu.cpu_ns, in->local_off ? 0 : in->gpu.rate, &xg},
        {in->local_ns, in->local_off ? 0 : INFINITY, &xc},      /* before remote on a tie: s = f never helps */
        {c->remote_ns, c->remote_capacity, &xr},
    };
    fill(src, 3, budget_ns, rate);
    c->remote_rate = xr;
    c->gpu_rate = xg;
    c->local_rate = xg + xc;
    c->throughput = xr + xg + xc;
    c->client_cpu = (xr * c->remote_ns + xg * in->gpu.cpu_ns + xc * in->local_ns) / NS_PER_S;
}

/* What the client makes alone: its GPU's elements first, then its CPU's. */
static double local_only(const struct spw_plan_input *in, double budget_ns, double rate, double *xg)
{
    double xc = 0;
    *xg = 0;
    struct source_of src[2] = {{in->gpu.cpu_ns, in->gpu.rate, xg}, {in->local_ns, INFINITY, &xc}};
    fill(src, 2, budget_ns, rate);
    return *xg + xc;
}

/* Workers needed to reach R at cut k (planned at `headroom` of their measured capacity), or -1. The client's
 * GPU elements count first. */
static int workers_needed(const struct spw_plan_input *in, const struct spw_plan_candidate *c, double budget_ns,
                          double rate, double headroom)
{
    const double f = in->local_ns, s = c->remote_ns;
    if (isinf(rate) || in->n_workers == 0)
        return -1;
    double need, xg = 0;                        /* x_r*: the remote rate that, with the client's, makes R */
    if (!in->local_off && local_only(in, budget_ns, rate, &xg) >= rate * (1 - 1e-9))
        return 0;                               /* the client alone reaches R */
    budget_ns -= xg * in->gpu.cpu_ns;
    rate -= xg;
    if (in->local_off)
        need = rate;
    else if (!c->helps)
        return -1;
    else
        need = (rate * f - budget_ns) / (f - s);
    if (need * s > budget_ns || need * c->bytes > or_inf(in->nic_bytes_per_s))
        return -1;                              /* the client's CPU or NIC cannot take that much */
    double mean = 0;
    for (int j = 0; j < in->n_workers; j++)
        mean += worker_capacity(&in->workers[j], c->k, in->n_cuts, c->bytes, c->worker_extra_ns);
    mean /= in->n_workers;
    if (!(mean > 0))
        return -1;
    return (int)ceil(need / (headroom * mean) - 1e-9);
}

/* Whether candidate a is preferred to b among near-equal throughputs: fewer workers to reach R, less client
 * CPU, fewer bytes on the wire, then the higher prediction (not the lower cut: with the client saturated
 * either way and elements of one size, bench/offload.sh measured the higher-predicted cut 2 ahead of cut 1). */
static bool preferred(const struct spw_plan_candidate *a, const struct spw_plan_candidate *b)
{
    const int wa = a->workers_needed < 0 ? 1 << 30 : a->workers_needed;
    const int wb = b->workers_needed < 0 ? 1 << 30 : b->workers_needed;
    if (wa != wb)
        return wa < wb;
    if (fabs(a->client_cpu - b->client_cpu) > 1e-3 * fmax(a->client_cpu, b->client_cpu))
        return a->client_cpu < b->client_cpu;
    if (a->bytes != b->bytes)
        return a->bytes < b->bytes;
    return a->throughput > b->throughput;
}

/* Candidate k, raw or with its payloads compressed: fewer bytes on the links and the NIC (b_k / ratio); each
 * worker compresses every raw byte; the client decompresses every raw byte but receives fewer. */
static void evaluate(const struct spw_plan_input *in, int k, bool compressed, double budget_ns, double rate,
                     double headroom, struct spw_plan_candidate *c)
{
    memset(c, 0, sizeof *c);
    const double raw = in->bytes[k];
    c->k = k;
    c->compressed = compressed;
    c->bytes = compressed ? raw / in->zstd_ratio[k] : raw;
    c->remote_ns = in->remote_ns[k];
    if (compressed) {
        c->remote_ns = fmax(0, c->remote_ns + in->zstd_decompress_ns[k] * raw - in->recv_ns_per_byte * (raw - c->bytes));
        c->worker_extra_ns = in->zstd_compress_ns[k] * raw;
    }
    c->helps = c->remote_ns < in->local_ns;
    double tr = 0;
    for (int j = 0; j < in->n_workers; j++)
        tr += worker_capacity(&in->workers[j], k, in->n_cuts, c->bytes, c->worker_extra_ns);
    if (c->bytes > 0)
        tr = fmin(tr, or_inf(in->nic_bytes_per_s) / c->bytes);
    c->remote_capacity = tr;
    mix(in, c, budget_ns, rate);
    c->workers_needed = workers_needed(in, c, budget_ns, rate, headroom);
}

int spw_plan_decide(const struct spw_plan_input *in, struct spw_plan *out)
{
    memset(out, 0, sizeof *out);
    out->best = -1;
    out->workers_needed = -1;
    int rc = check_input(in, out);
    if (rc)
        return rc;
    const double theta = in->theta > 0 ? in->theta : 0.1, tie = in->tie > 0 ? in->tie : 0.02;
    const double headroom = in->headroom > 0 ? in->headroom : 0.9;
    const double budget_ns = in->client_cores * NS_PER_S, rate = or_inf(in->rate);
    double local_gpu;
    out->local_only = local_only(in, budget_ns, rate, &local_gpu);
    out->n = in->n_cuts;
    double best_t = -1;
    for (int k = 0; k < in->n_cuts; k++) {
        struct spw_plan_candidate *c = &out->c[k], z;
        evaluate(in, k, false, budget_ns, rate, headroom, c);
        const bool measured = in->zstd_ratio[k] > 1;
        if (in->compress >= 0 && measured) {
            evaluate(in, k, true, budget_ns, rate, headroom, &z);
            /* Compressed where forced, or where it beats raw by more than a tie (the CPU it costs is real). */
            if (in->compress > 0 || z.throughput > (1 + tie) * c->throughput)
                *c = z;
        }
        if (c->workers_needed >= 0 && (out->workers_needed < 0 || c->workers_needed < out->workers_needed))
            out->workers_needed = c->workers_needed;
        best_t = fmax(best_t, c->throughput);
    }
    if (in->force_cut >= 0) {
        out->best = in->force_cut;
        snprintf(out->why, sizeof out->why, "cut %d was set by the job (override)", in->force_cut);
    } else {
        for (int k = 0; k < in->n_cuts; k++) {
            const bool near_best = out->c[k].throughput >= (1 - tie) * best_t;
            if (near_best && (out->best < 0 || preferred(&out->c[k], &out->c[out->best])))
                out->best = k;
        }
        if (!in->local_off && best_t < (1 + theta) * out->local_only) {
            const struct spw_plan_candidate *c = &out->c[out->best];
            snprintf(out->why, sizeof out->why,
                     "no offload: the best cut (%d) reaches %.0f elements/s, not %.0f%% over local-only %.0f%s",
                     c->k, c->throughput, theta * 100, out->local_only,
                     out->local_only >= rate ? " (the client alone meets the trainer's rate)"
                     : !c->helps ? " (a remote element costs the client as much as a local one)" : "");
            out->best = -1;
        } else {
            const struct spw_plan_candidate *c = &out->c[out->best];
            snprintf(out->why, sizeof out->why,
                     "cut %d: %.0f elements/s predicted vs %.0f local-only (%.2fx); among cuts within %.0f%% of the "
                     "best it needs the fewest workers, then the least client CPU, then the fewest bytes, then the most elements/s",
                     c->k, c->throughput, out->local_only, c->throughput / out->local_only, tie * 100);
            if (c->gpu_rate > 0) {
                const size_t n = strlen(out->why);
                snprintf(out->why + n, sizeof out->why - n, " (the client's GPU makes %.0f of them)", c->gpu_rate);
            }
        }
    }
    if (out->best < 0) {
        out->throughput = out->local_only;
        out->local_share = 1;
        return 0;
    }
    const struct spw_plan_candidate *c = &out->c[out->best];
    out->offload = c->remote_rate > 0;
    out->compressed = out->offload && c->compressed;
    out->compress_level = out->compressed ? (in->compress > 0 ? in->compress : SPW_ZSTD_DEFAULT_LEVEL) : 0;
    if (out->compressed) {
        const size_t n = strlen(out->why);
        snprintf(out->why + n, sizeof out->why - n, "; payloads compressed (zstd, %.2fx smaller)",
                 in->bytes[c->k] / c->bytes);
    }
    out->throughput = c->throughput;
    out->local_share = c->throughput > 0 ? c->local_rate / c->throughput : 0;
    return 0;
}

int spw_plan_calibrate(struct spw_plan_input *in, int cut, double measured, double slack, double min_share,
                       struct spw_plan *out)
{
    int rc = spw_plan_decide(in, out);
    if (rc || cut < 0 || cut >= out->n || !(measured > 0) || out->c[cut].throughput <= slack * measured)
        return rc;
    double lo = in->client_cores * min_share, hi = in->client_cores;
    for (int i = 0; i < 30; i++) {
        in->client_cores = (lo + hi) / 2;
        if ((rc = spw_plan_decide(in, out)) != 0)
            return rc;
        if (out->c[cut].throughput > measured)
            hi = in->client_cores;
        else
            lo = in->client_cores;
    }
    in->client_cores = hi;
    return spw_plan_decide(in, out);
}

#define MEASURED_RATIO_MAX 4.0

static double clamped_ratio(double measured, double modelled)
{
    if (!(measured > 0) || !isfinite(measured) || !(modelled > 0))
        return 1;
    return fmin(fmax(measured / modelled, 1 / MEASURED_RATIO_MAX), MEASURED_RATIO_MAX);
}

void spw_plan_use_measured(struct spw_plan_input *in, const struct spw_plan_measured *m)
{
    if (m->cut < 0 || m->cut >= in->n_cuts)
        return;
    if (m->local_ns > 0 && isfinite(m->local_ns))
        in->local_ns = m->local_ns;
    const double client = clamped_ratio(m->remote_ns, in->remote_ns[m->cut]);
    for (int k = 0; k < in->n_cuts; k++)
        in->remote_ns[k] *= client;
    for (int j = 0; j < in->n_workers; j++) {
        const double r = clamped_ratio(m->worker_ns[j], in->workers[j].cost_ns[m->cut]);
        for (int k = 0; k < in->n_cuts; k++)
            in->workers[j].cost_ns[k] *= r;
    }
}

void spw_plan_client_costs(const struct spw_profile *me, double recv_ns_per_byte, struct spw_plan_input *in)
{
    const double batch_copy = me->copy_ns[me->groups];
    in->n_cuts = me->groups + 1;
    in->local_ns = spw_profile_prefix_ns(me, me->groups);
    for (int k = 0; k <= me->groups; k++) {
        double suffix = 0;
        for (int g = k; g < me->groups; g++)
            suffix += me->group_ns[g];
        in->bytes[k] = me->bytes[k];
        in->remote_ns[k] = recv_ns_per_byte * me->bytes[k] + suffix + batch_copy;
    }
}
