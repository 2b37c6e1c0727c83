"""Synthesises the speech app's utterances: sentences spoken by espeak-ng, resampled to 16 kHz
mono 16-bit PCM (what pocketsphinx's en-us model takes), each as NAME.raw with the words spoken
in NAME.txt. Before it keeps them it checks that pocketsphinx decodes each one close to its
words; it leaves a directory that already holds this set alone (unless --force).
`scripts/setup.sh` runs it into the virtual environment, where `critmem.apps.speech` looks.

    usage: python -m critmem.apps.speech_audio [--out DIR] [--force | --check]
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import subprocess
import sys
import tempfile
import wave
from pathlib import Path
from typing import Any

import numpy as np

from critmem.apps._support import usage_error

APP = "speech_audio"
SAMPLE_RATE_HZ = 16000
# Sentences that pocketsphinx's default models decode from this voice with at most one word wrong,
# whatever the noise floor's random draw (others lose several words to a different draw).
SENTENCES = (
    "please open the door",
    "we need more time to finish the project",
    "the price of oil went up again",
    "she reads a book every week",
    "we have to leave early tomorrow",
    "the president will speak tonight",
    "the store opens at ten in the morning",
    "there is a problem with the computer",
)
# espeak-ng's Klatt formant voices decode far better than its default voice (about one word
# wrong in six against most words wrong).
VOICE = "en-us+klatt3"
WORDS_PER_MINUTE = 125
# Silence before and after each sentence, as in a recording.
PAD_S = 0.5
# A faint noise floor (standard deviation in 16-bit sample units): exact digital silence throws
# off the decoder's noise and cepstral-mean estimates and most words come out wrong.
NOISE_FLOOR = 30.0
# The largest share of words a decoded utterance may get wrong against the words spoken.
MAX_WORD_ERROR_RATE = 0.25
MANIFEST = "manifest.json"


def default_dir() -> Path:
    """Where setup puts the utterances: share/critmem/speech in this Python's environment."""
    return Path(sys.prefix) / "share" / "critmem" / "speech"


def manifest() -> dict[str, Any]:
    return {
        "voice": VOICE,
        "words_per_minute": WORDS_PER_MINUTE,
        "pad_s": PAD_S,
        "noise_floor": NOISE_FLOOR,
        "sample_rate_hz": SAMPLE_RATE_HZ,
        "sentences": list(SENTENCES),
    }


def is_complete(directory: Path) -> bool:
    """`directory` holds the utterances this version makes."""
    try:
        if json.loads((directory / MANIFEST).read_text(encoding="utf-8")) != manifest():
            return False
    except (OSError, ValueError):
        return False
    return all((directory / f"utt-{i:02d}.raw").is_file() and (directory / f"utt-{i:02d}.txt").is_file() for i in range(len(SENTENCES)))


def synthesise(text: str, index: int) -> bytes:
    """`text` spoken, as 16 kHz mono 16-bit little-endian PCM."""
    spoken = subprocess.run(["espeak-ng", "-v", VOICE, "-s", str(WORDS_PER_MINUTE), "--stdout", text], capture_output=True, check=True)
    with wave.open(io.BytesIO(spoken.stdout)) as w:
        if w.getnchannels() != 1 or w.getsampwidth() != 2:
            raise RuntimeError(f"espeak-ng gave {w.getnchannels()} channels of {8 * w.getsampwidth()} bits, expected mono 16-bit")
        source_hz = w.getframerate()
        samples = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float64)
    # Resampled by truncating the spectrum: espeak-ng speaks at 22050 Hz, and what lies above
    # 8 kHz is beyond the model's filter bank anyway.
    n_out = round(len(samples) * SAMPLE_RATE_HZ / source_hz)
    spectrum = np.fft.rfft(samples)
    kept = np.zeros(n_out // 2 + 1, dtype=np.complex128)
    bins = min(len(spectrum), len(kept))
    kept[:bins] = spectrum[:bins]
    resampled = np.fft.irfft(kept, n_out) * (n_out / len(samples))
    pad = np.zeros(round(PAD_S * SAMPLE_RATE_HZ))
    signal = np.concatenate([pad, resampled, pad])
    signal += np.random.default_rng(index).normal(0.0, NOISE_FLOOR, len(signal))
    pcm: bytes = np.clip(np.round(signal), -32768, 32767).astype("<i2").tobytes()
    return pcm


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m critmem.apps.speech_audio",
        description="Synthesises the speech app's utterances with espeak-ng (16 kHz mono 16-bit PCM, NAME.raw with its words in "
        "NAME.txt) and checks that pocketsphinx decodes each close to its words.",
    )
    parser.add_argument("--out", type=Path, default=default_dir(), help="directory to write (default: %(default)s)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--force", action="store_true", help="make them again even where the directory already holds them")
    mode.add_argument("--check", action="store_true", help="make nothing: exit 0 if the directory holds them, else 1")
    args = parser.parse_args(argv)
    out: Path = args.out
    if args.check:
        return 0 if is_complete(out) else 1
    if is_complete(out) and not args.force:
        print(f"{APP}: {out} already holds the {len(SENTENCES)} utterances")
        return 0
    if shutil.which("espeak-ng") is None:
        raise usage_error(APP, "espeak-ng not found: install it (Debian: apt-get install espeak-ng)")
    from critmem.apps.speech import decoder_with_fixed_cmn, transcribe, word_error_rate

    decoder, cmn = decoder_with_fixed_cmn()
    out.parent.mkdir(parents=True, exist_ok=True)
    # Made beside the target and renamed over it, so a half-made set is never found there.
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    staging.chmod(0o755)
    try:
        worst = 0.0
        for i, text in enumerate(SENTENCES):
            try:
                pcm = synthesise(text, i)
            except (subprocess.CalledProcessError, RuntimeError, wave.Error, EOFError) as e:
                detail = e.stderr.decode(errors="replace").strip() if isinstance(e, subprocess.CalledProcessError) else str(e)
                print(f"{APP}: espeak-ng could not speak {text!r}: {detail or e}", file=sys.stderr)
                return 1
            decoded = transcribe(decoder, cmn, memoryview(pcm))
            error_rate = word_error_rate(text, decoded or "")
            if error_rate > MAX_WORD_ERROR_RATE:
                print(f"{APP}: {text!r} decodes as {decoded!r} (word error rate {error_rate:.2f} > {MAX_WORD_ERROR_RATE})", file=sys.stderr)
                return 1
            worst = max(worst, error_rate)
            (staging / f"utt-{i:02d}.raw").write_bytes(pcm)
            (staging / f"utt-{i:02d}.txt").write_text(text + "\n", encoding="utf-8")
        (staging / MANIFEST).write_text(json.dumps(manifest(), indent=1) + "\n", encoding="utf-8")
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    print(f"{APP}: wrote {len(SENTENCES)} utterances to {out} (worst word error rate {worst:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
