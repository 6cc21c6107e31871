#!/usr/bin/python3
"""Pillow and numpy as the reference for pagoda's resize and per-family preprocessing
(tests/test_image_resize.cpp): `preprocess_reference.py DIR [PART...]` writes the manifests of
the PARTs named (resize, preprocess, smart_resize; all three by default) there.

  resize.txt       NAME SRC_W SRC_H DST_W DST_H FILTER: NAME.src holds the source's RGB bytes,
                   NAME.out Pillow's image.resize((DST_W, DST_H), resample=FILTER).
  preprocess.txt   NAME FAMILY SRC_W SRC_H IMAGE_SIZE PATCH MERGE TOKENS MIN_PX MAX_PX
                   MEAN0 MEAN1 MEAN2 STD0 STD1 STD2 OUT_W OUT_H ROWS COLS (floats in hex): NAME.src
                   the source, NAME.f32 the family's pipeline output, float32 channel planes.
  smart_resize.txt H W FACTOR MIN_PX MAX_PX RESULT: RESULT is "H_BAR W_BAR" or "error".

The pipelines, as the HF processors run them on a PIL image:
  llava   LLaVA 1.5's pad to a square of (122, 116, 104), the image at the top-left (llama.cpp's
          placement), CLIPImageProcessor's BICUBIC resize to IMAGE_SIZE², rescale, normalize;
  gemma3  Gemma3ImageProcessor: BILINEAR to IMAGE_SIZE², rescale, normalize (mean = std = 0.5);
  qwen    Qwen2VLImageProcessor: smart_resize (a port of transformers'), BICUBIC, rescale, normalize.
Rescale and normalize as transformers' image_transforms: v.astype(float64) * (1/255) cast to
float32, then (x - mean) / std in float32.
"""
import math
import os
import sys

import numpy as np
from PIL import Image

FILTERS = {"nearest": Image.Resampling.NEAREST, "bilinear": Image.Resampling.BILINEAR,
           "bicubic": Image.Resampling.BICUBIC, "lanczos": Image.Resampling.LANCZOS}
CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]


