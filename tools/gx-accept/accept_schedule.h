/*
 * accept_schedule.h - the round-robin schedule of gx-accept's pairwise test:
 * n nodes meet every other node once in n-1 rounds of a perfect matching
 * (n rounds with one node sitting out each when n is odd), by the circle
 * method: node 0 stays in place, the others rotate one seat per round.
 *
 * Pure arithmetic: no communicator, no I/O (tests/accept/schedule_test.c).
 */
#ifndef GX_ACCEPT_SCHEDULE_H
#define GX_ACCEPT_SCHEDULE_H

/** Rounds needed for n nodes: n-1, or n when n is odd. */
int accept_round_count(int n);

/** Partner of `node` in `round` (0-based), or -1 when it sits out. */
int accept_round_partner(int round, int node, int n);

#endif
