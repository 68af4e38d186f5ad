/*
 * coll_dbtree.h - the two complementary binary trees of the double binary
 * tree all-reduce (coll_dbtree.c), exposed for the unit test
 * (tests/unit/test_dbtree.c).
 */
#ifndef GX_COLL_DBTREE_H
#define GX_COLL_DBTREE_H

/* One rank's place in one of the two trees over n ranks: its parent (-1 at
 * the root) and up to two children (-1 where absent; child[0] is the left
 * one, the subtree of lower positions). */
struct dbtree_links {
    int parent;
    int child[2];
};

/* The links of `rank` in tree `tree` (0 or 1) over `n` >= 1 ranks. For
 * n >= 2 every rank has children in at most one of the two trees. */
void dbtree_links(int n, int rank, int tree, struct dbtree_links *out);

/* Edges from the root to the deepest leaf of either tree: floor(log2 n). */
int dbtree_depth(int n);

#endif
