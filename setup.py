"""The compiled winnowing kernel (an optional extension: without a compiler, sif uses numba)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "sif.core._winnowc",
            ["src/sif/core/_winnowc.c"],
            extra_compile_args=["-O3"],
            optional=True,
        ),
        Extension(
            "sif._dirc",
            ["src/sif/_dirc.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        Extension(
            "sif.actions._fsc",
            ["src/sif/actions/_fsc.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
    ]
)
