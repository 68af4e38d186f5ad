/* A fixture for unit.rooms-calls, never linked: a file as if it sat in
 * collectives/comm/ that calls up into the engine, the way comm.c's "hooks"
 * once did. The prototype is spelled out here, so no include rule sees the
 * call; only the compiler's symbol table shows it, and the check must
 * refuse it. */
struct gx_comm;
void gx_coll_comm_destroy(struct gx_comm *c);

void planted_upward_call(struct gx_comm *c);
void planted_upward_call(struct gx_comm *c)
{
    gx_coll_comm_destroy(c);
}
