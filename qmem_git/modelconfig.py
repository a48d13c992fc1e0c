"""Where the optional model endpoint is configured: environment first, then a JSON config file.

Built once by ``settings.build_settings`` from the environment mapping the CLI hands over (only
``cli.py`` reads ``os.environ``). The config file is JSON, not TOML: ``tomllib`` is 3.11+ and the
package supports 3.10. It lives at ``$QMEM_CONFIG``, else ``$XDG_CONFIG_HOME/qmem-git/config.json``,
else ``~/.config/qmem-git/config.json``::

    {"llm": {"base_url": "https://dashscope.aliyuncs.com/compatible-mode/v1",
             "model": "qwen-plus", "api_key_env": "DASHSCOPE_API_KEY",
             "timeout": 30, "connect_timeout": 5, "max_retries": 2, "max_retry_wait": 10}}

A broken file never breaks a command (recall runs on every prompt): it reads as "no model" and
``problems`` says why, for ``doctor``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from qmem_git.core.paths import config_file
from qmem_git.regularfile import open_regular

ENV_BASE_URL = "QMEM_LLM_BASE_URL"
ENV_MODEL = "QMEM_LLM_MODEL"
ENV_API_KEY = "QMEM_LLM_API_KEY"
ENV_TIMEOUT = "QMEM_LLM_TIMEOUT"
FALLBACK_KEY_ENVS = ("DASHSCOPE_API_KEY", "OPENAI_API_KEY")

DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_READ_TIMEOUT = 30.0
DEFAULT_MAX_RETRIES = 2
DEFAULT_MAX_RETRY_WAIT = 10.0
MAX_RETRIES_CAP = 5
MAX_SECONDS = 3600.0  # any timeout or wait beyond an hour is a typo (or 1e999)
MAX_CONFIG_BYTES = 1024 * 1024


class ApiKey:
    """A bearer token that cannot leak by accident: ``str``/``repr`` show ``***`` only.

    Only the HTTP client calls :meth:`reveal`. Not a ``str`` subclass, so ``json.dumps`` or an
    f-string in a log line cannot print the value either.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "ApiKey('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ApiKey) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("ApiKey", self._value))

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError("an API key is not picklable")


@dataclass(frozen=True)
class ModelConfig:
    """An OpenAI-compatible chat-completions endpoint; ``api_key`` None for keyless (Ollama)."""

    base_url: str
    model: str
    api_key: ApiKey | None = field(default=None, repr=False, compare=False)
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    read_timeout: float = DEFAULT_READ_TIMEOUT
    max_retries: int = DEFAULT_MAX_RETRIES
    max_retry_wait: float = DEFAULT_MAX_RETRY_WAIT
    source: str = "environment"

    @property
    def endpoint(self) -> str:
        """The chat-completions URL: ``<base_url>/chat/completions``."""
        return self.base_url.rstrip("/") + "/chat/completions"


@dataclass(frozen=True)
class ModelConfigResult:
    """The configured endpoint (None when not configured) and what was wrong with the input."""

    config: ModelConfig | None
    problems: tuple[str, ...] = ()


def config_file_path(env: Mapping[str, str], home: str) -> str:
    """Where the config file is read from (see :func:`qmem_git.core.paths.config_file`)."""
    return config_file(env, home)


def load_model_config(env: Mapping[str, str], home: str) -> ModelConfigResult:
    """Read the config file (when there is one) and combine it with ``env``."""
    path = config_file_path(env, home)
    try:
        with open_regular(path) as handle:  # a FIFO or a device would hang every command
            data = handle.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        return parse_model_config(env, None, source=path)
    except OSError as exc:
        return parse_model_config(env, None, problems=(f"{path}: {exc.strerror or exc}",))
    if len(data) > MAX_CONFIG_BYTES:
        problem = f"{path}: larger than {MAX_CONFIG_BYTES} bytes, not read"
        return parse_model_config(env, None, problems=(problem,))
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        problem = f"{path}: not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        return parse_model_config(env, None, problems=(problem,))
    return parse_model_config(env, text, source=path)


def parse_model_config(
    env: Mapping[str, str],
    config_text: str | None,
    *,
    source: str = "config file",
    problems: tuple[str, ...] = (),
) -> ModelConfigResult:
    """Environment values win over the file's ``llm`` section, key by key."""
    section, found = _file_section(config_text, source)
    issues = [*problems, *found]
    base_url = env.get(ENV_BASE_URL) or _text(section, "base_url")
    model = env.get(ENV_MODEL) or _text(section, "model")
    if not base_url and not model:
        return ModelConfigResult(None, tuple(issues))
    if not base_url or not model:
        missing = ENV_BASE_URL if not base_url else ENV_MODEL
        issues.append(f"model endpoint half configured: {missing} (or llm.{_key(missing)}) unset")
        return ModelConfigResult(None, tuple(issues))
    if not base_url.startswith(("http://", "https://")):
        issues.append(f"base URL must start with http:// or https://, got {base_url[:40]!r}")
        return ModelConfigResult(None, tuple(issues))
    config = ModelConfig(
        base_url=base_url.rstrip("/"),
        model=model,
        api_key=_api_key(env, section),
        connect_timeout=_seconds(section, "connect_timeout", DEFAULT_CONNECT_TIMEOUT, issues),
        read_timeout=_read_timeout(env, section, issues),
        max_retries=_retries(section, issues),
        max_retry_wait=_number(section, "max_retry_wait", DEFAULT_MAX_RETRY_WAIT, issues),
        source="environment" if env.get(ENV_BASE_URL) else source,
    )
    return ModelConfigResult(config, tuple(issues))


