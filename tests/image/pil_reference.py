#!/usr/bin/python3
"""Pillow as the reference for pagoda's image decoder (tests/test_image_decode.cpp).

  pil_reference.py suite DIR          writes test images in many formats, modes and sizes to DIR,
                                      each with Pillow's decode: NAME.rgb holds
                                      Image.open(NAME).convert("RGB").tobytes(); DIR/manifest.txt
                                      lists "NAME WIDTH HEIGHT" a line.
                                      DIR/animated.webp is a two-frame WebP, for refusal.
  pil_reference.py decode FILE...     writes FILE.rgb for each FILE, and prints "FILE WIDTH HEIGHT".

Pillow writes what it can; the PNG layouts it cannot write (16-bit colour, 2- and 4-bit gray,
short palettes, Adam7 interlacing, every filter type) are written by the small encoder below.
Run with Debian's /usr/bin/python3 (python3-pil, python3-numpy).
"""
import os
import struct
import sys
import zlib

import warnings

import numpy as np
from PIL import Image

warnings.filterwarnings("ignore")  # Pillow advises about palette transparency; the suite means it


def pil_decode(path):
    with Image.open(path) as im:
        rgb = im.convert("RGB")
        return rgb.width, rgb.height, rgb.tobytes()


# ---- test pictures: noise, gradients and flat areas, deterministic ----

