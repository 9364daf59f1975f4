/* examples/c_trainer.c - a trainer's data loop in C on the installed libspillway: create a job from a
 * pipeline spec (in this process, or through a dispatcher), take every batch, read its tensors and keys
 * through the accessors, give it back. Single-threaded (the library runs its own threads).
 *
 *   cc c_trainer.c $(pkg-config --cflags --libs spillway) -o c_trainer
 *   ./c_trainer [--dispatcher HOST:PORT] [--keys FILE] PIPELINE.json
 *
 * --keys writes one line per element, "epoch sample path", as `spillctl run --keys` does. */
#include <spillway/client.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *text = NULL;
    size_t len = 0, cap = 0, n;
    do {
        if (len + 4096 + 1 > cap) {
            char *grown = realloc(text, cap = 2 * cap + 4096 + 1);
            if (!grown) {
                free(text);
                fclose(f);
                return NULL;
            }
            text = grown;
        }
        n = fread(text + len, 1, cap - len - 1, f);
        len += n;
    } while (n > 0);
    fclose(f);
    text[len] = 0;
    return text;
}

static const char *dtype_name(int dtype)
{
    switch (dtype) {
    case SPW_DTYPE_U8: return "uint8";
    case SPW_DTYPE_F32: return "float32";
    case SPW_DTYPE_F16: return "float16";
    case SPW_DTYPE_I64: return "int64";
    default: return "?";
    }
}

/* One training step's worth of reading: the data's shape, the labels, the keys. Returns 0 or -1. */
static int train_step(const struct spw_batch *b, FILE *keys, int64_t *label_sum)
{
    int dtype, ndim;
    int64_t shape[SPW_TENSOR_MAX_DIMS];
    void *data;
    size_t nbytes;
    const int n = spw_batch_elements(b);
    if (spw_batch_tensor_at(b, 0, &dtype, &ndim, shape, &data, &nbytes) != 0 || ndim < 1 || shape[0] != n)
        return -1;
    int64_t epoch, index;
    spw_batch_position(b, &epoch, &index);
    if (index == 0)
        printf("c_trainer: epoch %lld: data %s [%lld", (long long)epoch, dtype_name(dtype), (long long)shape[0]);
    for (int d = 1; index == 0 && d < ndim; d++)
        printf(", %lld", (long long)shape[d]);
    if (index == 0)
        printf("]\n");
    if (spw_batch_tensor_at(b, 1, &dtype, &ndim, shape, &data, &nbytes) != 0 || dtype != SPW_DTYPE_I64 ||
        shape[0] != n)
        return -1;
    for (int i = 0; i < n; i++) {
        *label_sum += ((const int64_t *)data)[i];
        int64_t e, sample;
        const char *path;
        if (spw_batch_key_at(b, i, &e, &sample, &path) != 0)
            return -1;
        if (keys)
            fprintf(keys, "%lld %lld %s\n", (long long)e, (long long)sample, path);
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *dispatcher = NULL, *keys_path = NULL, *pipeline = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dispatcher") && i + 1 < argc)
            dispatcher = argv[++i];
        else if (!strcmp(argv[i], "--keys") && i + 1 < argc)
            keys_path = argv[++i];
        else if (argv[i][0] != '-' && !pipeline)
            pipeline = argv[i];
        else {
            fprintf(stderr, "usage: c_trainer [--dispatcher HOST:PORT] [--keys FILE] PIPELINE.json\n");
            return 2;
        }
    }
    if (!pipeline) {
        fprintf(stderr, "usage: c_trainer [--dispatcher HOST:PORT] [--keys FILE] PIPELINE.json\n");
        return 2;
    }
    char *spec = read_file(pipeline);
    if (!spec) {
        perror(pipeline);
        return 1;
    }
    FILE *keys = keys_path ? fopen(keys_path, "w") : NULL;
    if (keys_path && !keys) {
        perror(keys_path);
        free(spec);
        return 1;
    }

    struct spw_job_opts opts;
    spw_job_opts_init(&opts);
    opts.dispatcher = dispatcher;          /* NULL: the pipeline runs in this process */
    char err[1024];
    struct spw_job *job = NULL;
    int rc = spw_job_create_json(spec, &opts, &job, err, sizeof err);
    free(spec);
    if (rc != 0) {
        fprintf(stderr, "c_trainer: %s (%s)\n", err, spw_strerror(rc));
        if (keys)
            fclose(keys);
        return rc == SPW_ESPEC ? 2 : 1;
    }

    int status = 0;
    int64_t label_sum = 0;
    struct spw_batch *b;
    while ((rc = spw_job_next(job, &b)) == 0) {
        if (train_step(b, keys, &label_sum) != 0) {
            fprintf(stderr, "c_trainer: a batch did not read back\n");
            status = 1;
        }
        spw_job_release(job, b);
        if (status)
            break;
    }
    if (rc != SPW_ECLOSED && !status) {
        fprintf(stderr, "c_trainer: %s\n", spw_job_errmsg(job));
        status = 1;
    }
    struct spw_job_stats st;
    spw_job_stats(job, &st);
    printf("c_trainer: %lld elements in %lld batches (%lld from workers), %lld skipped, label sum %lld\n",
           (long long)st.elements, (long long)st.batches, (long long)st.remote_elements, (long long)st.skipped,
           (long long)label_sum);
    spw_job_destroy(job);
    if (keys)
        fclose(keys);
    return status;
}
