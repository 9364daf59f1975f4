/* tests/unit/check_planner.c - the pure planner (pipeline/planner.c) on synthetic profiles: remote capacity
 * summed over workers and capped by links and the client NIC, the best local/remote mix, the s >= f case
 * (a cut that costs the client more than local work never helps), the trainer's rate binding, NIC-bound
 * cuts moving to smaller elements, heterogeneous workers, ties, overrides, the autoscaling signal, bad
 * input refused, GPU producers (the client's, cheapest elements first; a worker's, at the last cut), costs
 * measured on a running job folded in, and when re-planning hands a running job back
 * to the client (dispatcher/planning.c). Numbers are chosen so the expected values can be worked out by
 * hand. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#include "tests/unit/check_run.h"
#include "dispatcher/planning.h"
#include "pipeline/plan_proto.h"
#include "pipeline/planner.h"

/* 3 cuts: k=0 ships 40 KB JPEGs (client decodes: 900 us), k=1 150 KB images (client finishes: 200 us),
 * k=2 600 KB tensors (client copies: 100 us). Local: 1 ms per element. One worker core per worker, whose
 * cost grows with the cut: 100 us, 800 us, 1 ms. */
static struct spw_plan_input base(int workers)
{
    struct spw_plan_input in;
    memset(&in, 0, sizeof in);
    in.n_cuts = 3;
    const double bytes[3] = {40e3, 150e3, 600e3}, s[3] = {900e3, 200e3, 100e3}, w[3] = {100e3, 800e3, 1000e3};
    for (int k = 0; k < 3; k++) {
        in.bytes[k] = bytes[k];
        in.remote_ns[k] = s[k];
    }
    in.local_ns = 1e6;
    in.client_cores = 1;
    in.n_workers = workers;
    for (int j = 0; j < workers; j++) {
        in.workers[j].cores = 1;
        for (int k = 0; k < 3; k++)
            in.workers[j].cost_ns[k] = w[k];
    }
    in.force_cut = -1;
    return in;
}

START_TEST(test_planner_best_mix_and_cut)
{
    struct spw_plan_input in = base(1);
    struct spw_plan p;
    ck_assert_int_eq(spw_plan_decide(&in, &p), 0);
    ck_assert_double_eq_tol(p.local_only, 1000, 1e-6);
    /* k=1: T_r = 1250/s; the client spends 1250 * 200 us = 0.25 s/s on them, 0.75 s/s left for 750 local */
    ck_assert_double_eq_tol(p.c[1].remote_capacity, 1250, 1e-6);
    ck_assert_double_eq_tol(p.c[1].remote_rate, 1250, 1e-6);
    ck_assert_double_eq_tol(p.c[1].local_rate, 750, 1e-6);
    /* k=2: T_r = 1000, client 0.1 s/s, 900 local: 1900 < 2000 */
    ck_assert_double_eq_tol(p.c[2].throughput, 1900, 1e-6);
    /* k=0: T_r = 10000 but each costs the client 900 us: 1111 remote, nothing left */
    ck_assert_double_eq_tol(p.c[0].throughput, 1e9 / 900e3, 1e-6);
    ck_assert(p.offload);
    ck_assert_int_eq(p.best, 1);
    ck_assert_double_eq_tol(p.throughput, 2000, 1e-6);
    ck_assert_double_eq_tol(p.local_share, 750.0 / 2000, 1e-9);
    ck_assert_int_eq(p.workers_needed, -1);        /* R unlimited: no target to size for */
    ck_assert_ptr_nonnull(strstr(p.why, "cut 1"));
}
END_TEST

/* The client's GPU: 3000/s at 200 us of host CPU each. Alone: 3000 on the GPU (0.6 s/s) and 400 on the CPU.
 * At cut 1 the GPU's elements and the remote ones cost the same: GPU 3000, remote 1250 (0.25 s/s), 150 on the
 * CPU: 4400, over 1.1 x 3400. A GPU that takes the whole budget by itself leaves nothing to offload. */
