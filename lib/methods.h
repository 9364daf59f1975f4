/* lib/methods.h - every RPC method of Spillway's two services in one list: an id, the service and the name,
 * which make the path ("/spillway.v1.Dispatcher/LeaseSplit") that servers register and callers call, so no
 * path is written twice (check_rpc holds the list to the proto's services). The dispatcher's handler
 * prototypes and registrations come from its own list over these ids (dispatcher/service.h). Constant
 * data; any thread. */
#ifndef SPW_LIB_METHODS_H
#define SPW_LIB_METHODS_H

/* X(ID, SERVICE, NAME) */
#define SPW_METHODS(X)                                                                                         \
    X(REGISTER_WORKER, Dispatcher, RegisterWorker)                                                            \
    X(WORKER_HEARTBEAT, Dispatcher, WorkerHeartbeat)                                                          \
    X(CREATE_JOB, Dispatcher, CreateJob)                                                                      \
    X(CLIENT_HEARTBEAT, Dispatcher, ClientHeartbeat)                                                          \
    X(LEASE_SPLIT, Dispatcher, LeaseSplit)                                                                    \
    X(LIST_WORKERS, Dispatcher, ListWorkers)                                                                  \
    X(LIST_JOBS, Dispatcher, ListJobs)                                                                        \
    X(DESCRIBE_JOB, Dispatcher, DescribeJob)                                                                  \
    X(GET_MANIFEST, Dispatcher, GetManifest)                                                                  \
    X(CANCEL_JOB, Dispatcher, CancelJob)                                                                      \
    X(STREAM_ELEMENTS, Worker, StreamElements)                                                                \
    X(PROFILE, Worker, Profile)                                                                               \
    X(PROBE, Worker, Probe)

enum spw_method {
#define SPW_METHOD_ID(ID, SERVICE, NAME) SPW_M_##ID,
    SPW_METHODS(SPW_METHOD_ID)
#undef SPW_METHOD_ID
        SPW_METHOD_COUNT
};

/* The method's path, "/spillway.v1.<Service>/<Name>"; NULL when m is out of range. */
const char *spw_method_path(enum spw_method m);
/* The path of an id written out: SPW_PATH(LEASE_SPLIT). */
#define SPW_PATH(ID) spw_method_path(SPW_M_##ID)

#endif
