"""Builds the optional C twins (native_paths._native) at install time; without a compiler the install still succeeds."""

import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """build_ext that warns instead of failing: the package then runs its Python twins."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as error:  # no compiler, missing headers, ...: keep installing
            self._skip(error)

    def build_extension(self, ext) -> None:  # type: ignore[no-untyped-def]
        try:
            super().build_extension(ext)
        except Exception as error:
            self._skip(error)

    @staticmethod
    def _skip(error: Exception) -> None:
        print(
            f"WARNING: the native_paths C extension was not built ({error}); infer-prof will run the "
            "Python sampler, allocator and scheduler. Install a C compiler and reinstall to get them.",
            file=sys.stderr,
        )


setup(cffi_modules=["native_paths/build.py:ffibuilder"], cmdclass={"build_ext": OptionalBuildExt})