START_TEST(test_planner_client_gpu_elements_go_first)
{
    struct spw_plan_input in = base(1);
    in.gpu = (struct spw_plan_gpu){.rate = 3000, .cpu_ns = 200e3};
    struct spw_plan p;
    ck_assert_int_eq(spw_plan_decide(&in, &p), 0);
    ck_assert_double_eq_tol(p.local_only, 3400, 1e-6);
    ck_assert_int_eq(p.best, 1);
    ck_assert_double_eq_tol(p.c[1].gpu_rate, 3000, 1e-6);
    ck_assert_double_eq_tol(p.c[1].remote_rate, 1250, 1e-6);
    ck_assert_double_eq_tol(p.c[1].local_rate, 3150, 1e-6);
    ck_assert_double_eq_tol(p.throughput, 4400, 1e-6);
    ck_assert_double_eq_tol(p.c[2].throughput, 4300, 1e-6);
    ck_assert_ptr_nonnull(strstr(p.why, "the client's GPU makes 3000 of them"));
    in.rate = 3200;                     /* the client alone reaches it: no worker needed */
    ck_assert_int_eq(spw_plan_decide(&in, &p), 0);
    ck_assert_int_eq(p.workers_needed, 0);
    in.rate = 0;
    in.gpu = (struct spw_plan_gpu){.rate = 10000, .cpu_ns = 100e3};
    ck_assert_int_eq(spw_plan_decide(&in, &p), 0);
    ck_assert(!p.offload);
    ck_assert_double_eq_tol(p.throughput, 10000, 1e-6);
    ck_assert_ptr_nonnull(strstr(p.why, "no offload"));
    in.gpu.rate = -1;
    ck_assert_int_eq(spw_plan_decide(&in, &p), -EINVAL);
}
END_TEST

/* A worker's GPU (2000/s at 200 us of its CPU each) adds to it at the last cut only: 2000 + 0.6 s/s / 1 ms. */
START_TEST(test_planner_worker_gpu_counts_at_the_last_cut)
{
    struct spw_plan_input in = base(1);
    in.workers[0].gpu = (struct spw_plan_gpu){.rate = 2000, .cpu_ns = 200e3};
    struct spw_plan p;
    ck_assert_int_eq(spw_plan_decide(&in, &p), 0);
    ck_assert_double_eq_tol(p.c[1].remote_capacity, 1250, 1e-6);
    ck_assert_double_eq_tol(p.c[2].remote_capacity, 2600, 1e-6);
    ck_assert_int_eq(p.best, 2);
    ck_assert_double_eq_tol(p.throughput, 2600 + 740, 1e-6);
}
END_TEST

START_TEST(test_planner_s_not_below_f_never_helps)
{
    struct spw_plan_input in = base(4);
    for (int k = 0; k < 3; k++)
        in.remote_ns[k] = 1.2e6;                    /* every remote element costs more than a local one */
    struct spw_plan p;
    ck_assert_int_eq(spw_plan_decide(&in, &p), 0);
    for (int k = 0; k < 3; k++) {
        ck_assert(!p.c[k].helps);
        ck_assert_double_eq_tol(p.c[k].remote_rate, 0, 1e-9);
        ck_assert_double_eq_tol(p.c[k].throughput, 1000, 1e-6);
    }
    ck_assert(!p.offload);
    ck_assert_int_eq(p.best, -1);
    ck_assert_double_eq_tol(p.throughput, 1000, 1e-6);
    ck_assert_double_eq(p.local_share, 1);
    ck_assert_ptr_nonnull(strstr(p.why, "no offload"));
}
END_TEST

