"""Real programs to run as critmem tasks (`command = [...]` in a scenario), after the workloads
of the SARA paper's Table I. Each is a module with `--help`:

- `python -m critmem.apps.speech`: soft real-time speech recognition (pocketsphinx), one
  utterance decoded per period;
- `python -m critmem.apps.vision`: soft real-time image processing (OpenCV), one frame per
  period;
- `python -m critmem.apps.graph`: non-real-time graph analytics (igraph), PageRank after
  PageRank, its work units reported through `critmem.jobclient.ProgressReporter`;
- `python -m critmem.apps.tables`: non-real-time table analytics (pandas), a sales report
  after a sales report, reported likewise: a program apart from the paper's workloads, which
  `critmem reproduce sara --platform linux --pair speech+tables` runs as Fig. 11's pairs;
- `python -m critmem.apps.speech_audio`: synthesises the speech app's utterances (espeak-ng),
  as `scripts/setup.sh` does.

Speech, vision and graph need the `apps` extra (`pip install 'critmem[apps]'`; tables needs
only pandas, which critmem itself needs); see examples/linux-speech.toml and
examples/linux-vision.toml.
"""