def picture(width, height, seed, channels=3, maximum=255):
    rng = np.random.RandomState(seed)
    y, x = np.mgrid[0:height, 0:width]
    planes = []
    for c in range(channels):
        gradient = (x * (c + 1) * 7 + y * (3 - c % 3) * 5) % (maximum + 1)
        noise = rng.randint(0, maximum + 1, size=(height, width))
        planes.append(np.where((x // 4 + y // 3 + c) % 3 == 0, noise, gradient))
    return np.stack(planes, axis=-1).astype(np.int64)


# ---- a PNG encoder for the layouts Pillow does not write ----

ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def pack_row(samples, depth):
    """One scanline's samples (a flat list) packed at `depth` bits, big-endian, MSB first."""
    if depth == 16:
        return b"".join(struct.pack(">H", int(v)) for v in samples)
    if depth == 8:
        return bytes(int(v) for v in samples)
    out, acc, bits = bytearray(), 0, 0
    for v in samples:
        acc = (acc << depth) | int(v)
        bits += depth
        if bits == 8:
            out.append(acc)
            acc, bits = 0, 0
    if bits:
        out.append(acc << (8 - bits))
    return bytes(out)


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)


def filter_row(kind, row, previous, bpp):
    out = bytearray([kind])
    for i, v in enumerate(row):
        a = row[i - bpp] if i >= bpp else 0
        b = previous[i] if previous else 0
        c = previous[i - bpp] if previous and i >= bpp else 0
        predictor = [0, a, b, (a + b) // 2, paeth(a, b, c)][kind]
        out.append((v - predictor) & 0xFF)
    return bytes(out)


def write_png(path, samples, color_type, depth, palette=None, trns=None, interlace=False):
    """samples: (height, width, channels) integers already in the file's range."""
    height, width, channels = samples.shape
    bpp = max(1, channels * depth // 8)
    passes = ADAM7 if interlace else [(0, 0, 1, 1)]
    raw = bytearray()
    kind = 0
    for x0, y0, dx, dy in passes:
        previous = None
        for y in range(y0, height, dy):
            columns = range(x0, width, dx)
            if not columns:
                break
            row = pack_row([v for x in columns for v in samples[y, x]], depth)
            raw += filter_row(kind % 5, row, previous, bpp)
            kind += 1
            previous = row
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, depth, color_type, 0, 0,
                                                              1 if interlace else 0))
    if palette is not None:
        png += chunk(b"PLTE", bytes(palette))
    if trns is not None:
        png += chunk(b"tRNS", trns)
    data = zlib.compress(bytes(raw), 9)
    for i in range(0, len(data), 97):  # several IDAT chunks
        png += chunk(b"IDAT", data[i:i + 97])
    png += chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(png)


def crafted_pngs(out):
    """(name, writer) for the PNG layouts Pillow cannot write."""
    def pic(w, h, seed, channels, maximum):
        return picture(w, h, seed, channels, maximum)
    cases = []
    for interlace in (False, True):
        tag = "_adam7" if interlace else ""
        for (w, h) in ((13, 7), (1, 1), (3, 2), (31, 17)):
            size = f"_{w}x{h}{tag}"
            cases += [
                ("rgb16" + size, pic(w, h, 1, 3, 65535), 2, 16, {}),
                ("rgba16" + size, pic(w, h, 2, 4, 65535), 6, 16, {}),
                ("la16" + size, pic(w, h, 3, 2, 65535), 4, 16, {}),
                ("gray16" + size, pic(w, h, 4, 1, 65535), 0, 16, {}),  # gradients below 256, noise above
                ("gray1" + size, pic(w, h, 5, 1, 1), 0, 1, {}),
                ("gray2" + size, pic(w, h, 6, 1, 3), 0, 2, {}),
                ("gray4" + size, pic(w, h, 7, 1, 15), 0, 4, {}),
                ("gray8_trns" + size, pic(w, h, 8, 1, 255), 0, 8, {"trns": struct.pack(">H", 17)}),
                ("rgb8" + size, pic(w, h, 9, 3, 255), 2, 8, {}),
                ("rgba8" + size, pic(w, h, 10, 4, 255), 6, 8, {}),
                ("la8" + size, pic(w, h, 11, 2, 255), 4, 8, {}),
                ("rgb16_trns" + size, pic(w, h, 12, 3, 65535), 2, 16, {"trns": struct.pack(">HHH", 1, 2, 3)}),
            ]
            for depth in (1, 2, 4, 8):
                colors = 1 << depth
                rng = np.random.RandomState(depth)
                # A palette shorter than the indices reach: the rest read Pillow's gray ramp.
                entries = max(1, colors - 3) if depth > 1 else 1
                palette = rng.randint(0, 256, size=3 * entries).tolist()
                cases.append((f"palette{depth}_short" + size, pic(w, h, 20 + depth, 1, colors - 1), 3, depth,
                              {"palette": palette, "trns": bytes([0, 128])}))
    written = []
    for name, samples, color_type, depth, extra in cases:
        path = os.path.join(out, name + ".png")
        write_png(path, samples, color_type, depth, interlace="adam7" in name, **extra)
        written.append(path)
    return written


def pillow_files(out):
    """Images Pillow writes itself: PNG modes, JPEG variants, WebP variants."""
    written = []

    def save(image, name, **options):
        path = os.path.join(out, name)
        image.save(path, **options)
        written.append(path)

    def rgb(w, h, seed):
        return Image.fromarray(picture(w, h, seed).astype(np.uint8), "RGB")

    def rgba(w, h, seed):
        return Image.fromarray(picture(w, h, seed, 4).astype(np.uint8), "RGBA")

    # PNG through Pillow's own encoder.
    for (w, h) in ((1, 1), (37, 23), (64, 1), (1, 50)):
        base = rgb(w, h, w + h)
        save(base, f"pil_rgb_{w}x{h}.png")
        save(rgba(w, h, 3), f"pil_rgba_{w}x{h}.png")
        save(base.convert("L"), f"pil_l_{w}x{h}.png")
        save(rgba(w, h, 4).convert("LA"), f"pil_la_{w}x{h}.png")
        save(base.convert("1"), f"pil_1bit_{w}x{h}.png")
        save(base.convert("P", palette=Image.Palette.ADAPTIVE, colors=256), f"pil_p256_{w}x{h}.png")
        save(base.convert("P", palette=Image.Palette.ADAPTIVE, colors=16), f"pil_p16_{w}x{h}.png", bits=4)
        save(base.convert("P", palette=Image.Palette.ADAPTIVE, colors=4), f"pil_p4_{w}x{h}.png", bits=2)
        save(base.convert("P", palette=Image.Palette.ADAPTIVE, colors=200), f"pil_p_trns_{w}x{h}.png", transparency=5)
        save(base, f"pil_rgb_trns_{w}x{h}.png", transparency=(1, 2, 3))
        save(base.convert("L"), f"pil_l_trns_{w}x{h}.png", transparency=9)
        save(base, f"pil_rgb_optimized_{w}x{h}.png", optimize=True)
    save(Image.fromarray(picture(29, 11, 5, 1, 65535)[:, :, 0].astype(np.uint16), "I;16"), "pil_gray16_29x11.png")

    # JPEG: subsamplings, qualities, progressive, optimized Huffman tables, gray, CMYK, odd sizes.
    for (w, h) in ((1, 1), (17, 9), (33, 65), (640, 480), (1000, 3)):
        base = rgb(w, h, 7 * w + h)
        save(base, f"jpeg_420_{w}x{h}.jpg", quality=90)
        save(base, f"jpeg_444_{w}x{h}.jpg", quality=95, subsampling=0)
        save(base, f"jpeg_422_{w}x{h}.jpg", quality=75, subsampling=1)
        save(base, f"jpeg_progressive_{w}x{h}.jpg", quality=85, progressive=True)
        save(base, f"jpeg_optimized_{w}x{h}.jpg", quality=50, optimize=True)
        save(base.convert("L"), f"jpeg_gray_{w}x{h}.jpg", quality=90)
        save(base.convert("CMYK"), f"jpeg_cmyk_{w}x{h}.jpg", quality=90)
        save(base.convert("L"), f"jpeg_gray_progressive_{w}x{h}.jpg", progressive=True)
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: rotate 90° — not applied, by Pillow's open or by pagoda
    save(rgb(40, 24, 1), "jpeg_exif_rotated_40x24.jpg", exif=exif.tobytes())
    save(rgb(40, 24, 2), "jpeg_icc_40x24.jpg", icc_profile=bytes(range(256)) * 3)
    save(rgb(40, 24, 3), "jpeg_web_high_40x24.jpg", quality=100, subsampling=2, qtables="web_high")

    # WebP: lossy and lossless, with and without alpha.
    for (w, h) in ((1, 1), (33, 17), (300, 200)):
        save(rgb(w, h, w), f"webp_lossy_{w}x{h}.webp", quality=80)
        save(rgba(w, h, h), f"webp_lossy_alpha_{w}x{h}.webp", quality=60)
        save(rgb(w, h, w + 1), f"webp_lossless_{w}x{h}.webp", lossless=True)
        save(rgba(w, h, h + 1), f"webp_lossless_alpha_{w}x{h}.webp", lossless=True, exact=True)
    return written


def write_animated_webp(out):
    """Two frames: pagoda refuses animated WebP, so this one is not in the manifest."""
    frames = [Image.new("RGB", (8, 8), color) for color in ((255, 0, 0), (0, 0, 255))]
    frames[0].save(os.path.join(out, "animated.webp"), save_all=True, append_images=frames[1:], duration=100)


def dump(path):
    width, height, data = pil_decode(path)
    with open(path + ".rgb", "wb") as f:
        f.write(data)
    return f"{os.path.basename(path)} {width} {height}"


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "suite":
        out = sys.argv[2]
        os.makedirs(out, exist_ok=True)
        lines = [dump(p) for p in pillow_files(out) + crafted_pngs(out)]
        write_animated_webp(out)
        with open(os.path.join(out, "manifest.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
    elif len(sys.argv) >= 3 and sys.argv[1] == "decode":
        for path in sys.argv[2:]:
            print(dump(path))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
