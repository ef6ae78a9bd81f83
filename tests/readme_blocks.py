"""README.md as data for the docs tests: its fenced blocks, their shell commands, and a fresh copy to run them in.

tests/test_readme.py (and tests/e2e/test_readme_benchmark.py) run the README's
offline commands exactly as written, through bash, in a copy of the working
tree under a random folder name that is a git repository on `main`, with
`venv` linked to this checkout's virtualenv.
"""

from __future__ import annotations

import ast
import os
import re
import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
FENCE = re.compile(r"^```(\w*)\s*$")
HEREDOC = re.compile(r"<<-?\s*'?\"?(\w+)'?\"?")
COMMENT = re.compile(r"(^|\s+)#(\s.*)?$")


@dataclass(frozen=True)
class Block:
    lang: str
    line: int  # the README line of its opening fence
    text: str

    @property
    def lines(self) -> list[tuple[int, str]]:
        return [(self.line + 1 + i, line) for i, line in enumerate(self.text.splitlines())]


@dataclass(frozen=True)
class Command:
    line: int  # the README line it starts on
    text: str  # as written: continuations joined with their newlines, a here-document included
    block: Block

    @property
    def bare(self) -> str:
        """The command without its trailing comment (for classifying it)."""
        first, *rest = self.text.split("\n")
        return "\n".join([COMMENT.sub("", first), *rest]).strip()


def blocks(text: str | None = None) -> list[Block]:
    """Every fenced block of the README: its language, the line of its opening fence, its text."""
    lines = (README.read_text() if text is None else text).splitlines()
    found, start, lang = [], None, ""
    for number, line in enumerate(lines, 1):
        match = FENCE.match(line)
        if not match:
            continue
        if start is None:
            start, lang = number, match.group(1)
        else:
            found.append(Block(lang, start, "\n".join(lines[start:number - 1]) + "\n"))
            start = None
    assert start is None, f"README.md:{start}: a fenced block is never closed"
    return found


def commands(block: Block) -> list[Command]:
    """A bash block's commands: blank and comment lines dropped, `\\` continuations and here-documents kept whole."""
    found: list[Command] = []
    pending: list[str] = []
    start = 0
    heredoc = None
    for number, line in block.lines:
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if not pending:
            start = number
        pending.append(line)
        if heredoc is None and (match := HEREDOC.search(line)):
            heredoc = match.group(1)
            continue
        if heredoc is not None:
            if line.strip() == heredoc:
                heredoc = None
            else:
                continue
        if line.endswith("\\"):
            continue
        found.append(Command(start, "\n".join(pending), block))
        pending = []
    assert not pending, f"README.md:{start}: a command never ends"
    return found


def bash_commands(text: str | None = None) -> list[Command]:
    return [command for block in blocks(text) if block.lang == "bash" for command in commands(block)]


def section(title: str, text: str | None = None) -> str:
    """The README's `## title` section (its subsections included), up to the next `## ` heading."""
    text = README.read_text() if text is None else text
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def block_in(title: str, lang: str, text: str | None = None) -> Block:
    """The one block of `lang` in the section `title`."""
    body = section(title, text)
    found = [b for b in blocks(text) if b.lang == lang and b.text in body]
    assert len(found) == 1, f"README section {title!r} has {len(found)} {lang or 'plain'} blocks, not 1"
    return found[0]


BENCHMARK = "venv/bin/python -m bootstrap.offline.benchmark"
BENCHMARK_LINE = re.compile(r"stack (?P<stack>\S+): plan (?P<plan_s>[\d.]+) s; imports (?P<floor_s>[\d.]+) s \("
                            r"the (?P<modules>\d+) modules .*; the plan loads (?P<loaded>\d+) provider "
                            r"modules\), ratio (?P<ratio>[\d.]+); imports and the engine registering its "
                            r"(?P<resources>\d+) resources (?P<sdk_s>[\d.]+) s, ratio (?P<sdk_ratio>[\d.]+) "
                            r"\(goal <= [\d.]+\)")