START_TEST(test_planner_rate_binds)
{
    struct spw_plan_input in = base(1);
    in.rate = 800;                                  /* the client alone does 1000: no offload */
    struct spw_plan p;
    ck_assert_int_eq(spw_plan_decide(&in, &p), 0);
    ck_assert(!p.offload);
    ck_assert_double_eq_tol(p.throughput, 800, 1e-6);
    ck_assert_int_eq(p.workers_needed, 0);
    ck_assert_ptr_nonnull(strstr(p.why, "meets the trainer's rate"));

    in.rate = 1500;                                 /* needs help; every cut's T is capped at R */
    ck_assert_int_eq(spw_plan_decide(&in, &p), 0);
    ck_assert(p.offload);
    ck_assert_double_eq_tol(p.c[1].throughput, 1500, 1e-6);
    ck_assert_double_eq_tol(p.c[2].throughput, 1500, 1e-6);
    /* k=1 and k=2 tie at R; k=2 needs x_r* = (1500*1e6 - 1e9)/(1e6 - 1e5) = 555.6/s of a worker doing
     * 1000/s at 90%: 1 worker, as k=1 (625/s of 1250/s); k=1's mix costs the client less CPU (1250 remote
     * at 200 us + 250 local = 0.5 core; k=2: 1000 at 100 us + 500 local = 0.6) */
    ck_assert_int_eq(p.c[1].workers_needed, 1);
    ck_assert_int_eq(p.c[2].workers_needed, 1);
    ck_assert_double_eq_tol(p.c[1].client_cpu, 0.5, 1e-9);
    ck_assert_double_eq_tol(p.c[2].client_cpu, 0.6, 1e-9);
    ck_assert_int_eq(p.best, 1);
    ck_assert_int_eq(p.workers_needed, 1);

    in.rate = 5000;                                 /* k=1: x_r* = 5000 at 200 us is all of the client's CPU */
    ck_assert_int_eq(spw_plan_decide(&in, &p), 0);
    ck_assert_int_eq(p.c[1].workers_needed, 5);    /* (5e9 - 1e9) / 8e5 = 5000/s over 1250 * 0.9: 5 */
    ck_assert_int_eq(p.c[0].workers_needed, -1);   /* 40000/s of remote at 900 us: more than the client has */
}
END_TEST

START_TEST(test_planner_nic_bound_moves_to_smaller_elements)
{
    struct spw_plan_input in = base(8);
    struct spw_plan p;
    ck_assert_int_eq(spw_plan_decide(&in, &p), 0);
    ck_assert_int_eq(p.best, 2);                    /* 8 workers: k=2 (cheapest for the client) wins */
    in.nic_bytes_per_s = 150e6;                     /* 150 MB/s: k=2 gets 250/s, k=1 1000/s */
    ck_assert_int_eq(spw_plan_decide(&in, &p), 0);
    ck_assert_double_eq_tol(p.c[2].remote_capacity, 250, 1e-6);
    ck_assert_double_eq_tol(p.c[1].remote_capacity, 1000, 1e-6);
    ck_assert_int_eq(p.best, 1);
    ck_assert_double_eq_tol(p.throughput, 1000 + 800, 1e-6);
}
END_TEST

/* Compression, measured at cut 1 only (ratio 3; 1 ns/byte to compress on a worker, 0.5 to decompress on the
 * client; receiving 0.1 ns/byte): behind a 150 MB/s NIC, cut 1 compressed ships 50 KB and 3000/s fit; each
 * costs the client 200 + 75 - 10 = 265 us, so 3000 remote (0.795 s/s) + 205 local = 3205, over raw's 1800.
 * With no cap, raw wins (compressing only costs CPU); off means raw; a forced level is used where measured. */
START_TEST(test_planner_compresses_where_the_link_binds)
{
    struct spw_plan_input in = base(8);
    in.nic_bytes_per_s = 150e6;
    in.zstd_ratio[1] = 3;
    in.zstd_compress_ns[1] = 1;
    in.zstd_decompress_ns[1] = 0.5;
    in.recv_ns_per_byte = 0.1;
    struct spw_plan p;
    ck_assert_int_eq(spw_plan_decide(&in, &p), 0);
    ck_assert_int_eq(p.best, 1);
    ck_assert(p.c[1].compressed && p.compressed);
    ck_assert_int_eq(p.compress_level, 1);
    ck_assert_double_eq_tol(p.c[1].bytes, 50e3, 1e-6);
    ck_assert_double_eq_tol(p.c[1].remote_capacity, 3000, 1e-6);
    ck_assert_double_eq_tol(p.c[1].remote_ns, 265e3, 1e-6);
    ck_assert_double_eq_tol(p.throughput, 3205, 1e-6);
    ck_assert_ptr_nonnull(strstr(p.why, "compressed"));
    ck_assert(!p.c[2].compressed && !p.c[0].compressed);       /* not measured there */
    in.compress = -1;                                           /* off */
    ck_assert_int_eq(spw_plan_decide(&in, &p), 0);
    ck_assert(!p.compressed && !p.c[1].compressed);
    ck_assert_int_eq(p.compress_level, 0);
    ck_assert_double_eq_tol(p.throughput, 1800, 1e-6);
    in.compress = 5;                                            /* forced */
    in.nic_bytes_per_s = 0;
    ck_assert_int_eq(spw_plan_decide(&in, &p), 0);
    ck_assert(p.c[1].compressed);
    in.compress = 0;                                            /* no cap: compressing does not pay */
    ck_assert_int_eq(spw_plan_decide(&in, &p), 0);
    ck_assert(!p.compressed);
    for (int k = 0; k < 3; k++)
        ck_assert(!p.c[k].compressed);
    in.zstd_ratio[1] = NAN;                                     /* garbage is refused */
    ck_assert_int_eq(spw_plan_decide(&in, &p), -EINVAL);
}
END_TEST

