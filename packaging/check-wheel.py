"""Checks a memprints release wheel the way auditwheel would, before it ships.

The binary inside must run on every system its platform tag promises: its machine matches the
tag's architecture, it links only glibc's own libraries, and no symbol version it needs is newer
than the tag's glibc (2.17 for manylinux2014). That is stricter than manylinux, which also allows
libgcc_s and libstdc++: the zig-linked binary needs neither, so either one means the build went
wrong. It must also be stripped: no symbol table and no debug info.

usage: python check-wheel.py WHEEL
"""

import io
import re
import sys
import zipfile
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection

# The glibc of the old manylinux tags, which name no version.
LEGACY_GLIBC = {
    "manylinux1": (2, 5),
    "manylinux2010": (2, 12),
    "manylinux2014": (2, 17),
}
# The ELF machine of each architecture a wheel tag names.
ELF_MACHINE = {"x86_64": "EM_X86_64", "aarch64": "EM_AARCH64"}
# glibc's own libraries, which every manylinux system has; the binary may link nothing else.
GLIBC_LIBRARIES = {
    "libc.so.6",
    "libm.so.6",
    "libdl.so.2",
    "libpthread.so.0",
    "librt.so.1",
    "libutil.so.1",
    "ld-linux-x86-64.so.2",
    "ld-linux-aarch64.so.1",
}


def platform_glibc(tag: str) -> tuple[tuple[int, int], str]:
    """The glibc version and architecture one platform tag promises."""
    legacy = re.fullmatch(r"(manylinux1|manylinux2010|manylinux2014)_(\w+)", tag)
    if legacy:
        return LEGACY_GLIBC[legacy[1]], legacy[2]
    modern = re.fullmatch(r"manylinux_(\d+)_(\d+)_(\w+)", tag)
    if modern:
        return (int(modern[1]), int(modern[2])), modern[3]
    raise ValueError(f"platform tag {tag!r} is not a manylinux tag")


def glibc_version(name: str) -> tuple[int, int]:
    """(2, 17) for a symbol version like `GLIBC_2.17`; patch levels like 2.3.4 count as 2.3."""
    major, minor = name.removeprefix("GLIBC_").split(".")[:2]
    return int(major), int(minor)


def check(wheel: Path) -> str:
    """Checks the wheel and returns its one-line summary; raises ValueError on the first problem."""
    platform = wheel.name.removesuffix(".whl").split("-")[-1]
    promises = [platform_glibc(tag) for tag in platform.split(".")]
    # A wheel with several tags must keep the strictest promise (the oldest glibc).
    glibc, arch = min(promises)
    if arch not in ELF_MACHINE:
        raise ValueError(
            f"architecture {arch!r} of {platform} is not one memprints ships"
        )

    with zipfile.ZipFile(wheel) as archive:
        scripts = [
            n
            for n in archive.namelist()
            if re.fullmatch(r"[^/]+\.data/scripts/memprints", n)
        ]
        if len(scripts) != 1:
            raise ValueError(f"{wheel.name} holds no .data/scripts/memprints binary")
        binary = archive.read(scripts[0])

    elf = ELFFile(io.BytesIO(binary))
    if elf["e_machine"] != ELF_MACHINE[arch]:
        raise ValueError(f"the binary is {elf['e_machine']}, the tag promises {arch}")
    # Debug info is the .debug_* sections that are not loaded: .debug_gdb_scripts is loaded
    # (a few bytes naming gdb pretty-printers) and survives `strip`.
    unstripped = [
        section.name
        for section in elf.iter_sections()
        if section.name == ".symtab"
        or (
            section.name.startswith(".debug")
            and not section["sh_flags"] & SH_FLAGS.SHF_ALLOC
        )
    ]
    if unstripped:
        raise ValueError(f"the binary is not stripped: it has {', '.join(unstripped)}")

    dynamic = elf.get_section_by_name(".dynamic")
    tags = dynamic.iter_tags() if dynamic else []
    needed = sorted(tag.needed for tag in tags if tag.entry.d_tag == "DT_NEEDED")
    foreign = [library for library in needed if library not in GLIBC_LIBRARIES]
    if foreign:
        raise ValueError(
            f"the binary links {', '.join(foreign)}, not only glibc's own libraries"
        )

    versions = [
        aux.name
        for section in elf.iter_sections()
        if isinstance(section, GNUVerNeedSection)
        for _, auxiliaries in section.iter_versions()
        for aux in auxiliaries
    ]
    foreign = sorted({name for name in versions if not name.startswith("GLIBC_")})
    if foreign:
        raise ValueError(
            f"the binary needs symbol versions {', '.join(foreign)} beyond glibc"
        )
    newest = max(versions, key=glibc_version, default="no versioned symbol")
    if versions and glibc_version(newest) > glibc:
        raise ValueError(
            f"the binary needs {newest}, newer than the glibc {glibc[0]}.{glibc[1]} that {platform} promises"
        )

    return (
        f"{wheel.name}: {arch} binary of {len(binary) / 1e6:.1f} MB, stripped; "
        f"newest glibc symbol {newest} (tag allows {glibc[0]}.{glibc[1]}); "
        f"links {' '.join(needed) or 'nothing (static)'}"
    )


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: python check-wheel.py WHEEL", file=sys.stderr)
        return 2
    try:
        print(check(Path(sys.argv[1])))
    except (ValueError, OSError, zipfile.BadZipFile, ELFError) as error:
        print(f"check-wheel: {sys.argv[1]}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
