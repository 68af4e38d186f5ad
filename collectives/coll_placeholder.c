typedef int gx_coll_placeholder_t;
