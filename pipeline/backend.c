/* pipeline/backend.c - the CPU backend and the table walk (see backend.h). Thread-safe: no shared state. */
#include "pipeline/backend.h"

#include <errno.h>

static int cpu_run(const struct spw_backend *b, const struct spw_producer *p, const struct spw_microbatch *mb)
{
    char err[512];
    for (int k = 0; k < mb->n; k++) {
        if (mb->want && !mb->want(mb->opaque, k))
            continue;
        struct spw_value v;
        const struct spw_element_dest *dest = mb->dest ? mb->dest(mb->opaque, k) : NULL;
        int rc = spw_produce(p, mb->epoch, mb->samples[k], mb->cut, &v, NULL, dest, err, sizeof err);
        mb->done(mb->opaque, k, rc, &v, err);
    }
    return 0;
}

const struct spw_backend spw_backend_cpu = {.name = "cpu", .run = cpu_run};

int spw_backend_run(const struct spw_backend *const *table, int n, const struct spw_producer *p,
                    const struct spw_microbatch *mb)
{
    int rc = -ENODEV;
    for (int i = 0; i < n && rc != 0; i++)
        rc = table[i]->run(table[i], p, mb);
    return rc;
}
