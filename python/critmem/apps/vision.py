"""Image processing as a soft real-time task (the SARA paper's OpenCV workload): every period
one camera frame goes through an OpenCV pipeline that finds and classifies the objects in it.

The frames are made at start-up from `--seed`: a lit, tinted background with sensor noise,
objects (triangles, squares, pentagons, discs; dark or bright, rotated) in a grid of cells,
and one textured marker. They are held in memory (`--frames` of `--size`, 3 bytes a pixel)
and processed in turn, so the resident memory is the frames plus about 125 MiB (interpreter,
OpenCV and the pipeline's buffers). Each job: edge-preserving denoising (bilateral filter), segmentation
(thresholds, morphological opening), contours and their classification by how much of the
enclosing circle they fill, then template matching for the marker.

Self-check: the generator knows every frame's objects; a job must find each one with its
class and its centre within 3 pixels, nothing else, and the marker exactly where it is.

Run it under critmem (examples/linux-vision.toml) or alone:

    python -m critmem.apps.vision --jobs 20
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from critmem.apps import _periodic
from critmem.apps._support import REPORTED_FAILURES, StopFlag, require, usage_error

APP = "vision"
DEFAULT_PERIOD_MS = 180.0
KINDS = ("triangle", "square", "pentagon", "disc")
# How much of its enclosing circle each kind fills: 0.41, 0.64, 0.76, 1. The classifier's
# boundaries lie between them.
FILL_BOUNDS = (0.52, 0.70, 0.88)
MARKER_PX = 48
# Background brightness range and the object colours' ranges on either side of it, with a gap
# the segmentation thresholds sit in.
DARK_MAX, DARK_THRESHOLD, BRIGHT_THRESHOLD, BRIGHT_MIN = 45, 65, 185, 210
CENTRE_TOLERANCE_PX = 3.0
MIN_SIZE = (640, 480)
MAX_SIZE = (7680, 4320)


@dataclass(frozen=True)
class Detection:
    kind: str
    x: float
    y: float


@dataclass(frozen=True)
class Frame:
    pixels: Any  # H x W x 3 uint8 (BGR)
    objects: tuple[Detection, ...]
    marker_xy: tuple[int, int]


def parse_size(text: str) -> tuple[int, int]:
    width, sep, height = text.lower().partition("x")
    if not sep or not width.isdigit() or not height.isdigit():
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT such as 1920x1080, got {text!r}")
    w, h = int(width), int(height)
    if not (MIN_SIZE[0] <= w <= MAX_SIZE[0] and MIN_SIZE[1] <= h <= MAX_SIZE[1]):
        raise argparse.ArgumentTypeError(f"{text}: from {MIN_SIZE[0]}x{MIN_SIZE[1]} to {MAX_SIZE[0]}x{MAX_SIZE[1]}")
    return w, h


def make_marker() -> Any:
    """A 48 x 48 pattern of 6 x 6 random grey blocks: found by template matching, like nothing else."""
    blocks = np.random.default_rng(7).integers(0, 256, (MARKER_PX // 8, MARKER_PX // 8), dtype=np.uint8)
    return np.kron(blocks, np.ones((8, 8), dtype=np.uint8))


def cell_px(width: int, height: int) -> int:
    return min(width, height) // 5


def make_frame(cv2: Any, seed: int, index: int, width: int, height: int, noise: float, marker: Any) -> Frame:
    """Frame `index` of the sequence `seed`, with its objects' true classes and centres."""
    rng = np.random.default_rng([seed, index])
    # Lighting: a linear gradient (within 125 +- 30) and a colour tint (+- 10) per channel.
    slope_x, slope_y = rng.uniform(-30.0, 30.0, 2)
    xs = (np.arange(width, dtype=np.float32) / width - 0.5) * slope_x
    ys = (np.arange(height, dtype=np.float32) / height - 0.5) * slope_y
    light = 125.0 + ys[:, None] + xs[None, :]
    image = np.empty((height, width, 3), dtype=np.float32)
    for channel, tint in enumerate(rng.uniform(-10.0, 10.0, 3)):
        image[..., channel] = light + tint
    cell = cell_px(width, height)
    columns, rows = width // cell, height // cell
    cells = rng.permutation(columns * rows)
    count = min(len(cells) - 1, int(rng.integers(4, 12)))
    objects = []
    for c in cells[:count]:
        # Within its cell whatever the jitter and size: objects never touch.
        cx = int(c % columns) * cell + cell // 2 + int(rng.integers(-cell // 10, cell // 10 + 1))
        cy = int(c // columns) * cell + cell // 2 + int(rng.integers(-cell // 10, cell // 10 + 1))
        radius = int(rng.uniform(0.22, 0.3) * cell)
        kind = KINDS[int(rng.integers(len(KINDS)))]
        low, high = (0.0, DARK_MAX) if rng.integers(2) else (BRIGHT_MIN, 255.0)
        colour = tuple(float(v) for v in rng.uniform(low, high, 3))
        if kind == "disc":
            cv2.circle(image, (cx, cy), radius, colour, -1, cv2.LINE_AA)
        else:
            corners = KINDS.index(kind) + 3
            turn = rng.uniform(0.0, 2 * math.pi)
            angles = turn + 2 * math.pi * np.arange(corners) / corners
            polygon = np.stack([cx + radius * np.cos(angles), cy + radius * np.sin(angles)], axis=1).round().astype(np.int32)
            cv2.fillPoly(image, [polygon], colour, cv2.LINE_AA)
        objects.append(Detection(kind, float(cx), float(cy)))
    c = cells[count]
    mx = int(c % columns) * cell + (cell - MARKER_PX) // 2
    my = int(c // columns) * cell + (cell - MARKER_PX) // 2
    image[my : my + MARKER_PX, mx : mx + MARKER_PX, :] = marker[..., None]
    image += rng.standard_normal(image.shape, dtype=np.float32) * np.float32(noise)
    pixels = np.clip(image, 0, 255).astype(np.uint8)
    return Frame(pixels, tuple(objects), (mx, my))


def classify(fill: float) -> str:
    for kind, bound in zip(KINDS, FILL_BOUNDS, strict=False):
        if fill < bound:
            return kind
    return KINDS[-1]


class Pipeline:
    """The per-frame work, stage by stage."""

    def __init__(self, cv2: Any, width: int, height: int, marker: Any) -> None:
        self.cv2 = cv2
        self.marker = marker
        cell = cell_px(width, height)
        # Anything smaller than a twentieth of a cell's area is noise (the smallest object,
        # a triangle, covers about a sixteenth).
        self.min_area_px = 0.02 * cell * cell
        self.kernel = np.ones((3, 3), dtype=np.uint8)

    def denoise(self, pixels: Any) -> Any:
        grey = self.cv2.cvtColor(pixels, self.cv2.COLOR_BGR2GRAY)
        return self.cv2.bilateralFilter(grey, 9, 50, 50)

    def segment(self, grey: Any) -> Any:
        cv2 = self.cv2
        dark = cv2.threshold(grey, DARK_THRESHOLD, 255, cv2.THRESH_BINARY_INV)[1]
        bright = cv2.threshold(grey, BRIGHT_THRESHOLD, 255, cv2.THRESH_BINARY)[1]
        return cv2.morphologyEx(cv2.bitwise_or(dark, bright), cv2.MORPH_OPEN, self.kernel)

    def find_marker(self, grey: Any) -> tuple[int, int]:
        scores = self.cv2.matchTemplate(grey, self.marker, self.cv2.TM_CCOEFF_NORMED)
        _, _, _, best = self.cv2.minMaxLoc(scores)
        return int(best[0]), int(best[1])

    def objects(self, mask: Any, marker_xy: tuple[int, int]) -> list[Detection]:
        cv2 = self.cv2
        contours, _ = cv2.findContours(mask, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
        mx, my = marker_xy
        found = []
        for contour in contours:
            area = cv2.contourArea(contour)
            if area < self.min_area_px:
                continue
            x, y, w, h = cv2.boundingRect(contour)
            # The marker's own dark and bright blocks.
            if mx - 4 <= x and x + w <= mx + MARKER_PX + 4 and my - 4 <= y and y + h <= my + MARKER_PX + 4:
                continue
            _, enclosing_radius = cv2.minEnclosingCircle(contour)
            moments = cv2.moments(contour)
            found.append(
                Detection(
                    classify(area / (math.pi * enclosing_radius**2)),
                    moments["m10"] / moments["m00"],
                    moments["m01"] / moments["m00"],
                )
            )
        return found


def mismatch(frame: Frame, found: list[Detection], marker_xy: tuple[int, int]) -> str | None:
    """What the detections get wrong against the frame's truth, or None."""
    if marker_xy != frame.marker_xy:
        return f"marker found at {marker_xy}, it is at {frame.marker_xy}"
    unmatched = list(found)
    for truth in frame.objects:
        match = next(
            (
                d
                for d in unmatched
                if d.kind == truth.kind and abs(d.x - truth.x) <= CENTRE_TOLERANCE_PX and abs(d.y - truth.y) <= CENTRE_TOLERANCE_PX
            ),
            None,
        )
        if match is None:
            return f"missed the {truth.kind} at ({truth.x:.0f}, {truth.y:.0f})"
        unmatched.remove(match)
    if unmatched:
        d = unmatched[0]
        return f"found {len(unmatched)} object(s) that are not there, such as a {d.kind} at ({d.x:.0f}, {d.y:.0f})"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m critmem.apps.vision",
        description="Image processing (OpenCV) as a soft real-time task: one frame per period through denoising, segmentation, "
        "contour classification and template matching, checked against the frame's known objects; reports its jobs to critmem. "
        "On SIGTERM/SIGINT: one JSON line of counts on stderr, exit 0 (1 if a self-check failed).",
        epilog="examples:\n  python -m critmem.apps.vision --jobs 20\n  python -m critmem.apps.vision --frames 8 --size 1280x720",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--frames", type=int, default=10, help="frames held in memory and processed in turn (default: %(default)s)")
    parser.add_argument("--size", type=parse_size, default=(1920, 1080), metavar="WxH", help="frame size in pixels (default: 1920x1080)")
    parser.add_argument("--seed", type=int, default=1, help="the frame sequence (default: %(default)s)")
    parser.add_argument(
        "--noise",
        type=float,
        default=6.0,
        help="sensor noise, standard deviation in grey levels (default: %(default)g; from about 80 "
        "the pipeline misses objects and the self-check fails)",
    )
    parser.add_argument("--threads", type=int, default=1, help="OpenCV's worker threads (default: %(default)s)")
    _periodic.add_arguments(parser, default_period_ms=DEFAULT_PERIOD_MS)
    args = parser.parse_args(argv)
    timing = _periodic.timing(args, APP, default_period_ms=DEFAULT_PERIOD_MS)
    if args.frames < 1:
        raise usage_error(APP, f"--frames must be at least 1 (got {args.frames})")
    if not 0 <= args.noise <= 100:
        raise usage_error(APP, f"--noise must be from 0 to 100 (got {args.noise:g})")
    if args.threads < 1:
        raise usage_error(APP, f"--threads must be at least 1 (got {args.threads})")
    stop = StopFlag()
    cv2 = require("cv2", APP)
    cv2.setNumThreads(args.threads)
    width, height = args.size
    marker = make_marker()
    frames = []
    for i in range(args.frames):
        if stop.stopping:
            break
        frames.append(make_frame(cv2, args.seed, i, width, height, args.noise, marker))
    pipeline = Pipeline(cv2, width, height, marker)
    failures = 0

    def job(number: int, abandon: Callable[[], bool]) -> bool | None:
        nonlocal failures
        frame = frames[number % len(frames)]
        grey = pipeline.denoise(frame.pixels)
        if abandon():
            return None
        mask = pipeline.segment(grey)
        if abandon():
            return None
        marker_xy = pipeline.find_marker(grey)
        if abandon():
            return None
        wrong = mismatch(frame, pipeline.objects(mask, marker_xy), marker_xy)
        if wrong is None:
            return True
        failures += 1
        if failures <= REPORTED_FAILURES:
            print(f"{APP}: self-check failed in job {number} (frame {number % len(frames)}): {wrong}", file=sys.stderr)
        return False

    def extra() -> dict[str, Any]:
        return {"frames": len(frames), "size": f"{width}x{height}", "frames_mb": round(len(frames) * width * height * 3 / 2**20, 1)}

    return _periodic.run(APP, job, timing, stop, extra)


if __name__ == "__main__":
    sys.exit(main())
