"""Admission: may an image run in a Region, under the deployment's policy, and what let it in.

`admit` is the one decision: each image is resolved to the digest its tag names now (a tag that
moved is another build), then the evidence index is asked, per target Region, for passing matrix
evidence of that digest there. Found: `validated`, with the evidence id. Not found: under `off`
nothing was checked at all; under `warn` the image is let in (`warned`) with a warning for stderr;
under `enforce` it is refused (`UnvalidatedImageError`, one line naming the Region and the `gco
matrix run` that would validate it), unless an operator gave a reason (`--allow-unvalidated`),
kept in the entry with who and when (`allowed`).

`Admitter` is the hook the fenced writes call (`gco.endpoints.operations.AdmissionHook`): it knows
which command asks, so it checks what that command changes (deploy and update: every image in
every target; canary: the canary's image; regions: every image in the Regions that join) and keeps
the entries of what it does not change.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Literal

from gco.admission.errors import ImageResolveError, UnvalidatedImageError
from gco.admission.images import ImageResolver, ResolvedImage
from gco.endpoints import names
from gco.endpoints.admissions import (
    BY_MAX,
    CANARY,
    PRIMARY,
    REASON_MAX,
    Admissions,
    ImageAdmission,
    Policy,
    spec_images,
)
from gco.endpoints.errors import InvalidSpecError
from gco.endpoints.record import EndpointRecord
from gco.endpoints.spec import EndpointSpec
from gco.evidence.index import EvidenceIndex
from gco.evidence.record import now_iso

Command = Literal["deploy", "update", "canary", "regions", "rollout"]
VALIDATE_COMMAND = "gco matrix run SETTINGS --consent --evidence-bucket BUCKET"


@dataclass(frozen=True)
class Admission:
    """What `admit` decided: the entries per Region and role, and the warnings to print."""

    entries: Admissions
    warnings: list[str]


def check_reason(reason: str | None) -> str | None:
    """`--allow-unvalidated REASON`: plain text of 1 to 256 characters.

    Raises:
        InvalidSpecError: empty, too long, or holding a control character (exit 2).
    """
    if reason is None:
        return None
    if not reason.strip():
        raise InvalidSpecError("--allow-unvalidated", "give the reason the image runs unvalidated")
    return names.text(reason, "--allow-unvalidated", max_length=REASON_MAX)


def refusal(image: str, digest: str | None, region: str, others: list[str], index: bool) -> str:
    """The one line of a refusal: the Region, and the command that would validate the build there."""
    build = f"{image} ({digest})" if digest else image
    where = f"{region}" + (f" (and {', '.join(others)})" if others else "")
    found = "no passing matrix evidence" if index else "no evidence bucket to look in, so no evidence"
    name = image.partition("@")[0]
    head, colon, tag = name.rpartition(":")
    repository = head if colon and "/" not in tag else name  # a registry's port is not a tag
    pinned = f"{repository}@{digest}" if digest else image
    return (
        f"{build} has {found} in {where} (validation policy enforce): validate it with "
        f"`{VALIDATE_COMMAND}` (selected_region: {region}, the runtime's image: {pinned}), "
        "or pass --allow-unvalidated REASON"
    )


def admit(
    images: Mapping[str, str],
    regions: Collection[str],
    *,
    policy: Policy,
    resolver: ImageResolver,
    index: EvidenceIndex | None,
    reason: str | None = None,
    by: str = "unknown",
    now: Callable[[], str] = now_iso,
    resolved: dict[str, ResolvedImage] | None = None,
) -> Admission:
    """Decide each image (by role) in each Region; the public entry point (the rollout calls it too).

    Parameters:
        images: role (`primary`, `canary`) -> image reference.
        regions: the Regions the images are to run in.
        reason: the operator's `--allow-unvalidated` reason (lets an image without evidence in).
        resolved: a cache of references already resolved (one resolution per reference and call).

    Returns:
        The entries to write (none under `off`) and the warnings (under `warn`) for stderr.

    Raises:
        UnvalidatedImageError: under `enforce`, an image without passing evidence in a Region and no
            reason; nothing may be written.
        ImageResolveError: under `enforce` without a reason, a tag could not be resolved.
        EvidenceStoreError: the evidence index could not be read.
    """
    if policy == "off":
        return Admission({}, [])
    cache = {} if resolved is None else resolved
    entries: Admissions = {}
    warnings: list[str] = []
    refused: list[tuple[str, str | None, str]] = []
    stamp = now()
    for role, image in images.items():
        digest: str | None = None
        try:
            if image not in cache:
                cache[image] = resolver.resolve(image)
            digest = cache[image].digest
        except ImageResolveError as error:
            if policy == "enforce" and reason is None:
                raise
            warnings.append(f"warning: {error}; {image} is let in unchecked")
        for region in regions:
            evidence = index.find(region, digest) if index is not None and digest else None
            outcome = "validated" if evidence else ("allowed" if reason else "warned")
            if outcome == "warned" and policy == "enforce":
                refused.append((image, digest, region))
                continue
            if outcome == "warned":
                warnings.append(
                    f"warning: {image} ({digest or 'digest unknown'}) has no passing matrix evidence in "
                    f"{region}; deployed anyway (validation policy warn)"
                )
            entry = ImageAdmission(
                image=image,
                digest=digest,
                outcome=outcome,
                policy=policy,
                evidence_id=evidence,
                reason=reason if outcome == "allowed" else None,
                by=by[:BY_MAX],
                at=stamp,
            )
            entries.setdefault(region, {})[role] = entry
    if refused:
        image, digest, region = refused[0]
        others = list(dict.fromkeys(r for _, _, r in refused[1:] if r != region))
        raise UnvalidatedImageError(refusal(image, digest, region, others, index is not None))
    return Admission(entries, warnings)


@dataclass
class Admitter:
    """The admission hook of one command (`gco.endpoints.operations.AdmissionHook`)."""

    command: Command
    policy: Policy
    resolver: ImageResolver
    index: EvidenceIndex | None
    reason: str | None = None
    by: str = "unknown"
    now: Callable[[], str] = now_iso
    warnings: list[str] = field(default_factory=list)
    resolved: dict[str, ResolvedImage] = field(default_factory=dict)
    # Where the policy and the index come from, read at the first call (after the command's own read
    # of the record, so a missing endpoint or an unreachable table is named before the policy is read).
    source: Callable[[], tuple[Policy, EvidenceIndex | None]] | None = None

    def __call__(
        self, record: EndpointRecord | None, spec: EndpointSpec, targets: list[str]
    ) -> Admissions | None:
        """The admissions to write with `spec` and `targets` (None: leave the field as it is).

        Raises:
            UnvalidatedImageError, ImageResolveError, EvidenceStoreError: as `admit`.
            PolicyError: the policy, read at the first call, cannot be read.
        """
        if self.source is not None:
            self.policy, self.index = self.source()
            self.source = None
        kept: Admissions = dict(record.admissions) if record is not None else {}
        if self.policy == "off":
            return {} if kept else None  # nothing checked: no entry may outlive the image it named
        images = spec_images(spec)
        joined = [r for r in targets if record is None or r not in record.target_regions]
        checks: dict[Command, tuple[dict[str, str], list[str]]] = {
            "deploy": (images, targets),
            "update": (images, targets),
            "rollout": (images, targets),
            "canary": ({CANARY: images[CANARY]} if CANARY in images else {}, targets),
            "regions": (images, joined),
        }
        wanted, regions = checks[self.command]
        self.warnings.clear()
        fresh: Admissions = {}
        for roles, group in self._undecided(wanted, regions, kept).items():
            decided = admit(
                {role: wanted[role] for role in roles},
                group,
                policy=self.policy,
                resolver=self.resolver,
                index=self.index,
                reason=self.reason,
                by=self.by,
                now=self.now,
                resolved=self.resolved,
            )
            self.warnings.extend(decided.warnings)
            for region, entries in decided.entries.items():
                fresh.setdefault(region, {}).update(entries)
        out: Admissions = {}
        for region in targets:
            for role, image in images.items():
                entry = fresh.get(region, {}).get(role) or kept.get(region, {}).get(role)
                if entry is not None and entry.image == image:
                    out.setdefault(region, {})[role] = entry
        return out

    def _undecided(
        self, wanted: Mapping[str, str], regions: list[str], kept: Admissions
    ) -> dict[tuple[str, ...], list[str]]:
        """The roles to decide in each Region, grouped (roles -> Regions, in order): every wanted role
        but one whose kept entry still admits it, the same image whose tag still names the digest the
        entry was checked at (a change that keeps the image, a scale or an update of another field,
        asks for no new evidence or reason; a moved tag is another build and is decided again), and
        not an entry let in only under `warn` when the policy is now `enforce`."""
        groups: dict[tuple[str, ...], list[str]] = {}
        for region in regions:
            roles = tuple(
                role for role, image in wanted.items() if not self._still_admits(kept, region, role, image)
            )
            if roles:
                groups.setdefault(roles, []).append(region)
        return groups

    def _still_admits(self, kept: Admissions, region: str, role: str, image: str) -> bool:
        entry = kept.get(region, {}).get(role)
        if entry is None or entry.image != image or entry.digest is None:
            return False
        if entry.outcome == "warned" and self.policy == "enforce":
            return False
        try:
            if image not in self.resolved:
                self.resolved[image] = self.resolver.resolve(image)
        except ImageResolveError:
            return False  # decided again, where the resolution's failure is handled
        return self.resolved[image].digest == entry.digest


__all__ = ["PRIMARY", "Admission", "Admitter", "admit", "check_reason"]
