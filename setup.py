"""Builds the optional C twins (native_paths._native) at install time; without a compiler the install still succeeds."""

import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext


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
            f"WARNING: the native_paths C extension was not built ({error}); infer-prof will run the "
            "Python sampler, allocator and scheduler. Install a C compiler and reinstall to get them.",
            file=sys.stderr,
        )


setup(cffi_modules=["native_paths/build.py:ffibuilder"], cmdclass={"build_ext": OptionalBuildExt})
