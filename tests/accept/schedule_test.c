/* schedule_test.c - gx-accept's pairwise schedule: for 1..64 nodes, every
 * round is a matching (partners are mutual, nobody meets itself), every pair
 * meets exactly once, in n-1 rounds (n when n is odd, one node sitting out
 * per round and each node sitting out once). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accept_schedule.h"

int main(void)
{
    int failures = 0;
    for (int n = 1; n <= 64; n++) {
        int rounds = accept_round_count(n);
        int want = n < 2 ? 0 : n % 2 ? n : n - 1;
        unsigned char *met = calloc((size_t)n * (size_t)n, 1);
        int *byes = calloc((size_t)n, sizeof(int));
        if (!met || !byes)
            return 1;
        if (rounds != want) {
            printf("FAIL n=%d: %d rounds, want %d\n", n, rounds, want);
            failures++;
        }
        for (int r = 0; r < rounds; r++)
            for (int a = 0; a < n; a++) {
                int b = accept_round_partner(r, a, n);
                if (b < 0) {
                    byes[a]++;
                    continue;
                }
                if (b == a || b >= n || accept_round_partner(r, b, n) != a) {
                    printf("FAIL n=%d round %d: %d -> %d is not a mutual pair\n", n, r, a, b);
                    failures++;
                    continue;
                }
                met[a * n + b]++;
            }
        for (int a = 0; a < n; a++) {
            for (int b = 0; b < n; b++)
                if (a != b && met[a * n + b] != 1) {
                    printf("FAIL n=%d: %d met %d %d times\n", n, a, b, met[a * n + b]);
                    failures++;
                }
            if (byes[a] != (n % 2 && n > 1 ? 1 : 0)) {
                printf("FAIL n=%d: node %d sat out %d rounds\n", n, a, byes[a]);
                failures++;
            }
        }
        if (accept_round_partner(0, n, n) != -1 || accept_round_partner(rounds, 0, n) != -1) {
            printf("FAIL n=%d: out-of-range node or round has a partner\n", n);
            failures++;
        }
        free(met);
        free(byes);
    }
    if (failures)
        return 1;
    printf("PASS: 1..64 nodes, every pair once, rounds are matchings\n");
    return 0;
}
