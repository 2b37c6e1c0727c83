"""Speech recognition as a soft real-time task (the SARA paper's Sphinx workload): every period
one utterance is decoded with pocketsphinx (its bundled en-us acoustic model, language model
and dictionary), fed in chunks as from a microphone.

The utterances (16 kHz mono 16-bit PCM, `.raw` or `.wav`, each with the words spoken in a `.txt`
beside it if known) come from `--audio`: a file, or a directory of them; by default the ones
`scripts/setup.sh` synthesised (see `critmem.apps.speech_audio`). They are held in memory as
a ring of recordings `--buffer-mb` large, and each job decodes the next one in the ring, so the
resident memory is about 131 MiB (interpreter and recogniser) plus the ring.

Self-check: the first time an utterance is decoded its transcript must be close to its words
(word error rate at most 0.25, where the words are known); every later decoding of it must
give exactly that transcript again.

Run it under critmem (examples/linux-speech.toml) or alone:

    python -m critmem.apps.speech --jobs 5
"""

from __future__ import annotations

import argparse
import sys
import wave
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from critmem.apps import _periodic
from critmem.apps._support import REPORTED_FAILURES, StopFlag, require, usage_error
from critmem.apps.speech_audio import MAX_WORD_ERROR_RATE, SAMPLE_RATE_HZ, default_dir

APP = "speech"
DEFAULT_PERIOD_MS = 2500.0
BYTES_PER_SAMPLE = 2


@dataclass(frozen=True)
class Utterance:
    name: str
    pcm: bytes
    # The words spoken, where a .txt beside the audio says.
    words: str | None


def word_error_rate(words: str, transcript: str) -> float:
    """Word-level edit distance from `words` to `transcript`, per word of `words`."""
    ref, hyp = words.split(), transcript.split()
    row = list(range(len(hyp) + 1))
    for i in range(1, len(ref) + 1):
        diagonal, row[0] = row[0], i
        for j in range(1, len(hyp) + 1):
            above = row[j]
            row[j] = min(above + 1, row[j - 1] + 1, diagonal + (ref[i - 1] != hyp[j - 1]))
            diagonal = above
    return row[-1] / max(1, len(ref))


def load_utterance(path: Path) -> Utterance:
    """One recording: raw 16 kHz mono 16-bit little-endian PCM, or a WAV file of that format."""
    if path.suffix.lower() == ".wav":
        try:
            with wave.open(str(path)) as w:
                form = (w.getnchannels(), w.getsampwidth(), w.getframerate())
                if form != (1, BYTES_PER_SAMPLE, SAMPLE_RATE_HZ):
                    raise usage_error(APP, f"{path}: {form[0]} channels, {8 * form[1]} bits, {form[2]} Hz; expected mono 16-bit 16000 Hz")
                pcm = w.readframes(w.getnframes())
        except (OSError, wave.Error, EOFError) as e:
            raise usage_error(APP, f"{path}: {e}") from None
    else:
        try:
            pcm = path.read_bytes()
        except OSError as e:
            raise usage_error(APP, f"{path}: {e.strerror}") from None
    if len(pcm) < BYTES_PER_SAMPLE * SAMPLE_RATE_HZ // 10 or len(pcm) % BYTES_PER_SAMPLE:
        raise usage_error(APP, f"{path}: {len(pcm)} bytes is not at least 0.1 s of 16-bit samples")
    text = path.with_suffix(".txt")
    words = " ".join(text.read_text(encoding="utf-8").split()).lower() if text.is_file() else None
    return Utterance(path.stem, pcm, words or None)


def load_audio(path: Path) -> list[Utterance]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in (".raw", ".wav"))
        if not files:
            raise usage_error(APP, f"{path} holds no .raw or .wav recordings")
        return [load_utterance(p) for p in files]
    if not path.exists():
        hint = " (scripts/setup.sh makes it; or: python -m critmem.apps.speech_audio)" if path == default_dir() else ""
        raise usage_error(APP, f"{path} does not exist{hint}")
    return [load_utterance(path)]


def decoder_with_fixed_cmn() -> tuple[Any, str]:
    """pocketsphinx's default decoder, and its initial cepstral mean: every utterance starts from
    it, so a transcript does not depend on which utterances came before."""
    pocketsphinx = require("pocketsphinx", APP)
    decoder = pocketsphinx.Decoder()
    return decoder, decoder.get_cmn(False)


