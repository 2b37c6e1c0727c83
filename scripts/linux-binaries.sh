# The Linux platform's programs setup.sh installs into .venv/bin (sourced by setup.sh and test.sh).
LINUX_BINARIES=(critmem-agent critmem-linux-run critmem-srt-worker critmem-nrt-worker critmem-swap critmem-hires critmem-loop-bench)
