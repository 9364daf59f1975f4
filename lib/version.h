/* lib/version.h - what build this is and which protocol it speaks. The protocol version changes whenever
 * daemons and clients of two builds could not work together; peers of another one are refused by name.
 * Pure; thread-safe. */
#ifndef SPW_LIB_VERSION_H
#define SPW_LIB_VERSION_H

/* 2: job secrets on heartbeats, leases and streams (scripts read the number: keep the line bare) */
#define SPW_PROTOCOL_VERSION 2

/* "spillway 0a1b2c3 (protocol 1)": the build's git describe (or SPW_VERSION given to make), baked in at
 * build time. Never NULL. */
const char *spw_version(void);
/* The git describe part alone ("0a1b2c3-dirty", "unknown" outside a git checkout). */
const char *spw_build_version(void);

#endif
