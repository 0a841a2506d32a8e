/* sim_fabric: the rendezvous that makes simulated collectives synchronise across processes
 * (docs/simulator.md "Synchronised collectives"): every member publishes its arrival in a
 * shared directory and the collective ends for everybody after the last arrival. */
#ifndef MSMON_SIM_FABRIC_H
#define MSMON_SIM_FABRIC_H

#include <stdbool.h>
#include <stdint.h>

/* Whether MSSIM_FABRIC_DIR and a world size of at least 2 are configured (read once). */
bool sim_fabric_on(void);

/* Publish this rank's arrival (device time, ns) at the next collective on comm_name and wait
 * until every member has published its own. *ret_last is the latest arrival of all members
 * (the own arrival when a member did not arrive before MSSIM_FABRIC_TIMEOUT_MS, counted and
 * logged). transfer_ns is only written to the ground-truth file. 0 or -errno. */
int sim_fabric_arrive(const char *comm_name, uint64_t arrival_ns, uint64_t transfer_ns, uint64_t *ret_last);

#endif
