"""The optional compiled extensions: without a compiler, sif runs the same code in Python
(numba for the winnowing kernel)."""

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
            "sif.index._lookupc",
            ["src/sif/index/_lookupc.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        Extension(
            "sif.index._frontc",
            ["src/sif/index/_frontc.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        Extension(
            "sif._dirc",
            ["src/sif/_dirc.c"],
            depends=["src/sif/_dirent.h", "src/sif/_hiddenlist.h"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        Extension(
            "sif._treec",
            ["src/sif/_treec.c"],
            depends=[
                "src/sif/_dirent.h",
                "src/sif/_treec.h",
                "src/sif/_treeread.h",
                "src/sif/_blake2b.h",
                "src/sif/_hiddenlist.h",
            ],
            extra_compile_args=["-O2", "-pthread"],
            extra_link_args=["-pthread"],
            optional=True,
        ),
        Extension(
            "sif.index._readc",
            ["src/sif/index/_readc.c"],
            depends=["src/sif/_hiddenlist.h"],
            extra_compile_args=["-O3"],
            optional=True,
        ),
        Extension(
            "sif.index._planc",
            ["src/sif/index/_planc.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        Extension(
            "sif.index._orderc",
            ["src/sif/index/_orderc.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        Extension(
            "sif.actions._fsc",
            ["src/sif/actions/_fsc.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        Extension(
            "sif.exact._firstc",
            ["src/sif/exact/_firstc.c"],
            extra_compile_args=["-O2", "-pthread"],
            extra_link_args=["-pthread"],
            optional=True,
        ),
    ]
)
