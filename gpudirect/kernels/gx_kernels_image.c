/*
 * gx_kernels_image.c - the CUDA reduction kernels' image, embedded: the
 * fatbin nvcc built from gx_reduce.cu, or, in a build without nvcc, the test
 * placeholder (GxCudaKernels.cmake). Two hidden symbols bound it.
 */
#include "gx_kernels_config.h"

__asm__(".section .rodata\n"
        ".balign 64\n"
        ".globl gx_kernels_image_start\n"
        ".hidden gx_kernels_image_start\n"
        "gx_kernels_image_start:\n"
        ".incbin \"" GX_KERNELS_IMAGE_PATH "\"\n"
        ".globl gx_kernels_image_end\n"
        ".hidden gx_kernels_image_end\n"
        "gx_kernels_image_end:\n"
        ".byte 0\n"
        ".previous\n");
