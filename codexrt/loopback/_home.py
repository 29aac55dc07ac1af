"""A throw-away ``CODEX_HOME`` that points the real ``codex`` at the loopback mock model.

Why each setting (research §1):

* a custom provider ``mock`` with ``wire_api = "responses"`` and ``requires_openai_auth = false``
  needs no account and sends no ``Authorization`` header;
* ``request_max_retries = 0`` / ``stream_max_retries = 0``: a failure is reported at once, and a
  test that counts model requests is not confused by retries;
* ``supports_websockets = false``: plain HTTP + SSE only, what the mock speaks;
* ``[analytics] enabled = false`` and ``[features] plugins = false``: without the latter every start
  runs ``git ls-remote https://github.com/openai/plugins.git`` — network we never want;
* an *unknown* model slug (``mock-model``) keeps the classic tool list (``exec_command`` …) and
  the plain request shape; catalog slugs switch codex to a different request form.

:func:`codex_env` builds the child's environment: ``CODEX_HOME`` set, and nothing from the
parent that could carry a credential or route traffic elsewhere (API keys, tokens, proxies,
other ``CODEX_*`` overrides).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

__all__ = ["make_codex_home", "codex_env", "config_toml", "SECRET_ENV_PATTERN"]

#: Environment variable names never passed to a test's codex child.
SECRET_ENV_PATTERN = re.compile(
    r"(^OPENAI_|^AZURE_|^ANTHROPIC_|^CODEX_|_API_KEY$|_KEY$|TOKEN|SECRET|PASSWORD|CREDENTIAL"
    r"|^AWS_|^GOOGLE_|^GCP_|^GITHUB_|^GH_|^(HTTP|HTTPS|ALL|NO|FTP)_PROXY$)",
    re.IGNORECASE,
)


#: codexrt's own "which CLI" variables: kept for discovery, never a credential.
_DISCOVERY_VARS = frozenset({"CODEX_BIN", "CODEX_PATH", "CODEX_CLI_PATH"})


def _toml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def config_toml(base_url: str, *, model: str = "mock-model", extra_toml: str = "") -> str:
    """The text of ``config.toml`` for a provider at ``base_url`` (``http://127.0.0.1:PORT/v1``)."""
    if not re.match(r"^http://(127\.0\.0\.1|localhost|\[::1\])(:\d+)?(/|$)", base_url):
        raise ValueError(f"the mock provider must be on loopback, got {base_url!r}")
    return (
        f"model = {_toml_str(model)}\n"
        'model_provider = "mock"\n'
        "\n"
        "[model_providers.mock]\n"
        'name = "mock"\n'
        f"base_url = {_toml_str(base_url)}\n"
        'wire_api = "responses"\n'
        "requires_openai_auth = false\n"
        "request_max_retries = 0\n"
        "stream_max_retries = 0\n"
        "stream_idle_timeout_ms = 300000\n"
        "supports_websockets = false\n"
        "\n"
        "[analytics]\n"
        "enabled = false\n"
        "\n"
        "[features]\n"
        "plugins = false\n"
        + (("\n" + extra_toml.strip() + "\n") if extra_toml.strip() else "")
    )


def make_codex_home(path: str | os.PathLike[str], base_url: str, *, model: str = "mock-model",
                    extra_toml: str = "") -> Path:
    """Create ``path`` (if needed) with a ``config.toml`` pointing at ``base_url``; return it.

    ``extra_toml`` is appended verbatim (after ``[features]``: start it with a table header
    such as ``[features]``-free keys only if you mean that table)."""
    home = Path(path)
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(config_toml(base_url, model=model, extra_toml=extra_toml), encoding="utf-8")
    return home


def codex_env(codex_home: str | os.PathLike[str], *, base: Mapping[str, str] | None = None,
              extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a codex child: ``base`` (default ``os.environ``) minus anything
    matching :data:`SECRET_ENV_PATTERN`, plus ``CODEX_HOME`` and loopback ``NO_PROXY``. The
    variables that name the CLI (``CODEX_BIN``, ``CODEX_PATH``, ``CODEX_CLI_PATH``) stay:
    codexrt's discovery reads them from this environment (they carry no credential)."""
    src = os.environ if base is None else base
    env = {k: v for k, v in src.items() if not SECRET_ENV_PATTERN.search(k) or k in _DISCOVERY_VARS}
    env["CODEX_HOME"] = str(Path(codex_home).resolve())
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost,::1"
    env.setdefault("RUST_LOG", "warn")
    if extra:
        env.update(extra)
    return env
