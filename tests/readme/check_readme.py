"""Runs the README's runnable code blocks: each ```sh block right after a `<!-- runnable -->` line (GitHub
hides the comment), with bash from the source root, and fails naming the block's line if one exits non-zero.
`<!-- runnable python -->` marks a block that needs the klspec Python module, skipped with --no-python-module
(builds without it: sanitized and fuzzing ones).

Usage: check_readme.py README.md BUILD_DIR [--no-python-module]. The blocks say `build/...`, as scripts/test.sh
builds there; a build elsewhere is shown to them as build/ through a copy of the source root made of symbolic
links.
"""
import pathlib
import re
import subprocess
import sys
import tempfile

MARKER = re.compile(r"<!-- runnable( python)? -->")


def runnable_blocks(lines):
    """(line number of the opening fence, the block's text, whether it needs the Python module) of each marked block."""
    blocks = []
    for i, line in enumerate(lines):
        marker = MARKER.fullmatch(line.strip())
        if marker:
            if lines[i + 1:i + 2] != ["```sh"] or "```" not in lines[i + 2:]:
                sys.exit(f"line {i + 1}: a runnable marker must come right before a whole ```sh block")
            end = lines.index("```", i + 2)
            blocks.append((i + 2, "\n".join(lines[i + 2:end]), marker.group(1) is not None))
    return blocks


def main(readme, build_dir, python_module):
    source = readme.resolve().parent
    blocks = runnable_blocks(readme.read_text().splitlines())
    if not blocks:
        sys.exit(f"{readme}: no runnable blocks")
    with tempfile.TemporaryDirectory() as shadow:
        root = source
        if (source / "build").resolve() != build_dir.resolve():
            root = pathlib.Path(shadow)
            for entry in source.iterdir():
                if entry.name != "build":
                    (root / entry.name).symlink_to(entry)
            (root / "build").symlink_to(build_dir.resolve())
        failed, skipped = [], 0
        for line, text, needs_python in blocks:
            if needs_python and not python_module:
                print(f"--- {readme.name}:{line}: skipped, this build has no Python module")
                skipped += 1
                continue
            print(f"--- {readme.name}:{line}\n{text}", flush=True)
            run = subprocess.run(["bash", "-euo", "pipefail", "-c", text], cwd=root, timeout=300)
            if run.returncode != 0:
                failed.append(f"{readme.name}:{line}: the block exited with {run.returncode}")
    if failed:
        sys.exit("\n".join(failed))
    print(f"{len(blocks) - skipped} runnable blocks exited 0, {skipped} skipped")


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), "--no-python-module" not in sys.argv[3:])