def source(width, height, seed):
    """Noise, smooth gradients or both, by seed: a resize's hardest and easiest inputs."""
    rng = np.random.RandomState(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    smooth = np.stack([127.5 + 127.5 * np.sin((x * (c + 1) + y * (3 - c)) / (7.0 + 5 * c)) for c in range(3)], -1)
    noise = rng.randint(0, 256, size=(height, width, 3)).astype(np.float64)
    kind = seed % 3
    pixels = noise if kind == 0 else smooth if kind == 1 else np.where(((x // 9 + y // 5) % 2)[..., None] == 0, noise,
                                                                        smooth)
    return Image.fromarray(np.clip(np.rint(pixels), 0, 255).astype(np.uint8), "RGB")


def smart_resize(height, width, factor, min_pixels, max_pixels):
    """transformers' Qwen2-VL smart_resize, as it stands (image_processing_qwen2_vl.py)."""
    if max(height, width) / min(height, width) > 200:
        raise ValueError("aspect ratio over 200")
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def rescale_normalize(image, mean, std):
    x = (np.asarray(image).astype(np.float64) * (1 / 255)).astype(np.float32)
    x = (x - np.array(mean, dtype=np.float32)) / np.array(std, dtype=np.float32)
    return np.ascontiguousarray(x.transpose(2, 0, 1)).astype(np.float32)


def hexf(v):
    return float(np.float32(v)).hex()


RESIZE_SOURCES = [  # (width, height), [targets]
    ((1, 1), [(1, 5), (7, 3), (336, 336)]),
    ((1, 37), [(1, 11), (5, 100), (1, 1)]),
    ((53, 1), [(17, 1), (200, 3), (1, 1)]),
    ((2, 2), [(3, 3), (1, 1), (13, 7)]),
    ((3, 3), [(2, 2), (10, 10)]),
    ((7, 5), [(3, 2), (22, 16), (7, 9)]),
    ((17, 1), [(5, 1), (40, 2)]),
    ((337, 211), [(224, 224), (112, 70), (500, 301), (337, 100), (100, 211)]),
    ((211, 337), [(28, 56), (336, 336), (211, 1000)]),
    ((1000, 3), [(333, 3), (28, 28), (1001, 7)]),
    ((3, 1000), [(3, 333), (28, 28), (9, 999)]),
    ((2000, 1500), [(336, 336), (896, 672), (700, 1499), (37, 29)]),
    ((640, 480), [(448, 336), (896, 896), (641, 479)]),
    ((128, 128), [(64, 64), (127, 129), (1, 1)]),
    ((999, 997), [(224, 224), (500, 498)]),
    ((31, 29), [(896, 896), (30, 31)]),
    ((4, 400), [(28, 2800), (1, 40)]),
    ((100, 100), [(33, 77), (300, 300)]),
    ((256, 255), [(255, 256), (85, 85)]),
    ((5, 3), [(1000, 600), (2, 1)]),
    ((61, 47), [(14, 14), (143, 101)]),
    ((1023, 767), [(384, 288), (1024, 768)]),
]


def write_resize(out):
    lines = []
    for i, ((w, h), targets) in enumerate(RESIZE_SOURCES):
        image = source(w, h, i)
        src = f"r{i}_{w}x{h}"
        with open(os.path.join(out, src + ".src"), "wb") as f:
            f.write(image.tobytes())
        for (tw, th) in targets:
            for name, flt in FILTERS.items():
                case = f"{src}_{tw}x{th}_{name}"
                with open(os.path.join(out, case + ".out"), "wb") as f:
                    f.write(image.resize((tw, th), resample=flt).tobytes())
                lines.append(f"{case} {src} {w} {h} {tw} {th} {name}")
    with open(os.path.join(out, "resize.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def llava(image, size, mean, std):
    side = max(image.size)
    square = Image.new("RGB", (side, side), (122, 116, 104))
    square.paste(image, (0, 0))
    return rescale_normalize(square.resize((size, size), resample=Image.Resampling.BICUBIC), mean, std)


def gemma3(image, size, mean, std):
    return rescale_normalize(image.resize((size, size), resample=Image.Resampling.BILINEAR), mean, std)


def qwen(image, factor, min_pixels, max_pixels, mean, std):
    h_bar, w_bar = smart_resize(image.height, image.width, factor, min_pixels, max_pixels)
    return rescale_normalize(image.resize((w_bar, h_bar), resample=Image.Resampling.BICUBIC), mean, std)


PREPROCESS_SOURCES = [(337, 211), (211, 337), (1, 1), (640, 480), (1000, 3), (3, 700), (2000, 1500), (336, 336),
                      (13, 17), (1200, 1199), (97, 1)]


def write_preprocess(out):
    lines = []
    for i, (w, h) in enumerate(PREPROCESS_SOURCES):
        image = source(w, h, 100 + i)
        src = f"p{i}_{w}x{h}"
        with open(os.path.join(out, src + ".src"), "wb") as f:
            f.write(image.tobytes())
        gemma_size = 896 if i in (0, 5) else 224  # Gemma 3's own size, and a smaller one to keep files small
        cases = [("llava", 336, 14, 1, 576, 0, 0, CLIP_MEAN, CLIP_STD, lambda: llava(image, 336, CLIP_MEAN, CLIP_STD)),
                 ("gemma3", gemma_size, 14, 1, 256, 0, 0, [0.5] * 3, [0.5] * 3,
                  lambda: gemma3(image, gemma_size, [0.5] * 3, [0.5] * 3))]
        # The published bounds (0: the config gives none) and tight ones that force both scalings.
        qwen_bounds = [(0, 0), (200 * 28 * 28, 256 * 28 * 28)]
        for lo, hi in qwen_bounds:
            if max(w, h) / min(w, h) > 200:
                continue
            lo_eff, hi_eff = lo or 56 * 56, hi or 28 * 28 * 1280
            cases.append(("qwen", 0, 14, 2, 0, lo, hi, CLIP_MEAN, CLIP_STD,
                          lambda lo_eff=lo_eff, hi_eff=hi_eff: qwen(image, 28, lo_eff, hi_eff, CLIP_MEAN, CLIP_STD)))
        for n, (family, size, patch, merge, tokens, lo, hi, mean, std, run) in enumerate(cases):
            planes = run()
            _, out_h, out_w = planes.shape
            if family == "qwen":
                rows, cols = out_h // 28, out_w // 28
            elif family == "llava":
                rows = cols = size // patch
            else:
                rows = cols = 16
            name = f"{src}_{family}{n}"
            planes.tofile(os.path.join(out, name + ".f32"))
            lines.append(" ".join(str(v) for v in [name, family, src, w, h, size, patch, merge, tokens, lo, hi] +
                                  [hexf(v) for v in mean + std] + [out_w, out_h, rows, cols]))
    with open(os.path.join(out, "preprocess.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def write_smart_resize(out):
    rng = np.random.RandomState(7)
    sizes = [(h, w) for h in list(range(1, 60)) + [84, 98, 126, 140, 182, 210] for w in (1, 13, 14, 42, 70, 200, 201)]
    sizes += [(1, 200), (1, 201), (10, 2000), (10, 2001), (2000, 10), (16384, 16384), (16384, 82), (16384, 81),
              (1080, 1920), (1920, 1080), (3024, 4032), (768, 1024), (224, 224), (1000, 1000)]
    sizes += [(int(rng.randint(1, 16385)), int(rng.randint(1, 16385))) for _ in range(1500)]
    sizes += [(int(rng.randint(1, 300)), int(rng.randint(1, 3000))) for _ in range(1500)]
    bounds = [(28, 56 * 56, 28 * 28 * 1280), (28, 4 * 28 * 28, 16384 * 28 * 28), (28, 256 * 28 * 28, 256 * 28 * 28),
              (32, 64 * 64, 32 * 32 * 1024), (14, 1, 14 * 14)]
    lines = []
    for h, w in sizes:
        for factor, lo, hi in bounds:
            try:
                result = "%d %d" % smart_resize(h, w, factor, lo, hi)
            except ValueError:
                result = "error"
            lines.append(f"{h} {w} {factor} {lo} {hi} {result}")
    with open(os.path.join(out, "smart_resize.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    parts = {"resize": write_resize, "preprocess": write_preprocess, "smart_resize": write_smart_resize}
    if len(sys.argv) < 2 or any(part not in parts for part in sys.argv[2:]):
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for part in sys.argv[2:] or parts:
        parts[part](out)


if __name__ == "__main__":
    main()
