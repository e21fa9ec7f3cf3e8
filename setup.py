"""Installs the rooms under one package, infer_prof, and builds the optional C twins (infer_prof.native_paths._native);
without a compiler the install still succeeds."""

import sys
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py


class OptionalBuildExt(build_ext):
    """build_ext that warns instead of failing: the package then runs its Python twins."""

    failed = False

    def run(self) -> None:
        try:
            super().run()
        except Exception as error:  # no compiler, missing headers, ...: keep installing
            self._skip(error)

    def build_extension(self, ext) -> None:  # type: ignore[no-untyped-def]
        try:
            super().build_extension(ext)
        except Exception as error:  # the same, for one extension
            self.failed = True
            self._skip(error)

    def copy_extensions_to_source(self) -> None:
        """In-place and editable installs: copy the library into the package, and delete any other
        build of it there (e.g. `_native.cpython-311-*.so` from native_paths/build.py), which Python
        might otherwise import instead."""
        if self.failed:
            return  # already said so: there is nothing to copy
        super().copy_extensions_to_source()
        build_py = self.get_finalized_command("build_py")
        for ext in self.extensions:
            built = Path(self._get_inplace_equivalent(build_py, ext)[0]).resolve()
            if not built.exists():
                continue
            for other in built.parent.glob(built.name.split(".")[0] + ".*.so"):
                if other.resolve() != built:
                    other.unlink(missing_ok=True)

    @staticmethod
    def _skip(error: Exception) -> None:
        print(
            f"WARNING: a C extension was not built ({error}); infer-prof will run its Python twins (the "
            "sampler, allocator and scheduler, and the tracer's spans). Install a C compiler and reinstall "
            "to get them.",
            file=sys.stderr,
        )


class RoomsOnly(build_py):
    """The package infer_prof is the repository root: of the modules lying there, only __init__.py and
    errors.py are ours to install (not this setup.py)."""

    def find_package_modules(self, package, package_dir):  # type: ignore[no-untyped-def]
        found = super().find_package_modules(package, package_dir)
        return [entry for entry in found if package != "infer_prof" or entry[1] in ("__init__", "errors")]


# The repository's top-level folders are the rooms; installed, they are infer_prof.engine, infer_prof.profiler...
# and errors.py is infer_prof.errors, so nothing infer-prof installs can shadow a user's own `engine` or `errors`
# (docs/architecture.md, "The installed namespace"). tests/, benchmarks/ and docs/ are not rooms: not installed.
ROOMS = ["engine", "profiler", "native_paths", "reports", "scenarios", "cli"]
ROOM_PACKAGES = find_packages(include=[pattern for room in ROOMS for pattern in (room, room + ".*")])

# The recording tracer's spans in C (profiler/collectors/span_log.py has its Python twin, used without it).
SPAN_LOG = Extension(
    "infer_prof.profiler.collectors._span_log",
    sources=["profiler/collectors/csrc/span_log.c"],
    extra_compile_args=["-std=c99", "-O2", "-Wall", "-Wextra"],
)

# The slowdown delay's busy wait with the GIL released (profiler/checks/delay.py has its twin, which holds it).
SPIN = Extension(
    "infer_prof.profiler.checks._spin",
    sources=["profiler/checks/csrc/spin.c"],
    extra_compile_args=["-std=c99", "-O2", "-Wall", "-Wextra"],
)

# The package's one folder is .pkg/infer_prof, a committed link to the repository root: a plain path
# entry (.pkg) then finds infer_prof, for an editable install (a static .pth, no import hook), pyright and
# mypy alike (docs/architecture.md, "The installed namespace").
setup(
    package_dir={"": ".pkg"},
    packages=["infer_prof", *("infer_prof." + package for package in ROOM_PACKAGES)],
    cffi_modules=["native_paths/build.py:ffibuilder"],
    ext_modules=[SPAN_LOG, SPIN],
    cmdclass={"build_ext": OptionalBuildExt, "build_py": RoomsOnly},
)