def benchmark_block(text: str | None = None) -> tuple[Command, str]:
    """The README's benchmark command and the output it quotes (the comment lines after it, as one line)."""
    (command,) = [c for c in bash_commands(text) if c.bare == BENCHMARK]
    after = [line for number, line in command.block.lines if number > command.line]
    return command, " ".join(line.removeprefix("# ") for line in after if line.startswith("# "))


def benchmark_numbers(output: str) -> dict[str, float | int]:
    """measure()'s result, read back from a line the benchmark printed."""
    match = BENCHMARK_LINE.fullmatch(output.strip())
    assert match, f"not the benchmark's line: {output!r}"
    return {key: (int(value) if key in ("modules", "loaded", "resources") else float(value))
            for key, value in match.groupdict().items() if key != "stack"}


PIN_FILES = ("components/core/versions.py", "local/*.py", "local/modules/*/go.mod", "requirements*.txt",
             "policy/requirements.txt", ".github/workflows", "tests/upstream/charts/*/Chart.yaml",
             "tests/upstream/charts/*/values.yaml")  # ours, local/'s, the workflows', the pinned charts' own


def pinned_text(name: str) -> str:
    """What a pin file says, comments and docstrings left out (a version only a comment names is no pin)."""
    text = (ROOT / name).read_text()
    if name.endswith(".py"):
        tree = ast.parse(text)
        docs = {id(node.body[0].value) for node in ast.walk(tree)
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body
                and isinstance(node.body[0], ast.Expr)}
        return " ".join(node.value for node in ast.walk(tree)
                        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs)
    mark = "//" if name.endswith("go.mod") else "#"
    return "\n".join(re.sub(rf"(^|\s){mark}.*", "", line) for line in text.splitlines())


def pins() -> str:
    """Every pin file's text (git ls-files: the working tree's tracked files)."""
    return " ".join(pinned_text(name) for name in git("ls-files", *PIN_FILES, cwd=ROOT).split())


def git(*args: str, cwd: Path) -> str:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
           "GIT_AUTHOR_NAME": "readme", "GIT_AUTHOR_EMAIL": "readme@example.com",
           "GIT_COMMITTER_NAME": "readme", "GIT_COMMITTER_EMAIL": "readme@example.com"}
    return subprocess.run(["git", "-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null", *args], cwd=cwd,
                          env=env, check=True, capture_output=True, text=True).stdout


def fresh_clone(parent: Path) -> Path:
    """The working tree's files (tracked and new, not ignored) in `parent/<random name>`, committed on `main`.

    `venv` links to this checkout's virtualenv; the requirement files get its
    `.installed` stamp's time, so `make` sees an installed venv, as after a first `make`.
    """
    listed = git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT).split("\0")
    dest = parent / f"clone-{secrets.token_hex(4)}"
    for name in sorted(set(filter(None, listed))):
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the working tree is not in a clone of it
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name, follow_symlinks=False)
    venv = (ROOT / "venv").resolve()
    (dest / "venv").symlink_to(venv, target_is_directory=True)
    stamp = (venv / ".installed").stat().st_mtime - 1
    for requirements in ("requirements.txt", "requirements-dev.txt", "policy/requirements.txt"):
        os.utime(dest / requirements, (stamp, stamp))
    git("init", "-q", "-b", "main", cwd=dest)
    (dest / ".git" / "info" / "exclude").write_text("/venv\n")
    git("add", "-A", cwd=dest)
    git("commit", "-q", "-m", "the working tree, for the README's commands", cwd=dest)
    return dest


def run_script(script: str, cwd: Path, timeout: float = 240, tmpdir: Path | None = None
               ) -> subprocess.CompletedProcess:
    """bash, with `set -euo pipefail`, running `script` as the README writes it (`tmpdir`: its TMPDIR)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GIT_", "PYTEST_", "VIRTUAL_ENV", "KUBECONFIG", "GPUCLUSTER_", "MAKE", "TMPDIR"))}
    if tmpdir is not None:
        env["TMPDIR"] = str(tmpdir)
    env.update(GIT_AUTHOR_NAME="readme", GIT_AUTHOR_EMAIL="readme@example.com", GIT_COMMITTER_NAME="readme",
               GIT_COMMITTER_EMAIL="readme@example.com")
    return subprocess.run(["bash", "-c", "set -euo pipefail\n" + script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
