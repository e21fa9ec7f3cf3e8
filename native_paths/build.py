"""The one cffi builder (API mode, out of line) of `native_paths._native`; run it to build in place.

    python native_paths/build.py                     # native_paths/_native*.so, next to the package
    python native_paths/build.py --sanitize --out D  # an ASan+UBSan build into D (see docs/native-dev.md)

setup.py uses `ffibuilder` through `cffi_modules`; INFER_PROF_SANITIZE=1 makes it a sanitizer build.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import cffi

MODULE_NAME = "infer_prof.native_paths._native"
PACKAGE_DIR = Path(__file__).resolve().parent
CSRC = PACKAGE_DIR / "csrc"
HEADER = CSRC / "native_paths.h"
SOURCES = (
    "kv_alloc.c",
    "sampler.c",
    "scheduler.c",
    "prepare.c",
    "core.c",
    "parallel.c",
    "block_linear.c",
    "decode_attention.c",
    "decode_layers.c",
)

# -std=c99 also keeps GCC from fusing a*b+c into FMAs, which would make the sampler's float64
# arithmetic differ from the Python twin's; -ffp-contract=off says so explicitly. -fno-trapping-math
# changes no value (nothing here reads floating-point exception flags) but lets GCC if-convert the
# sampler's clamped exp loops: without it they stay scalar on AVX2 (only AVX-512's masked stores
# made them safe), which made a top-p row several times slower there.
BASE_FLAGS = [
    "-std=c99",
    "-Wall",
    "-Wextra",
    "-ffp-contract=off",
    "-fno-trapping-math",
    "-fno-strict-aliasing",
]
RELEASE_FLAGS = ["-O3"]
SANITIZE_FLAGS = [
    "-O1",
    "-g",
    "-fno-omit-frame-pointer",
    "-fsanitize=address,undefined",
    "-fno-sanitize-recover=all",
]


def read_cdef(header: Path = HEADER) -> str:
    """The part of the header between the cdef markers: the module's whole interface."""
    text = header.read_text()
    match = re.search(r"/\* cdef-begin \*/(.*?)/\* cdef-end \*/", text, re.DOTALL)
    if match is None:
        raise RuntimeError(f"{header} has no /* cdef-begin */ ... /* cdef-end */ section")
    return match.group(1)


def make_builder(sanitize: bool = False, absolute_paths: bool = False) -> cffi.FFI:
    """A cffi builder for the extension.

    setuptools wants source paths relative to setup.py (the current directory during a build), while
    `FFI.compile` changes into its temporary folder and so needs absolute ones.
    """
    place = (lambda path: str(path)) if absolute_paths else os.path.relpath
    builder = cffi.FFI()
    builder.cdef(read_cdef())
    flags = BASE_FLAGS + (SANITIZE_FLAGS if sanitize else RELEASE_FLAGS)
    builder.set_source(
        MODULE_NAME,
        '#include "native_paths.h"',
        sources=[place(CSRC / name) for name in SOURCES],
        include_dirs=[place(CSRC)],
        extra_compile_args=flags,
        extra_link_args=["-fsanitize=address,undefined"] if sanitize else [],
        libraries=["m"],
    )
    return builder


ffibuilder = make_builder(sanitize=os.environ.get("INFER_PROF_SANITIZE") == "1")


def build(sanitize: bool = False, out_dir: Path | None = None, verbose: bool = False) -> Path:
    """Compile the extension in a temporary folder and copy the library into `out_dir` (default: the package)."""
    target_dir = Path(out_dir) if out_dir is not None else PACKAGE_DIR
    target_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="native_paths_build_") as scratch:
        library = make_builder(sanitize, absolute_paths=True).compile(tmpdir=scratch, verbose=verbose)
        destination = target_dir / Path(library).name
        temporary = destination.with_name(destination.name + ".tmp")
        shutil.copyfile(library, temporary)
        os.replace(temporary, destination)  # atomic: a running import never sees half a library
    remove_stale_libraries(destination)
    return destination


def remove_stale_libraries(kept: Path) -> None:
    """Delete other builds of the module next to `kept` (say `_native.abi3.so` from `pip install -e .`
    beside `_native.cpython-311-....so` from this script): Python would import whichever suffix it
    tries first, perhaps an outdated one."""
    for other in kept.parent.glob("_native*.so"):
        if other != kept:
            other.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build native_paths._native in place.")
    parser.add_argument("--sanitize", action="store_true", help="build with -fsanitize=address,undefined")
    parser.add_argument(
        "--out", type=Path, default=None, help="folder for the library (default: the package)"
    )
    parser.add_argument("--verbose", action="store_true", help="show the compiler command lines")
    args = parser.parse_args(argv)
    print(build(sanitize=args.sanitize, out_dir=args.out, verbose=args.verbose))
    return 0


if __name__ == "__main__":
    sys.exit(main())