def transcribe(decoder: Any, cmn: str, pcm: memoryview, chunk_bytes: int = 8000, abandon: Callable[[], bool] = lambda: False) -> str | None:
    """Decodes one utterance chunk by chunk; None when `abandon()` says so between chunks."""
    decoder.set_cmn(cmn)
    decoder.start_utt()
    try:
        for at in range(0, len(pcm), chunk_bytes):
            if abandon():
                return None
            decoder.process_raw(pcm[at : at + chunk_bytes], False, False)
    finally:
        decoder.end_utt()
    if abandon():
        return None
    hypothesis = decoder.hyp()
    return str(hypothesis.hypstr) if hypothesis is not None else ""


class Ring:
    """Copies of the utterances, round robin, in one buffer of about `buffer_bytes` (at least one
    copy of each): the recordings a recogniser holds, walked through one per job."""

    def __init__(self, utterances: list[Utterance], buffer_bytes: int) -> None:
        self.slots: list[tuple[int, int, int]] = []  # (offset, length, utterance index)
        size = 0
        while True:
            u = len(self.slots) % len(utterances)
            length = len(utterances[u].pcm)
            if len(self.slots) >= len(utterances) and size + length > buffer_bytes:
                break
            self.slots.append((size, length, u))
            size += length
        self.buffer = bytearray(size)
        for offset, length, u in self.slots:
            self.buffer[offset : offset + length] = utterances[u].pcm

    def slot(self, number: int) -> tuple[memoryview, int]:
        offset, length, u = self.slots[number % len(self.slots)]
        return memoryview(self.buffer)[offset : offset + length], u


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m critmem.apps.speech",
        description="Speech recognition (pocketsphinx) as a soft real-time task: one utterance decoded per period, its transcript "
        "checked; reports its jobs to critmem. On SIGTERM/SIGINT: one JSON line of counts on stderr, exit 0 (1 if a self-check failed).",
        epilog="examples:\n  python -m critmem.apps.speech --jobs 5\n"
        "  python -m critmem.apps.speech --audio my-recording.wav --buffer-mb 50",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--audio", type=Path, default=default_dir(), help="a recording (.raw/.wav), or a directory of them (default: %(default)s)"
    )
    parser.add_argument(
        "--buffer-mb", type=float, default=200.0, help="MiB of recordings held in memory, walked through one per job (default: %(default)g)"
    )
    parser.add_argument(
        "--chunk-ms", type=float, default=250.0, help="audio fed to the decoder at a time; drop requests are checked between chunks"
    )
    _periodic.add_arguments(parser, default_period_ms=DEFAULT_PERIOD_MS)
    args = parser.parse_args(argv)
    timing = _periodic.timing(args, APP, default_period_ms=DEFAULT_PERIOD_MS)
    if not args.buffer_mb >= 0:
        raise usage_error(APP, f"--buffer-mb must be at least 0 (got {args.buffer_mb:g})")
    if not args.chunk_ms >= 10:
        raise usage_error(APP, f"--chunk-ms must be at least 10 (got {args.chunk_ms:g})")
    chunk_bytes = round(args.chunk_ms * SAMPLE_RATE_HZ / 1000) * BYTES_PER_SAMPLE
    # From here on a stop signal ends the run with its counts, even during start-up.
    stop = StopFlag()
    decoder, cmn = decoder_with_fixed_cmn()
    utterances = load_audio(args.audio)
    ring = Ring(utterances, round(args.buffer_mb * 2**20))
    references: dict[int, str] = {}
    failures = 0

    def fail(number: int, message: str) -> bool:
        nonlocal failures
        failures += 1
        if failures <= REPORTED_FAILURES:
            print(f"{APP}: self-check failed in job {number}: {message}", file=sys.stderr)
        return False

    def job(number: int, abandon: Callable[[], bool]) -> bool | None:
        pcm, u = ring.slot(number)
        transcript = transcribe(decoder, cmn, pcm, chunk_bytes, abandon)
        if transcript is None:
            return None
        utterance = utterances[u]
        reference = references.get(u)
        if reference is None:
            references[u] = transcript
            if utterance.words is not None:
                error_rate = word_error_rate(utterance.words, transcript)
                if error_rate > MAX_WORD_ERROR_RATE:
                    return fail(
                        number,
                        f"{utterance.name} decodes as {transcript!r}, not close to its words {utterance.words!r} "
                        f"(word error rate {error_rate:.2f} > {MAX_WORD_ERROR_RATE})",
                    )
            return True
        if transcript != reference:
            return fail(number, f"{utterance.name} decodes as {transcript!r}, earlier as {reference!r}")
        return True

    def extra() -> dict[str, Any]:
        return {"utterances": len(utterances), "buffer_slots": len(ring.slots), "buffer_mb": round(len(ring.buffer) / 2**20, 1)}

    return _periodic.run(APP, job, timing, stop, extra)


if __name__ == "__main__":
    sys.exit(main())
