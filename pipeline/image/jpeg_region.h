/* jpeg_region.h — a box of a JPEG decoded alone: libjpeg-turbo decodes only
 * the iMCU columns that hold it (jpeg_crop_scanline), skips the rows above it
 * without their inverse DCT (jpeg_skip_scanlines) and stops after its last
 * row. On the 2-core development VM a box of a quarter of a 461 x 359 JPEG
 * decoded in 0.39 ms against 0.68 ms for the whole file; one of 9/16 of
 * the image, in 10-25% less time than the whole.
 *
 * The pixels of the box are those a whole decode gives (the same DCT, the
 * same upsampling): the region is decoded with 2 more pixels on every side,
 * where libjpeg's upsampling of a region's outermost pixels differs. Where
 * that cannot be promised it does not try: a progressive JPEG (its scans may
 * stop early), one under 64 pixels a side, one without Huffman tables of its own (MJPEG-style: a reused
 * decoder would hold another file's), and any warning or error, a premature
 * end of the data included, are ZP_EDATA with no reason: the caller decodes
 * the whole file, which names the fault. */
#ifndef ZP_JPEG_REGION_H
#define ZP_JPEG_REGION_H

#include <stddef.h>
#include <stdint.h>

/* The memory libjpeg may take for one file's large arrays (a progressive
 * JPEG's coefficients): past it a decode is an error, whatever the header
 * claims. The loaders give TurboJPEG the same bound (JPEGMEM). */
#define ZP_JPEG_MAX_MEMORY (1024l << 20)

typedef struct zp_jpeg_region zp_jpeg_region_t;

/* A decoder, reused from one file to the next; NULL when out of memory. */
zp_jpeg_region_t *zp_jpeg_region_open(void);
void zp_jpeg_region_close(zp_jpeg_region_t *j);

/* Columns [x0, x1) and rows [y0, y1) of the JPEG `file` (size bytes) at DCT
 * scale num/denom, as RGB (grayscale too; not CMYK), into *buf (grown with
 * realloc as needed, *cap its size): rows of *rw x 3 bytes, *rh of them, the
 * first pixel being (*rx, *ry) of the scaled image, the box inside. 0,
 * ZP_ENOMEM, or ZP_EDATA (see above). */
int zp_jpeg_region(zp_jpeg_region_t *j, const uint8_t *file, size_t size, int num, int denom, int x0,
                   int y0, int x1, int y1, uint8_t **buf, size_t *cap, int *rx, int *ry, int *rw,
                   int *rh);

/* 1 when the JPEG defines a Huffman table (a DHT marker) before its first
 * scan, or is not a JPEG this can read (the decoder judges it); 0 for an
 * abbreviated one that leaves the tables to the decoder (libjpeg's standard
 * ones, on a decoder of its own: one reused from another file would decode
 * it with that file's). */
int zp_jpeg_region_has_tables(const uint8_t *file, size_t size);

#endif
