/*
 * haspctl, the operator CLI, as a function so the tests can run it in
 * process against a real admin server (docs/CONTROL.md is the reference).
 *
 * Exit codes (stable; scripts rely on them):
 *   0  done (health: healthy)
 *   1  the node refused or failed the command (error reply)
 *   2  usage error
 *   3  node unreachable, timed out, or a malformed reply
 *   4  not the leader, and the leader is unknown or not in --nodes
 *   5  unhealthy (health, status --cluster with an unhealthy node)
 */
#ifndef HASP_CONTROL_HASPCTL_CLI_H
#define HASP_CONTROL_HASPCTL_CLI_H

#include <stdio.h>

#define HASPCTL_EXIT_OK 0
#define HASPCTL_EXIT_FAILED 1
#define HASPCTL_EXIT_USAGE 2
#define HASPCTL_EXIT_UNREACHABLE 3
#define HASPCTL_EXIT_NOT_LEADER 4
#define HASPCTL_EXIT_UNHEALTHY 5
#define HASPCTL_EXIT_DEGRADED 6 /* healthy, but e.g. snapshots fail or a follower lags */

int haspctl_main(int argc, char **argv, FILE *out, FILE *err);

#endif