/* What a client claims of compression is checked like the rest of its facts. */
START_TEST(test_planner_refuses_a_client_lying_about_compression)
{
    double remote[2] = {1e5, 2e5}, bytes[2] = {1e4, 2e4}, ratio[2] = {1, 3}, c[2] = {1, 1}, d[2] = {1, 1};
    Spillway__V1__ClientFacts cf = SPILLWAY__V1__CLIENT_FACTS__INIT;
    cf.n_remote_ns = cf.n_bytes = 2;
    cf.remote_ns = remote;
    cf.bytes = bytes;
    cf.local_ns = 1e6;
    cf.cores = 1;
    cf.n_zstd_ratio = cf.n_zstd_compress_ns_per_byte = cf.n_zstd_decompress_ns_per_byte = 2;
    cf.zstd_ratio = ratio;
    cf.zstd_compress_ns_per_byte = c;
    cf.zstd_decompress_ns_per_byte = d;
    struct spw_plan plan;
    int profiled;
    char msg[256];
    ck_assert_int_eq(disp_plan_job(NULL, &cf, 2, NULL, 0, NULL, NULL, &plan, &profiled, msg, sizeof msg), 0);
    const double bad[] = {NAN, -1, 1e9, INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        double *field[3] = {&ratio[1], &c[1], &d[0]};
        for (int f = 0; f < 3; f++) {
            const double keep = *field[f];
            *field[f] = bad[i];
            ck_assert_int_eq(disp_plan_job(NULL, &cf, 2, NULL, 0, NULL, NULL, &plan, &profiled, msg, sizeof msg),
                             -EINVAL);
            ck_assert_msg(strstr(msg, "compression") != NULL, "%s", msg);
            *field[f] = keep;
        }
    }
    cf.n_zstd_decompress_ns_per_byte = 1;                       /* counts that do not match */
    ck_assert_int_eq(disp_plan_job(NULL, &cf, 2, NULL, 0, NULL, NULL, &plan, &profiled, msg, sizeof msg), -EINVAL);
    cf.n_zstd_decompress_ns_per_byte = 2;
    cf.compress = 20;                                           /* no such level */
    ck_assert_int_eq(disp_plan_job(NULL, &cf, 2, NULL, 0, NULL, NULL, &plan, &profiled, msg, sizeof msg), -EINVAL);
}
END_TEST

START_TEST(test_planner_heterogeneous_workers)
{
    struct spw_plan_input in = base(2);
    in.workers[0].cores = 4;                        /* a big worker behind a slow link */
    in.workers[0].efficiency = 0.5;
    in.workers[0].link_bytes_per_s = 75e6;
    in.workers[1].cores = 1;                        /* a small one on a fast link */
    struct spw_plan p;
    ck_assert_int_eq(spw_plan_decide(&in, &p), 0);
    /* k=1: worker 0 computes 4*0.5/0.8 ms = 2500/s but its link carries 500/s; worker 1: 1250/s */
    ck_assert_double_eq_tol(p.c[1].remote_capacity, 500 + 1250, 1e-6);
    /* k=2: worker 0: min(2000, 125); worker 1: 1000 */
    ck_assert_double_eq_tol(p.c[2].remote_capacity, 125 + 1000, 1e-6);
}
END_TEST