def _file_section(text: str | None, source: str) -> tuple[Mapping[str, object], list[str]]:
    """The ``llm`` object of the config file; ``{}`` (and a problem) when it is unusable."""
    if text is None or not text.strip():
        return {}, []
    import json

    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return {}, [f"{source}: not valid JSON ({exc.msg} at line {exc.lineno})"]
    except RecursionError:
        return {}, [f"{source}: not valid JSON (nested too deeply)"]
    except ValueError as exc:  # a number with more digits than Python converts
        return {}, [f"{source}: not valid JSON ({exc})"]
    section = data.get("llm", {}) if isinstance(data, dict) else None
    if not isinstance(section, dict):
        return {}, [f'{source}: "llm" must be a JSON object']
    return section, []


def _api_key(env: Mapping[str, str], section: Mapping[str, object]) -> ApiKey | None:
    """QMEM_LLM_API_KEY, the file's ``api_key_env`` / ``api_key``, then the vendor variables."""
    named = _text(section, "api_key_env")
    candidates = [
        env.get(ENV_API_KEY),
        env.get(named) if named else None,
        _text(section, "api_key"),
    ]
    candidates += [env.get(name) for name in FALLBACK_KEY_ENVS]
    value = next((c.strip() for c in candidates if c and c.strip()), None)
    return ApiKey(value) if value else None


def _read_timeout(
    env: Mapping[str, str], section: Mapping[str, object], issues: list[str]
) -> float:
    raw = env.get(ENV_TIMEOUT)
    if raw:
        try:
            number = float(raw)
        except ValueError:
            issues.append(f"{ENV_TIMEOUT} is not a number: {raw[:20]!r}")
        else:
            value = _in_range(number, 0.0, MAX_SECONDS, low_allowed=False)
            if value is not None:
                return value
            issues.append(f"{ENV_TIMEOUT} must be more than 0 and at most {MAX_SECONDS:g} seconds")
    return _seconds(section, "timeout", DEFAULT_READ_TIMEOUT, issues)


def _text(section: Mapping[str, object], key: str) -> str:
    value = section.get(key)
    return value.strip() if isinstance(value, str) else ""


def _in_range(value: float, low: float, high: float, *, low_allowed: bool) -> float | None:
    """``value`` when it lies in ``[low, high]`` (``(low, high]`` unless ``low_allowed``).

    ``float('nan')``, ``inf`` (JSON ``1e999``, ``Infinity``) and out-of-range values are
    refused here, before they can reach ``int()``, ``time.sleep`` or a socket timeout.
    """
    if value != value or value > high or value < low or (value == low and not low_allowed):
        return None
    return float(value)


def _number(section: Mapping[str, object], key: str, default: float, issues: list[str]) -> float:
    """A wait in seconds: 0 to :data:`MAX_SECONDS`."""
    return _bounded(section, key, default, issues, positive=False)


def _seconds(section: Mapping[str, object], key: str, default: float, issues: list[str]) -> float:
    """A timeout: zero would make every request fail at once, so it must be positive."""
    return _bounded(section, key, default, issues, positive=True)


def _bounded(
    section: Mapping[str, object], key: str, default: float, issues: list[str], *, positive: bool
) -> float:
    value = section.get(key)
    if value is None:
        return default
    found = _json_number(value)
    checked = (
        None if found is None else _in_range(found, 0.0, MAX_SECONDS, low_allowed=not positive)
    )
    if checked is None:
        if positive:
            issues.append(f"llm.{key} must be more than 0 and at most {MAX_SECONDS:g} seconds")
        else:
            issues.append(f"llm.{key} must be a number from 0 to {MAX_SECONDS:g}")
        return default
    return checked


def _retries(section: Mapping[str, object], issues: list[str]) -> int:
    """A whole number of retries from 0; more than :data:`MAX_RETRIES_CAP` counts as the cap."""
    value = section.get("max_retries")
    if value is None:
        return DEFAULT_MAX_RETRIES
    found = _json_number(value)
    if found is None or found != found or found < 0 or not float(found).is_integer():
        issues.append("llm.max_retries must be a whole number from 0")
        return DEFAULT_MAX_RETRIES
    return int(min(found, MAX_RETRIES_CAP))  # a finite float here: min() keeps int() safe


def _json_number(value: object) -> float | None:
    """A JSON number as a float (True/False are not numbers); None for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:  # an int too large for a float
        return None


def _key(env_name: str) -> str:
    return "base_url" if env_name == ENV_BASE_URL else "model"
