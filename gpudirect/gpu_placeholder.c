/* Replaced by the gpudirect module. */
typedef int gx_gpudirect_placeholder_t;