START_TEST(test_planner_overrides)
{
    struct spw_plan_input in = base(1);
    in.force_cut = 2;
    struct spw_plan p;
    ck_assert_int_eq(spw_plan_decide(&in, &p), 0);
    ck_assert_int_eq(p.best, 2);
    ck_assert_double_eq_tol(p.throughput, 1900, 1e-6);
    ck_assert_ptr_nonnull(strstr(p.why, "override"));
    in.force_cut = -1;
    in.local_off = true;                            /* remote only: k=1 gives 1250, k=2 1000 */
    ck_assert_int_eq(spw_plan_decide(&in, &p), 0);
    ck_assert_int_eq(p.best, 1);
    ck_assert_double_eq_tol(p.throughput, 1250, 1e-6);
    ck_assert_double_eq(p.local_share, 0);
    ck_assert_double_eq(p.c[1].local_rate, 0);
}
END_TEST

START_TEST(test_planner_ties_go_to_fewer_bytes)
{
    struct spw_plan_input in = base(1);
    in.n_cuts = 2;
    in.bytes[0] = 600e3;
    in.bytes[1] = 150e3;                            /* same costs otherwise: the smaller element wins */
    in.remote_ns[0] = in.remote_ns[1] = 200e3;
    in.workers[0].cost_ns[0] = in.workers[0].cost_ns[1] = 800e3;
    struct spw_plan p;
    ck_assert_int_eq(spw_plan_decide(&in, &p), 0);
    ck_assert_int_eq(p.best, 1);
}
END_TEST

/* The costs `spillctl plan` measured for bench/offload.sh's train pipeline (2026-12-04): cuts 1 and 2 ship
 * the same 150.5 KB, the client is saturated at both mixes, and cut 2 predicts ~1% more: it wins, not the
 * lower cut (the tie used to fall to cut 1; measured, cut 2 ran 1.72-1.95x local-only and cut 1 1.71-1.74x). */
START_TEST(test_planner_equal_ties_go_to_the_higher_prediction)
{
    struct spw_plan_input in = base(1);
    const double bytes[3] = {42.5e3, 150.5e3, 150.5e3}, s[3] = {940e3, 288.5e3, 124.4e3}, w[3] = {18e3, 612e3, 756e3};
    for (int k = 0; k < 3; k++) {
        in.bytes[k] = bytes[k];
        in.remote_ns[k] = s[k];
        in.workers[0].cost_ns[k] = w[k];
    }
    in.local_ns = 946e3;
    struct spw_plan p;
    ck_assert_int_eq(spw_plan_decide(&in, &p), 0);
    ck_assert(p.c[2].throughput > p.c[1].throughput && p.c[1].throughput > 0.98 * p.c[2].throughput);
    ck_assert_int_eq(p.best, 2);
}
END_TEST

START_TEST(test_planner_calibrates_the_client_to_a_measured_rate)
{
    struct spw_plan_input in = base(1);
    struct spw_plan p;
    /* Predicted 2000/s at cut 1 (1250 remote + 750 local), measured 1500: the client has 0.5 cores, not 1
     * (1250 remote take 0.25 s/s, 0.25 s/s left for 250 local). */
    ck_assert_int_eq(spw_plan_calibrate(&in, 1, 1500, 1.1, 0.1, &p), 0);
    ck_assert_double_eq_tol(in.client_cores, 0.5, 1e-6);
    ck_assert_double_eq_tol(p.c[1].throughput, 1500, 1e-3);
    ck_assert_int_eq(p.best, 1);                    /* cut 2 would give 1000 + 400 */
    in = base(1);                                   /* within the slack, or above: the cores stay */
    ck_assert_int_eq(spw_plan_calibrate(&in, 1, 1900, 1.1, 0.1, &p), 0);
    ck_assert_double_eq_tol(in.client_cores, 1, 1e-12);
    ck_assert_double_eq_tol(p.throughput, 2000, 1e-6);
    in = base(1);                                   /* far below anything the cores explain: the floor */
    ck_assert_int_eq(spw_plan_calibrate(&in, 1, 10, 1.1, 0.1, &p), 0);
    ck_assert_double_eq_tol(in.client_cores, 0.1, 1e-6);
}
END_TEST

