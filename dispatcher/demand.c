/* dispatcher/demand.c - the workers a trainer's measured demand needs (see demand.h). Pure arithmetic on
 * heartbeat figures; no state, no clock. Thread model: none. */
#include "dispatcher/demand.h"

#include <math.h>
#include <stdbool.h>

#define HEADROOM 0.9            /* plan workers to 90% of their capacity, as the planner does */
#define SATISFIED_WAIT 0.02     /* below this the trainer is not waiting: its rate is its demand */

double disp_demand_rate(double consumed_per_s, double wait_fraction)
{
    if (!isfinite(consumed_per_s) || consumed_per_s < 0)
        return 0;
    double w = isfinite(wait_fraction) && wait_fraction > 0 ? wait_fraction : 0;
    if (w < SATISFIED_WAIT)
        return consumed_per_s;
    if (w > DISP_DEMAND_MAX_WAIT)
        w = DISP_DEMAND_MAX_WAIT;
    return consumed_per_s / (1 - w);
}

double disp_demand_idle(const struct disp_demand_input *in)
{
    double idle = isfinite(in->wait_fraction) && in->wait_fraction > 0 ? in->wait_fraction : 0;
    const double s = in->starved_fraction, all = in->trainer_cpu_cores, own = in->trainer_own_cores;
    if (isfinite(s) && s > 0 && isfinite(all) && all > 0 && isfinite(own) && own > 0)
        idle += s * (own < all ? own / all : 1);
    return idle < 1 ? idle : 1;
}

/* Elements/s one worker makes at full load, or 0 when nothing says. */
static double capacity(const struct disp_demand_producer *p, double cores)
{
    return p->cpu_ns_per_element > 0 && cores > 0 ? cores * 1e9 / p->cpu_ns_per_element : 0;
}

int disp_demand_workers(const struct disp_demand_input *in)
{
    const bool measured = isfinite(in->consumed_per_s) && in->consumed_per_s > 0;
    const double idle = disp_demand_idle(in);
    const bool waits = idle >= SATISFIED_WAIT;
    if (!measured && !waits)
        return in->n_workers;   /* nothing measured yet (a job's first second): keep what it has */
    const double demand = disp_demand_rate(in->consumed_per_s, idle);
    const double own = isfinite(in->client.elements_per_s) && in->client.elements_per_s > 0
                           ? in->client.elements_per_s : 0;
    double per_worker = 0;
    int n = 0;
    for (int i = 0; i < in->n_workers; i++) {
        const double c = capacity(&in->workers[i], in->workers[i].cores);
        if (c > 0) {
            per_worker += c;
            n++;
        }
    }
    per_worker = n ? per_worker / n : capacity(&in->client, in->worker_cores);
    const double remote = demand - own;
    if (waits && !measured)     /* it waits and gets nothing yet: what it has, at least one */
        return in->n_workers > 0 ? in->n_workers : 1;
    if (remote <= 0 || (!waits && in->n_workers == 0))
        return 0;               /* the trainer's own threads keep up */
    if (!(per_worker > 0))
        return waits ? (in->n_workers > 0 ? in->n_workers + 1 : 1) : in->n_workers;
    const int need = (int)ceil(remote / (HEADROOM * per_worker) - 1e-9);
    return need < 1 && waits ? 1 : need;
}
