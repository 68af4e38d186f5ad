/* accept_schedule.c - the circle method (see accept_schedule.h). */
#include "accept_schedule.h"

int accept_round_count(int n)
{
    return n < 2 ? 0 : n - 1 + (n & 1);
}

/* Node sitting at seat i of round `round`, over m (even) seats; seat 0 never
 * moves. With n odd, the node numbered n is the empty seat. */
static int seat(int round, int i, int m)
{
    return i == 0 ? 0 : 1 + (i - 1 + round) % (m - 1);
}

int accept_round_partner(int round, int node, int n)
{
    int m = n + (n & 1);
    if (node < 0 || node >= n || round < 0 || round >= accept_round_count(n))
        return -1;
    for (int i = 0; i < m; i++) {
        if (seat(round, i, m) != node)
            continue;
        int other = seat(round, m - 1 - i, m);
        return other < n ? other : -1;
    }
    return -1;
}