START_TEST(test_planner_folds_costs_measured_on_the_running_job)
{
    struct spw_plan_input in = base(1);
    struct spw_plan p;
    ck_assert_int_eq(spw_plan_decide(&in, &p), 0);
    ck_assert_int_eq(p.best, 1);
    /* Running at cut 1, the client measured 600 us per remote element (3x the model), 1.2 ms per own
     * element, the worker 1.2 ms per element sent (1.5x). Every cut scales by those ratios: s = 2700, 600,
     * 300 us; W = 150, 1200, 1500 us. Cut 1: 833.3 remote (0.5 s/s of the client) + 416.7 local = 1250;
     * cut 2: 666.7 remote (0.2 s/s) + 666.7 local = 1333.3 - the plan moves to cut 2. */
    struct spw_plan_measured m = {.cut = 1, .remote_ns = 600e3, .local_ns = 1.2e6, .worker_ns = {1.2e6}};
    spw_plan_use_measured(&in, &m);
    ck_assert_double_eq_tol(in.remote_ns[0], 2700e3, 1e-3);
    ck_assert_double_eq_tol(in.remote_ns[2], 300e3, 1e-3);
    ck_assert_double_eq_tol(in.workers[0].cost_ns[0], 150e3, 1e-3);
    ck_assert_double_eq_tol(in.workers[0].cost_ns[2], 1500e3, 1e-3);
    ck_assert_double_eq_tol(in.local_ns, 1.2e6, 1e-3);
    ck_assert_int_eq(spw_plan_decide(&in, &p), 0);
    ck_assert_double_eq_tol(p.c[1].throughput, 1250, 1e-6);
    ck_assert_double_eq_tol(p.c[2].throughput, 1333.333, 1e-2);
    ck_assert_int_eq(p.best, 2);
    /* Not measured (0) leaves a cost alone; a wild measurement is clamped at 4x. */
    in = base(2);
    struct spw_plan_measured wild = {.cut = 2, .remote_ns = 100e6, .worker_ns = {0, 50e3}};
    spw_plan_use_measured(&in, &wild);
    ck_assert_double_eq_tol(in.remote_ns[0], 3600e3, 1e-3);
    ck_assert_double_eq_tol(in.local_ns, 1e6, 1e-6);
    ck_assert_double_eq_tol(in.workers[0].cost_ns[1], 800e3, 1e-6);
    ck_assert_double_eq_tol(in.workers[1].cost_ns[1], 200e3, 1e-3);
    struct spw_plan_measured outside = {.cut = 3, .remote_ns = 1};   /* a cut the job does not have */
    spw_plan_use_measured(&in, &outside);
    ck_assert_double_eq_tol(in.remote_ns[0], 3600e3, 1e-3);
}
END_TEST

