# tests/integration/job_churn.py - a client that runs N small jobs one after another through a dispatcher
# (spillway.Loader: one process, one job at a time), each checked to deliver every key of its epoch once.
# Prints "ok N" at the end; exits 1 at the first job that fails, naming it. Used by job_table.sh.
import sys

from spillway import Loader, Pipeline

dispatcher, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
pipe = Pipeline.image_folder(path, shuffle=True, seed=1, epochs=1).decode_jpeg().center_crop(16).batch(8)
for i in range(n):
    try:
        with Loader(pipe, dispatcher=dispatcher, local_cores=1, cut=0) as loader:
            keys = [k.sample for b in loader for k in b.keys]
    except Exception as e:        # noqa: BLE001 - report which job failed and why
        print("job %d of %d failed: %s" % (i + 1, n, e), file=sys.stderr)
        sys.exit(1)
    if sorted(keys) != list(range(len(keys))) or not keys:
        print("job %d of %d delivered keys %s" % (i + 1, n, sorted(keys)), file=sys.stderr)
        sys.exit(1)
print("ok %d" % n)
