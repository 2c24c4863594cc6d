"""The one report of a version-bump check: findings in sections, one line each.

A finding is ``ok`` (checked, nothing to do), ``info`` (worth reading, nothing breaks) or
``action`` (a person must change the recipe, the spec, a patch or the tests before the bump
builds). The exit status is 1 when any finding is an action, 0 otherwise.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import Enum

# The order the sections are printed in: what was checked, then what follows from it.
SECTIONS = (
    "wheels",
    "release candidate",
    "python",
    "build backend",
    "dependencies",
    "listings",
    "patches",
    "split",
    "source",
)


class Level(str, Enum):
    OK = "ok"
    INFO = "info"
    ACTION = "action"


# Fixed width, so the findings line up; an action is in capitals, to stand out.
_TAGS = {Level.OK: "ok    ", Level.INFO: "info  ", Level.ACTION: "ACTION"}


@dataclass(frozen=True)
class Finding:
    section: str
    level: Level
    text: str


@dataclass
class Report:
    title: str
    findings: list[Finding] = field(default_factory=list)

    def add(self, section: str, level: Level, text: str) -> None:
        if section not in SECTIONS:
            raise ValueError(f"unknown report section {section!r}")
        self.findings.append(Finding(section, level, text))

    def extend(self, findings: list[Finding]) -> None:
        for finding in findings:
            self.add(finding.section, finding.level, finding.text)

    @property
    def actions(self) -> list[Finding]:
        return [f for f in self.findings if f.level is Level.ACTION]

    @property
    def exit_code(self) -> int:
        return 1 if self.actions else 0

    def summary(self) -> str:
        count = len(self.actions)
        if count:
            return f"{count} finding(s) need a person (exit 1)"
        return "nothing needs a person (exit 0)"

    def text(self) -> str:
        lines = [self.title]
        for section in SECTIONS:
            found = [f for f in self.findings if f.section == section]
            if found:
                lines.append(f"== {section} ==")
                lines += [f"  {_TAGS[f.level]} {f.text}" for f in found]
        lines.append(self.summary())
        return "\n".join(lines)

    def json(self) -> str:
        findings = [dict(asdict(f), level=f.level.value) for f in self.findings]
        data = {"title": self.title, "exit_code": self.exit_code, "findings": findings}
        return json.dumps(data, indent=2)