START_TEST(test_planner_hands_a_running_job_back_only_when_no_cut_pays)
{
    /* One worker at 10 ms per element (100/s): cut 2 mixes 100 remote (0.01 s/s of the client) with 990 local
     * = 1090, 9% over local-only (1000): not enough to offload a new job (10%), enough to keep a running one
     * on the service (5%). */
    struct spw_plan_input in = base(1);
    for (int k = 0; k < 3; k++)
        in.workers[0].cost_ns[k] = 10e6;
    struct spw_plan p;
    ck_assert_int_eq(spw_plan_decide(&in, &p), 0);
    ck_assert_int_eq(p.best, -1);
    ck_assert_double_eq_tol(p.c[2].throughput, 1090, 1e-6);
    ck_assert(!disp_hand_back(&p, p.local_only, 0.05));
    /* The same plan made with the client's cores calibrated down (a slow remote path), against what the
     * client alone did at the cores it declared: 1090 is not 5% over 1100 - hand it back. */
    ck_assert(disp_hand_back(&p, 1100, 0.05));
    struct spw_plan kept = p;                       /* what `spillctl explain` then shows for the running job */
    disp_plan_keep(&kept, 2, 0.05);
    ck_assert(kept.offload);
    ck_assert_int_eq(kept.best, 2);
    ck_assert_double_eq_tol(kept.throughput, 1090, 1e-6);
    ck_assert_double_eq_tol(kept.local_share, 990.0 / 1090, 1e-9);
    ck_assert_ptr_nonnull(strstr(kept.why, "keeps cut 2"));
    ck_assert_ptr_nonnull(strstr(kept.why, "no offload"));
    /* At 50 ms per element (20/s) the best cut gives 1018: hand it back. */
    for (int k = 0; k < 3; k++)
        in.workers[0].cost_ns[k] = 50e6;
    ck_assert_int_eq(spw_plan_decide(&in, &p), 0);
    ck_assert_double_eq_tol(p.c[2].throughput, 1018, 1e-6);
    ck_assert(disp_hand_back(&p, p.local_only, 0.05));
    /* A plan that offloads is never handed back. */
    in = base(1);
    ck_assert_int_eq(spw_plan_decide(&in, &p), 0);
    ck_assert(!disp_hand_back(&p, p.local_only, 0.05));
    ck_assert(!disp_hand_back(&p, 0, 0.05));       /* nothing known about the client alone: keep */
}
END_TEST

START_TEST(test_planner_worker_from_a_profile_reply)
{
    Spillway__V1__CutProfile cuts[2], *ptrs[2];
    for (int k = 0; k < 2; k++) {
        spillway__v1__cut_profile__init(&cuts[k]);
        cuts[k].cut = k;
        cuts[k].ns_per_element = 1000.0 * (k + 1);
        cuts[k].bytes_per_element = 40e3 * (k + 1);
        ptrs[k] = &cuts[k];
    }
    Spillway__V1__ProfileResponse p = SPILLWAY__V1__PROFILE_RESPONSE__INIT;
    p.n_cuts = 2;
    p.cuts = ptrs;
    p.threads = 4;
    p.cores = 0.45;                                 /* its CPU quota */
    struct spw_plan_worker w;
    double bytes[2];
    ck_assert_int_eq(spw_plan_worker_from_proto(&p, 2, &w, bytes), 0);
    ck_assert_double_eq_tol(w.cores, 0.45, 1e-12);
    ck_assert_double_eq_tol(w.cost_ns[1], 2000, 1e-9);
    ck_assert_double_eq_tol(bytes[1], 80e3, 1e-9);
    p.cores = 0;                                    /* an older worker: its threads */
    ck_assert_int_eq(spw_plan_worker_from_proto(&p, 2, &w, bytes), 0);
    ck_assert_double_eq_tol(w.cores, 4, 1e-12);
    ck_assert_int_eq(spw_plan_worker_from_proto(&p, 3, &w, bytes), -EINVAL);    /* other cuts */
    cuts[1].ns_per_element = NAN;
    ck_assert_int_eq(spw_plan_worker_from_proto(&p, 2, &w, bytes), -EINVAL);
    cuts[1].ns_per_element = 1;
    cuts[0].cut = 1;
    ck_assert_int_eq(spw_plan_worker_from_proto(&p, 2, &w, bytes), -EINVAL);
    cuts[0].cut = 0;
    p.gpu_elements_per_s = 900;                     /* its GPU producer */
    p.gpu_cpu_ns = 300e3;
    ck_assert_int_eq(spw_plan_worker_from_proto(&p, 2, &w, bytes), 0);
    ck_assert(w.gpu.rate == 900 && w.gpu.cpu_ns == 300e3);
    p.gpu_elements_per_s = 1e12;                    /* a GPU no device is: not believed */
    ck_assert_int_eq(spw_plan_worker_from_proto(&p, 2, &w, bytes), -EINVAL);
    p.gpu_elements_per_s = 900;
    p.gpu_cpu_ns = -1;
    ck_assert_int_eq(spw_plan_worker_from_proto(&p, 2, &w, bytes), -EINVAL);
    p.gpu_cpu_ns = 0;
    p.threads = 0;
    ck_assert_int_eq(spw_plan_worker_from_proto(&p, 2, &w, bytes), -EINVAL);
}
END_TEST

