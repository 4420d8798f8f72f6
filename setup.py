"""Build the Cython extensions in ``dataloader/_native``.

One declarative table of extensions and one ``cythonize`` call.  Set
``DATALOADER_DEBUG=1`` to turn bounds checks back on and build with ``-O0 -g``.
"""

import os

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("DATALOADER_DEBUG", "") not in ("", "0")

COMPILE_ARGS = ["-O0", "-g"] if DEBUG else ["-O3"]

# name -> (language, extra compile args)
NATIVE = {
    "_ring": ("c++", ["-std=c++17"]),
    "_gather": ("c", []),
    "_collate": ("c", []),
    "_resize": ("c", []),
}

extensions = [
    Extension(
        f"dataloader._native.{name}",
        [f"dataloader/_native/{name}.pyx"],
        language=language,
        include_dirs=[numpy.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=COMPILE_ARGS + extra,
    )
    for name, (language, extra) in NATIVE.items()
    if os.path.exists(f"dataloader/_native/{name}.pyx")
]

setup(
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
