"""Turn settings and their wire shapes (R-WIRE-11, R-SET-1, R-SET-4).

One :class:`Settings` value, three wire shapes — never one sent where another is expected:

* ``thread/start`` / ``thread/resume``: ``sandbox`` is a kebab-case string (``workspace-write``);
* ``turn/start`` / ``thread/settings/update``: ``sandboxPolicy`` is an object whose ``type`` is
  camelCase (``{"type": "workspaceWrite"}``);
* collaboration-mode settings keep the native snake_case keys (passed through as given).

Choosing a plan/collaboration mode or an approval policy never rewrites the sandbox (R-SET-4).
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from codexrt._sansio._convert import to_wire, wire
from codexrt._sansio._errors import ConfigError

__all__ = ["Settings", "SANDBOX_MODES", "APPROVAL_POLICIES"]

SANDBOX_MODES = {
    "read-only": "readOnly",
    "workspace-write": "workspaceWrite",
    "danger-full-access": "dangerFullAccess",
}
APPROVAL_POLICIES = frozenset({"untrusted", "on-failure", "on-request", "never"})

#: The values a type checker accepts; the validators below hold them at run time too.
ApprovalPolicy = Literal["untrusted", "on-failure", "on-request", "never"]
SandboxMode = Literal["read-only", "workspace-write", "danger-full-access"]
ReasoningSummary = Literal["auto", "concise", "detailed", "none"]
Personality = Literal["none", "friendly", "pragmatic"]


def _check_sandbox(_inst: Any, _attr: Any, value: str | None) -> None:
    if value is not None and value not in SANDBOX_MODES:
        raise ConfigError(
            f"sandbox must be one of {sorted(SANDBOX_MODES)}, not {value!r}",
            details={"field": "sandbox"},
        )


def _check_approval(_inst: Any, _attr: Any, value: str | None) -> None:
    if value is not None and value not in APPROVAL_POLICIES:
        raise ConfigError(
            f"approval_policy must be one of {sorted(APPROVAL_POLICIES)}, not {value!r}",
            details={"field": "approvalPolicy"},
        )


@wire(omit_none=True)
@attrs.frozen
class Settings:
    """Desired per-turn settings. ``None`` means "leave the server's value alone"."""

    model: str | None = None
    effort: str | None = None
    approval_policy: ApprovalPolicy | None = attrs.field(default=None, validator=_check_approval)
    sandbox: SandboxMode | None = attrs.field(default=None, validator=_check_sandbox)
    developer_instructions: str | None = None
    collaboration_mode: dict[str, Any] | None = None
    cwd: str | None = None
    summary: ReasoningSummary | None = None
    personality: Personality | None = None

    @classmethod
    def from_wire(cls, data: dict[str, Any] | None) -> "Settings":
        """From the camelCase dict hosts send (``codexrt serve``). Unknown keys are an error."""
        data = dict(data or {})
        mapping = {
            "model": "model",
            "effort": "effort",
            "approvalPolicy": "approval_policy",
            "sandbox": "sandbox",
            "sandboxMode": "sandbox",  # the legacy sandbox-mode setter stays accepted (R-SET-4)
            "developerInstructions": "developer_instructions",
            "collaborationMode": "collaboration_mode",
            "cwd": "cwd",
            "summary": "summary",
            "personality": "personality",
        }
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key not in mapping:
                raise ConfigError(f"unknown setting {key!r}", details={"field": key})
            if value is not None and key != "collaborationMode" and not isinstance(value, str):
                raise ConfigError(f"setting {key!r} must be a string", details={"field": key})
            if key == "collaborationMode" and value is not None and not isinstance(value, dict):
                raise ConfigError("collaborationMode must be an object", details={"field": key})
            kwargs[mapping[key]] = value
        return cls(**kwargs)

    def merged(self, other: "Settings") -> "Settings":
        """``other``'s non-None fields over ours."""
        changes = {k: v for k, v in attrs.asdict(other, recurse=False).items() if v is not None}
        return attrs.evolve(self, **changes)

    def sandbox_policy(self) -> dict[str, Any] | None:
        if self.sandbox is None:
            return None
        return {"type": SANDBOX_MODES[self.sandbox]}

    def thread_start_params(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.model is not None:
            out["model"] = self.model
        if self.cwd is not None:
            out["cwd"] = self.cwd
        if self.approval_policy is not None:
            out["approvalPolicy"] = self.approval_policy
        if self.sandbox is not None:
            out["sandbox"] = self.sandbox  # kebab-case string here (R-WIRE-11)
        if self.developer_instructions is not None:
            out["developerInstructions"] = self.developer_instructions
        if self.personality is not None:
            out["personality"] = self.personality
        return out

    def turn_params(self) -> dict[str, Any]:
        """Fields for ``turn/start`` and ``thread/settings/update``."""
        out: dict[str, Any] = {}
        if self.model is not None:
            out["model"] = self.model
        if self.effort is not None:
            out["effort"] = self.effort
        if self.cwd is not None:
            out["cwd"] = self.cwd
        if self.approval_policy is not None:
            out["approvalPolicy"] = self.approval_policy
        policy = self.sandbox_policy()
        if policy is not None:
            out["sandboxPolicy"] = policy  # camelCase object here (R-WIRE-11)
        if self.collaboration_mode is not None:
            out["collaborationMode"] = self.collaboration_mode
        if self.summary is not None:
            out["summary"] = self.summary
        if self.personality is not None:
            out["personality"] = self.personality
        return out

    def to_wire(self) -> dict[str, Any]:
        """The camelCase dict of the set fields (the converter in ``_convert.py``)."""
        return to_wire(self)