/* A client's facts with a GPU that cannot be: refused with the numbers, before any worker is asked. */
START_TEST(test_planner_refuses_a_client_lying_about_its_gpu)
{
    double remote[2] = {1e5, 2e5}, bytes[2] = {1e4, 2e4};
    Spillway__V1__ClientFacts cf = SPILLWAY__V1__CLIENT_FACTS__INIT;
    cf.n_remote_ns = cf.n_bytes = 2;
    cf.remote_ns = remote;
    cf.bytes = bytes;
    cf.local_ns = 1e6;
    cf.cores = 1;
    struct spw_plan plan;
    int profiled;
    char msg[256];
    const double bad[][2] = {{NAN, 1e5}, {-1, 1e5}, {1e9, 1e5}, {100, INFINITY}, {100, -5}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cf.gpu_elements_per_s = bad[i][0];
        cf.gpu_cpu_ns = bad[i][1];
        ck_assert_int_eq(disp_plan_job(NULL, &cf, 2, NULL, 0, NULL, NULL, &plan, &profiled, msg, sizeof msg),
                         -EINVAL);
        ck_assert_msg(strstr(msg, "client facts: GPU rate") != NULL, "%s", msg);
    }
    cf.gpu_elements_per_s = 500;                    /* a believable one is planned with */
    cf.gpu_cpu_ns = 1e5;
    ck_assert_int_eq(disp_plan_job(NULL, &cf, 2, NULL, 0, NULL, NULL, &plan, &profiled, msg, sizeof msg), 0);
    ck_assert_double_eq_tol(plan.local_only, 500 + 0.95e9 / 1e6, 1e-6);
}
END_TEST

START_TEST(test_planner_refuses_bad_input)
{
    struct spw_plan_input in = base(1);
    struct spw_plan p;
    in.local_ns = 0;
    ck_assert_int_eq(spw_plan_decide(&in, &p), -EINVAL);
    in = base(1);
    in.workers[0].cost_ns[1] = 0;
    ck_assert_int_eq(spw_plan_decide(&in, &p), -EINVAL);
    in = base(1);
    in.force_cut = 3;
    ck_assert_int_eq(spw_plan_decide(&in, &p), -EINVAL);
    ck_assert_ptr_nonnull(strstr(p.why, "forced cut"));
    in = base(1);
    in.n_cuts = 0;
    ck_assert_int_eq(spw_plan_decide(&in, &p), -EINVAL);
    in = base(1);
    in.remote_ns[0] = NAN;
    ck_assert_int_eq(spw_plan_decide(&in, &p), -EINVAL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("planner");
    TCase *tc = tcase_create("planner");
    tcase_add_test(tc, test_planner_best_mix_and_cut);
    tcase_add_test(tc, test_planner_client_gpu_elements_go_first);
    tcase_add_test(tc, test_planner_worker_gpu_counts_at_the_last_cut);
    tcase_add_test(tc, test_planner_refuses_a_client_lying_about_its_gpu);
    tcase_add_test(tc, test_planner_s_not_below_f_never_helps);
    tcase_add_test(tc, test_planner_rate_binds);
    tcase_add_test(tc, test_planner_nic_bound_moves_to_smaller_elements);
    tcase_add_test(tc, test_planner_compresses_where_the_link_binds);
    tcase_add_test(tc, test_planner_refuses_a_client_lying_about_compression);
    tcase_add_test(tc, test_planner_heterogeneous_workers);
    tcase_add_test(tc, test_planner_overrides);
    tcase_add_test(tc, test_planner_ties_go_to_fewer_bytes);
    tcase_add_test(tc, test_planner_equal_ties_go_to_the_higher_prediction);
    tcase_add_test(tc, test_planner_refuses_bad_input);
    tcase_add_test(tc, test_planner_calibrates_the_client_to_a_measured_rate);
    tcase_add_test(tc, test_planner_worker_from_a_profile_reply);
    tcase_add_test(tc, test_planner_folds_costs_measured_on_the_running_job);
    tcase_add_test(tc, test_planner_hands_a_running_job_back_only_when_no_cut_pays);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
