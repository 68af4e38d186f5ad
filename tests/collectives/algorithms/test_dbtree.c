/* Unit test of the double binary tree construction (coll_dbtree.h) for
 * 1..64 ranks: in each tree every rank has at most two children, parent and
 * child links agree, one root reaches every rank without cycles, the depth
 * is floor(log2 n); and no rank has children in both trees (for even n
 * every rank has children in exactly one). The checker is also run on a
 * wrong pair of trees (tree 0 twice), which it must reject. */
#include <stdbool.h>
#include <string.h>

#include "tests/unit/check.h"
#include "collectives/algorithms/coll_dbtree.h"

#define MAX_N 64

typedef void (*links_fn)(int n, int rank, int tree, struct dbtree_links *out);

/* Tree 0 for both trees: every interior rank is interior twice. */
static void same_tree_twice(int n, int rank, int tree, struct dbtree_links *out)
{
    (void)tree;
    dbtree_links(n, rank, 0, out);
}

/* Problems found in the trees `fn` builds over n ranks; `say` prints them. */
static int tree_problems(int n, links_fn fn, bool say)
{
    static struct dbtree_links l[2][MAX_N];
    int problems = 0;
#define PROBLEM(...)                                                           \
    do {                                                                       \
        problems++;                                                            \
        if (say) {                                                             \
            fprintf(stderr, "n=%d: ", n);                                      \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
        }                                                                      \
    } while (0)
    for (int t = 0; t < 2; t++)
        for (int r = 0; r < n; r++)
            fn(n, r, t, &l[t][r]);
    for (int t = 0; t < 2; t++) {
        int root = -1, roots = 0;
        for (int r = 0; r < n; r++) {
            const struct dbtree_links *x = &l[t][r];
            if (x->parent < -1 || x->parent >= n || x->parent == r)
                PROBLEM("tree %d: rank %d has parent %d", t, r, x->parent);
            if (x->parent < 0) {
                root = r;
                roots++;
            } else if (x->parent < n && x->parent >= 0) {
                const struct dbtree_links *p = &l[t][x->parent];
                if (p->child[0] != r && p->child[1] != r)
                    PROBLEM("tree %d: rank %d's parent %d does not list it as a child", t, r,
                            x->parent);
            }
            for (int k = 0; k < 2; k++) {
                int c = x->child[k];
                if (c < -1 || c >= n || c == r) {
                    PROBLEM("tree %d: rank %d has child %d", t, r, c);
                    continue;
                }
                if (c >= 0 && l[t][c].parent != r)
                    PROBLEM("tree %d: rank %d's child %d has parent %d", t, r, c,
                            l[t][c].parent);
            }
            if (x->child[0] >= 0 && x->child[0] == x->child[1])
                PROBLEM("tree %d: rank %d lists child %d twice", t, r, x->child[0]);
            if (x->child[0] < 0 && x->child[1] >= 0)
                PROBLEM("tree %d: rank %d has a right child but no left one", t, r);
        }
        if (roots != 1) {
            PROBLEM("tree %d: %d roots", t, roots);
            continue;
        }
        /* Walk down from the root: every rank once, depth floor(log2 n). */
        int stack[MAX_N], depth[MAX_N], seen = 0, deepest = 0, top = 0;
        bool visited[MAX_N];
        memset(visited, 0, sizeof(visited));
        stack[top++] = root;
        depth[root] = 0;
        while (top > 0 && seen <= n) {
            int r = stack[--top];
            if (visited[r]) {
                PROBLEM("tree %d: rank %d reached twice", t, r);
                continue;
            }
            visited[r] = true;
            seen++;
            if (depth[r] > deepest)
                deepest = depth[r];
            for (int k = 0; k < 2; k++) {
                int c = l[t][r].child[k];
                if (c >= 0 && c < n && top < MAX_N) {
                    depth[c] = depth[r] + 1;
                    stack[top++] = c;
                }
            }
        }
        if (seen != n)
            PROBLEM("tree %d: %d of %d ranks reachable from root %d", t, seen, n, root);
        if (deepest != dbtree_depth(n))
            PROBLEM("tree %d: depth %d, expected %d", t, deepest, dbtree_depth(n));
    }
    for (int r = 0; r < n; r++) {
        bool inner0 = l[0][r].child[0] >= 0, inner1 = l[1][r].child[0] >= 0;
        if (inner0 && inner1)
            PROBLEM("rank %d has children in both trees", r);
        if (n % 2 == 0 && !inner0 && !inner1)
            PROBLEM("rank %d is a leaf in both trees (n even)", r);
    }
    return problems;
#undef PROBLEM
}

int main(void)
{
    for (int n = 1; n <= MAX_N; n++)
        CHECK(tree_problems(n, dbtree_links, true) == 0, "n=%d: the trees are wrong", n);
    /* The checker itself: it must reject a wrong construction. */
    for (int n = 3; n <= MAX_N; n++)
        CHECK(tree_problems(n, same_tree_twice, false) > 0,
              "n=%d: tree 0 used twice was not rejected", n);
    /* A few known shapes: 8 ranks (positions 1..8, root 8 -> rank 7 in tree 0). */
    struct dbtree_links x;
    dbtree_links(8, 7, 0, &x);
    CHECK(x.parent == -1 && x.child[0] == 3 && x.child[1] == -1, "8 ranks, tree 0 root: %d %d %d",
          x.parent, x.child[0], x.child[1]);
    dbtree_links(8, 0, 1, &x); /* mirrored: rank 0 at position 8, the root */
    CHECK(x.parent == -1 && x.child[0] == 4, "8 ranks, tree 1 root: %d %d %d", x.parent,
          x.child[0], x.child[1]);
    dbtree_links(2, 0, 0, &x);
    CHECK(x.parent == 1 && x.child[0] == -1 && x.child[1] == -1, "2 ranks, tree 0, rank 0");
    dbtree_links(1, 0, 1, &x);
    CHECK(x.parent == -1 && x.child[0] == -1 && x.child[1] == -1, "1 rank, tree 1");
    CHECK_DONE("test_dbtree");
}
