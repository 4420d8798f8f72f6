"""Build the Cython extensions in ``dataloader/_native``.

One declarative table of extensions and one ``cythonize`` call.  Set
``DATALOADER_DEBUG=1`` to turn bounds checks back on and build with ``-O0 -g``.
Set ``DATALOADER_SANITIZE=thread`` (or ``address``, ...) to compile and link with
``-fsanitize=<value> -g``; an extension built with ``thread`` loads only into an
interpreter built with ``--with-thread-sanitizer`` (``tools/tsan-check`` does both).
"""

import os

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

DEBUG = os.environ.get("DATALOADER_DEBUG", "") not in ("", "0")

SANITIZE = os.environ.get("DATALOADER_SANITIZE", "")

COMPILE_ARGS = ["-O0", "-g"] if DEBUG else ["-O3"]
LINK_ARGS: list[str] = []
if SANITIZE:
    COMPILE_ARGS += [f"-fsanitize={SANITIZE}", "-g"]
    LINK_ARGS += [f"-fsanitize={SANITIZE}"]

# name -> (language, extra compile args)
NATIVE = {
    "_window_core": ("c++", ["-std=c++17"]),
    "_ring": ("c++", ["-std=c++17"]),
    "_stats": ("c++", ["-std=c++17"]),
    "_rowjobs": ("c++", ["-std=c++17"]),
    "_status": ("c", []),
    "_out": ("c", []),
    "_awaitable": ("c", []),
    "_rowcopy": ("c", []),
    "_arrayrows": ("c", []),
    "_gather": ("c", []),
    "_imgcopy": ("c", []),
    "_resize": ("c", []),
    # Unrolling the 8 Feistel rounds x 8 lanes: ~15% faster fill (benchmarks/bench_permute.py).
    "_permute": ("c", ["-funroll-loops"]),
}

extensions = [
    Extension(
        f"dataloader._native.{name}",
        [f"dataloader/_native/{name}.pyx"],
        language=language,
        include_dirs=[numpy.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=COMPILE_ARGS + extra,
        extra_link_args=LINK_ARGS,
    )
    for name, (language, extra) in NATIVE.items()
    if os.path.exists(f"dataloader/_native/{name}.pyx")
]


class build_ext_also_in_place(build_ext):  # noqa: N801 - setuptools command naming
    """Build as usual, then also copy the extensions into the source tree.

    ``python -m dataloader ...`` and ``python -m pytest`` put the current folder first on
    ``sys.path``; run from the repository root after ``pip install .``, they import the
    source tree's ``dataloader``, which would have no compiled ``_native`` modules.  The
    copy is what ``build_ext --inplace`` makes; a read-only source tree only loses it.
    """

    def run(self) -> None:
        super().run()
        if not self.inplace:
            try:
                self.copy_extensions_to_source()
            except OSError as exc:
                print(f"note: extensions not copied into the source tree: {exc}")


setup(
    cmdclass={"build_ext": build_ext_also_in_place},
    ext_modules=cythonize(
        extensions,
        compiler_directives={
            "language_level": 3,
            "boundscheck": DEBUG,
            "wraparound": DEBUG,
            "cdivision": not DEBUG,
            "initializedcheck": DEBUG,
        },
    ),
)
