"""What the system provides outside a conda environment: the allow-lists of the linkage check.

As conda-build's ``missing_dso_whitelist`` defaults and this recipe's own entries: glibc's
libraries (conda-forge builds against a sysroot of them, ``c_stdlib_version``), the GPU driver's
libraries, macOS's /usr/lib and /System, Windows' system DLLs (conda-build's
``DEFAULT_WIN_WHITELIST``) and the API sets.
"""

from __future__ import annotations

import fnmatch
import os
import sys

# glob over the DT_NEEDED name -> why the system has it
LINUX: dict[str, str] = {
    "libc.so.6": "glibc",
    "libm.so.6": "glibc",
    "libdl.so.2": "glibc",
    "libpthread.so.0": "glibc",
    "librt.so.1": "glibc",
    "libutil.so.1": "glibc",
    "libresolv.so.2": "glibc",
    "libanl.so.1": "glibc",
    "ld-linux-x86-64.so.2": "glibc's dynamic loader",
    "ld-linux-aarch64.so.1": "glibc's dynamic loader",
    "ld64.so.2": "glibc's dynamic loader (ppc64le)",
    "libcuda.so.1": "the NVIDIA driver (meta.yaml's missing_dso_whitelist: */libcuda.so.*)",
}
# glob over the install name
OSX: dict[str, str] = {
    "/usr/lib/*": "macOS system library (dyld's shared cache)",
    "/System/Library/*": "macOS framework",
}
# glob over the lower-case DLL name
WIN: dict[str, str] = {
    **{
        name.lower(): "Windows system DLL (conda-build's DEFAULT_WIN_WHITELIST)"
        for name in (
            "ADVAPI32.dll",
            "bcrypt.dll",
            "COMCTL32.dll",
            "COMDLG32.dll",
            "CRYPT32.dll",
            "dbghelp.dll",
            "GDI32.dll",
            "IMM32.dll",
            "KERNEL32.dll",
            "NETAPI32.dll",
            "ole32.dll",
            "OLEAUT32.dll",
            "PSAPI.DLL",
            "RPCRT4.dll",
            "SHELL32.dll",
            "USER32.dll",
            "USERENV.dll",
            "WINHTTP.dll",
            "WS2_32.dll",
            "ntdll.dll",
            "msvcrt.dll",
        )
    },
    "api-ms-win-*.dll": "Windows API set (resolved by the loader, no file)",
    "ext-ms-*.dll": "Windows API set extension (resolved by the loader, no file)",
    "nvcuda.dll": "the NVIDIA driver (meta.yaml's missing_dso_whitelist: */nvcuda.dll)",
}


def system_reason(family: str, name: str) -> str | None:
    """Why ``name`` may stay outside the environment on ``family``; ``None`` if it may not."""
    table = {"linux": LINUX, "osx": OSX, "win": WIN}.get(family, {})
    key = name.lower() if family == "win" else name
    for pattern, reason in table.items():
        if fnmatch.fnmatchcase(key, pattern):
            return reason
    if family == "win" and sys.platform == "win32":
        system32 = os.path.join(os.environ.get("SYSTEMROOT", r"C:\Windows"), "System32", name)
        if os.path.isfile(system32):
            return "in the running Windows' System32"
    return None
