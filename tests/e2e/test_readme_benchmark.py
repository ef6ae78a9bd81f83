"""README, "Set up": the benchmark block, run as written in a fresh copy; its module counts are the README's.

Here rather than in `make test`: it starts seven fresh processes (~25 s on two
cores). It needs no cluster and never asks for the `cluster` fixture. The
times it prints are the machine's, so only the counts are compared (the
wording is compared in tests/test_readme.py, for the README's own numbers).
"""

from __future__ import annotations

import pytest

from tests import readme_blocks as rb

pytestmark = pytest.mark.stack("dev")  # the tier orders its tests by stack; this one starts none


def test_the_benchmark_block_runs_as_written_and_counts_the_modules_the_readme_quotes(tmp_path):
    command, quote = rb.benchmark_block()
    result = rb.run_script(command.text, rb.fresh_clone(tmp_path), timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    got, quoted = rb.benchmark_numbers(result.stdout), rb.benchmark_numbers(quote)
    assert (got["modules"], got["loaded"], got["resources"]) == (quoted["modules"], quoted["loaded"],
                                                                 quoted["resources"]), (
        f"README.md:{command.line}: the benchmark now prints {result.stdout.strip()!r}: quote it")
