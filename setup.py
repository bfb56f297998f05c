"""`pip install .`: builds the perseus Python package with CMake (setuptools drives it).

The metadata is in pyproject.toml. The extension perseus._perseus is the CMake target
perseus_python (src/perseus/python); build_ext configures the project with its tests and
benchmarks off, builds only that target (and the libraries it links), and copies the module
into the wheel beside the pure-Python files of src/perseus/python/perseus.

Offline (Debian's setuptools, wheel and numpy; see the README):

    python3 -m venv --system-site-packages .venv
    .venv/bin/pip install --no-build-isolation .

Environment:
  PERSEUS_CMAKE_BUILD_DIR     CMake build directory to use and keep (default build-pip/cmake
                              in the checkout, so a second install is incremental)
  CMAKE_BUILD_PARALLEL_LEVEL  parallel compile jobs (default: every core)
  CMAKE_ARGS                  more arguments for the CMake configure step
"""

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
# setuptools' own scratch space: not build/, which is the CMake build of scripts/build.sh.
BUILD_BASE = "build-pip"


class CMakeExtension(Extension):
    """An extension CMake builds: `target` makes `filename_prefix`*.so in `output_subdir`."""

    def __init__(self, name, target, output_subdir, filename_prefix):
        super().__init__(name, sources=[])
        self.target = target
        self.output_subdir = output_subdir
        self.filename_prefix = filename_prefix


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        if not isinstance(ext, CMakeExtension):
            return super().build_extension(ext)
        build_dir = Path(os.environ.get("PERSEUS_CMAKE_BUILD_DIR") or ROOT / BUILD_BASE / "cmake").resolve()
        if build_dir == (ROOT / "build").resolve():
            raise RuntimeError("PERSEUS_CMAKE_BUILD_DIR must not be build/ (scripts/build.sh's, other options)")
        build_dir.mkdir(parents=True, exist_ok=True)
        if shutil.which("cmake") is None:
            raise RuntimeError("cmake not found: run scripts/setup.sh (the Debian packages) first")

        configure = ["cmake", "-S", str(ROOT), "-B", str(build_dir)]
        if not (build_dir / "CMakeCache.txt").exists() and shutil.which("ninja"):
            configure += ["-G", "Ninja"]  # a new build dir only: a cache keeps its generator
        configure += [
            "-DCMAKE_BUILD_TYPE=Release",
            "-DPERSEUS_BUILD_TESTS=OFF",
            "-DPERSEUS_BUILD_BENCHMARKS=OFF",
            "-DPERSEUS_REQUIRE_PYTHON=ON",
            # The interpreter behind a virtual environment: its headers and ABI are the venv's,
            # and the cache stays valid from one (temporary) venv to the next.
            f"-DPython3_EXECUTABLE={os.path.realpath(sys.executable)}",
        ]
        configure += shlex.split(os.environ.get("CMAKE_ARGS", ""))
        build = ["cmake", "--build", str(build_dir), "--target", ext.target]
        if not os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL"):
            build += ["--parallel", str(self.parallel or os.cpu_count() or 1)]

        for command in (configure, build):
            print("perseus:", " ".join(shlex.quote(c) for c in command), flush=True)
            subprocess.run(command, check=True)

        output_dir = build_dir / ext.output_subdir
        expected = output_dir / (ext.filename_prefix + sysconfig.get_config_var("EXT_SUFFIX"))
        built = expected if expected.exists() else None
        if built is None:
            candidates = sorted(output_dir.glob(ext.filename_prefix + "*.so"))
            if len(candidates) != 1:
                raise RuntimeError(f"CMake built no single {ext.filename_prefix}*.so in {output_dir}: {candidates}")
            built = candidates[0]
        destination = Path(self.get_ext_fullpath(ext.name))
        destination.parent.mkdir(parents=True, exist_ok=True)
        print(f"perseus: copying {built} -> {destination}", flush=True)
        shutil.copyfile(built, destination)


(ROOT / BUILD_BASE).mkdir(exist_ok=True)  # egg_info's directory must exist

setup(
    packages=["perseus"],
    package_dir={"perseus": "src/perseus/python/perseus"},
    ext_modules=[CMakeExtension("perseus._perseus", "perseus_python", "python/perseus", "_perseus")],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
    # Scratch files under build-pip/ (git ignores /build*/), none beside the sources.
    options={"build": {"build_base": BUILD_BASE}, "egg_info": {"egg_base": BUILD_BASE}},
)
