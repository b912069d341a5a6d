/* crop_tool.c — zp-crop-tool: the crop at assembly's two parts on their own,
 * for tests/integration/test_images_crop.py to hold against torchvision and
 * Pillow.
 *
 *   zp-crop-tool draws H W SEED EPOCH N SCALE_LO SCALE_HI RATIO_LO RATIO_HI
 *       prints "index y x h w flip" for samples 0..N-1 (zp_augment_rrc_draw, hflip on)
 *   zp-crop-tool pdraws H W SEED EPOCH N PADDING
 *       prints "index dy dx flip" for samples 0..N-1: a padded crop and a flip
 *       (zp_augment_draw, hflip on, no resized crop)
 *   zp-crop-tool resample IN SW SH X Y W H OW OH FLIP OUT
 *       IN: SW x SH RGB bytes; OUT: OW x OH RGB bytes, the box resized
 *       (zp_resample) and flipped when FLIP is 1
 * Exit 0, or 2 with a usage line. */
#include "pipeline/image/augment.h"
#include "pipeline/image/resample.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int draws(char **a)
{
    zp_rrc_t r = {.seed = strtoull(a[2], NULL, 10), .hflip = 1};
    int h = atoi(a[0]), w = atoi(a[1]);
    uint64_t epoch = strtoull(a[3], NULL, 10);
    long n = atol(a[4]);
    r.scale[0] = atof(a[5]), r.scale[1] = atof(a[6]);
    r.log_ratio[0] = log(atof(a[7])), r.log_ratio[1] = log(atof(a[8]));
    for (long i = 0; i < n; i++) {
        zp_aug_draw_t d;
        zp_augment_rrc_draw(&r, epoch, (uint32_t)i, h, w, &d);
        printf("%ld %d %d %d %d %d\n", i, (int)d.box_y, (int)d.box_x, (int)d.box_h, (int)d.box_w,
               d.flip);
    }
    return 0;
}

static int pdraws(char **a)
{
    zp_augment_t g = {.h = atoi(a[0]), .w = atoi(a[1]), .seed = strtoull(a[2], NULL, 10),
                      .padding = atoi(a[5]), .hflip = 1};
    uint64_t epoch = strtoull(a[3], NULL, 10);
    for (long i = 0, n = atol(a[4]); i < n; i++) {
        zp_aug_draw_t d;
        zp_augment_draw(&g, epoch, (uint32_t)i, &d);
        printf("%ld %d %d %d\n", i, d.dy, d.dx, d.flip);
    }
    return 0;
}

static int resample(char **a)
{
    int sw = atoi(a[1]), sh = atoi(a[2]), ow = atoi(a[7]), oh = atoi(a[8]), rc = 1;
    double box[4] = {atof(a[3]), atof(a[4]), atof(a[5]), atof(a[6])};
    size_t in_bytes = (size_t)sw * sh * 3, out_bytes = (size_t)ow * oh * 3;
    uint8_t *in = malloc(in_bytes), *out = malloc(out_bytes);
    zp_resample_t rs = {0};
    FILE *f = fopen(a[0], "rb");
    if (in && out && f && fread(in, 1, in_bytes, f) == in_bytes &&
        zp_resample(&rs, in, sw, sh, box, ow, oh, atoi(a[9]), ZP_RS_HWC_U8, NULL, out) == 0) {
        FILE *o = fopen(a[10], "wb");
        rc = !o || fwrite(out, 1, out_bytes, o) != out_bytes;
        if (o)
            fclose(o);
    }
    if (f)
        fclose(f);
    zp_resample_free(&rs);
    free(in), free(out);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 11 && !strcmp(argv[1], "draws"))
        return draws(argv + 2);
    if (argc == 8 && !strcmp(argv[1], "pdraws"))
        return pdraws(argv + 2);
    if (argc == 13 && !strcmp(argv[1], "resample"))
        return resample(argv + 2);
    fprintf(stderr, "usage: zp-crop-tool draws H W SEED EPOCH N SCALE_LO SCALE_HI RATIO_LO RATIO_HI\n"
                    "       zp-crop-tool pdraws H W SEED EPOCH N PADDING\n"
                    "       zp-crop-tool resample IN SW SH X Y W H OW OH FLIP OUT\n");
    return 2;
}
