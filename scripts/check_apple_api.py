#!/usr/bin/env python3
"""Checks the Metal driver's Objective-C++ against Apple's own API declarations.

The driver (backend/runtime/metal/*.mm) compiles on Linux only against the
declarations in tests/apple_syntax/, written here from Apple's documentation, so a
wrong selector or type that those declarations share would pass. Apple publishes
metal-cpp, a C++ interface to Metal whose headers list every selector
(_MTL_PRIVATE_SEL / _NS_PRIVATE_SEL) with the C++ method that sends it and that
method's parameter and return types. This script:

  1. fetches metal-cpp at check time from the mlx-metal wheel on PyPI (never
     vendored): the current release, and the last one built from the macOS 15 SDK;
  2. has clang dump the driver's AST (parsed against tests/apple_syntax/) and
     collects every Objective-C message it sends: selector, receiver class,
     argument and result types;
  3. fails when a selector does not exist in metal-cpp, is not a method of the
     receiver's class (or a base class), takes other argument types or returns
     another type, or is newer than the minimum macOS of the build (14.0, from
     CMakeLists.txt) without an `if (@available(macOS N, *))` guard around it.

Newer than macOS 14: selectors absent from the macOS 15 metal-cpp are macOS 26
APIs; macOS 15 APIs cannot be told apart from macOS 14 ones by metal-cpp (no
macOS 14 release of it is on PyPI), so those the driver may touch are listed in
MACOS15_SELECTORS below, from Apple's documentation.

Usage: check_apple_api.py [--metal-cpp DIR] [--metal-cpp-macos15 DIR]
(the directories holding Metal/ and Foundation/; fetched when not given).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CURRENT_WHEEL = "mlx-metal==0.32.4"  # metal-cpp for macOS 26
MACOS15_WHEEL = "mlx-metal==0.26.5"  # metal-cpp for macOS 15 (the last before 26)

# Selectors introduced in macOS 15 (Apple's documentation), which metal-cpp cannot
# date: the driver must guard them with @available(macOS 15, *).
MACOS15_SELECTORS = {
    "setMathMode:": (15, 0),
    "mathMode": (15, 0),
    "setMathFloatingPointFunctions:": (15, 0),
    "mathFloatingPointFunctions": (15, 0),
    "newResidencySetWithDescriptor:error:": (15, 0),
    "newLogStateWithDescriptor:error:": (15, 0),
}

# Messages every Objective-C object answers (NSObject), checked by name only.
NSOBJECT_SELECTORS = {"alloc", "init", "new", "retain", "release", "autorelease", "class", "description"}
# Foundation messages outside metal-cpp's subset of Foundation: their declarations in
# tests/apple_syntax/Foundation are the only check (they are not Metal's API).
FOUNDATION_ONLY = {"stringWithUTF8String:", "containsObject:"}


def fail(msg):
    print(f"check_apple_api: {msg}", file=sys.stderr)
    sys.exit(1)


def fetch_metal_cpp(requirement, workdir):
    dest = Path(workdir) / requirement.replace("==", "-")
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
           "--platform", "macosx_14_0_arm64", requirement, "-d", str(dest)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    wheels = list(dest.glob("*.whl"))
    if r.returncode != 0 or not wheels:
        fail(f"could not download {requirement} from PyPI (metal-cpp comes from it):\n{r.stderr}")
    with zipfile.ZipFile(wheels[0]) as z:
        members = [m for m in z.namelist() if "/metal_cpp/" in m]
        z.extractall(dest, members)
    found = list(dest.glob("**/metal_cpp/Metal"))
    if not found:
        fail(f"{wheels[0].name} holds no metal_cpp/Metal headers")
    return found[0].parent


# ---- metal-cpp ------------------------------------------------------------------

def normalize_cpp_type(t):
    """A metal-cpp type spelled as this script compares types: 'MTL::Device*'."""
    t = " ".join(t.replace("class ", "").split())
    t = t.replace(" *", "*").replace("* ", "*").replace(" &", "&")
    t = re.sub(r"\bconst\s+(?=(MTL|NS|MTL4|CA)::)", "", t)  # const NS::String* == NSString*
    # metal-cpp spells out-parameters of autoreleased objects with a typedef.
    t = re.sub(r"\b(MTL|NS)::Autoreleased(\w+)\*", r"\1::\2**", t)
    if "(^" in t or "Function" in t and t.endswith("Function") or t.endswith("Block"):
        return "block"
    if "*" not in t and t.startswith("const "):
        t = t[len("const "):]  # a by-value parameter's const says nothing to the caller
    return t


def split_params(params):
    parts, depth, cur = [], 0, ""
    for c in params:
        depth += {"(": 1, "<": 1, ")": -1, ">": -1}.get(c, 0)
        if c == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += c
    return parts + [cur]


class MetalCpp:
    def __init__(self, root):
        self.selectors = {}  # accessor -> selector string
        self.methods = {}    # selector -> list of (class, return type, [param types])
        self.bases = {}      # class -> [base classes]
        for hpp in sorted(root.glob("*/*.hpp")):
            text = hpp.read_text(errors="replace")
            for acc, sel in re.findall(r"_(?:MTL|NS|CA)_PRIVATE_DEF_SEL\(\s*(\w+)\s*,\s*\"([^\"]+)\"\s*\)", text):
                self.selectors[acc] = sel
            ns = {"Metal": "MTL", "Foundation": "NS", "QuartzCore": "CA"}.get(hpp.parent.name, hpp.parent.name)
            for cls, bases in re.findall(r"^class (\w+)\s*:\s*public ([^\n{]+)", text, re.M):
                inner = re.findall(r"<([^>]*)>", bases)
                names = []
                for group in inner:
                    names += [b.strip() for b in group.split(",")[1:]]
                names += [b.strip() for b in re.findall(r"(?:,\s*public\s+)([\w:]+)", bases)]
                self.bases[f"{ns}::{cls}"] = [b if "::" in b else f"{ns}::{b}" for b in names if b]
        for hpp in sorted(root.glob("*/*.hpp")):
            text = hpp.read_text(errors="replace")
            for m in re.finditer(
                    r"_(?:MTL|NS|CA)_INLINE\s+(?:static\s+)?([^\n(]*?)\s*\b((?:MTL|NS|CA|MTL4)::\w+)::(\w+)\(([^)]*)\)[^{]*\{(.*?)\n\}",
                    text, re.S):
                ret, cls, _method, params, body = m.groups()
                sel = re.search(r"_(?:MTL|NS|CA)_PRIVATE_SEL\((\w+)\)", body)
                if not sel:
                    continue
                selector = self.selectors.get(sel.group(1))
                if not selector:
                    continue
                types = []
                for p in filter(None, (x.strip() for x in split_params(params))):
                    p = re.sub(r"\s*=.*$", "", p)
                    types.append(normalize_cpp_type(re.sub(r"\s*\b\w+$", "", p)))
                self.methods.setdefault(selector, []).append((cls, normalize_cpp_type(ret), types))

    def lineage(self, cls):
        seen, todo = [], [cls]
        while todo:
            c = todo.pop()
            if c not in seen:
                seen.append(c)
                todo += self.bases.get(c, [])
        return seen


# ---- the driver's messages ------------------------------------------------------

OBJC_TO_CPP = {
    "NSUInteger": "NS::UInteger", "unsigned long": "NS::UInteger", "NSInteger": "NS::Integer",
    "long": "NS::Integer", "BOOL": "bool", "_Bool": "bool", "bool": "bool", "signed char": "bool",
    "void": "void", "const void*": "const void*", "void*": "void*", "uint64_t": "uint64_t",
    "unsigned long long": "uint64_t", "float": "float", "double": "double",
    "NSString*": "NS::String*", "NSError**": "NS::Error**", "NSError*": "NS::Error*",
    "NSRange": "NS::Range", "NSTimeInterval": "NS::TimeInterval", "dispatch_data_t": "dispatch_data_t",
    "dispatch_queue_t": "dispatch_queue_t", "id": "NS::Object*", "instancetype": "instancetype",
}


def objc_to_cpp(t):
    """An Objective-C type from clang's AST as the metal-cpp type it corresponds to."""
    t = re.sub(r"\b(__strong|__autoreleasing|__unsafe_unretained|__weak|_Nullable|_Nonnull|__kindof)\b", "", t)
    t = " ".join(t.split()).replace(" *", "*")
    if t in OBJC_TO_CPP:
        return OBJC_TO_CPP[t]
    m = re.fullmatch(r"id<(\w+)>(\**)", t)
    if m:
        return cls_name(m.group(1)) + "*" + m.group(2)
    m = re.fullmatch(r"NS(Array|Dictionary)<.*>\*", t)
    if m:
        return f"NS::{m.group(1)}*"
    m = re.fullmatch(r"(MTL|NS)(\w+)(\**)", t)
    if m:
        return f"{m.group(1)}::{m.group(2)}{m.group(3)}"
    m = re.fullmatch(r"void \(\^\)\((.*)\)", t)
    if m:
        return "block"
    return t


def cls_name(objc):
    m = re.fullmatch(r"(MTL|NS|CA)(\w+)", objc)
    return f"{m.group(1)}::{m.group(2)}" if m else objc


def receiver_class(t):
    t = re.sub(r"\b(__strong|__autoreleasing|const)\b", "", t).replace(" ", "")
    m = re.fullmatch(r"id<(\w+)>", t) or re.fullmatch(r"(\w+)\*", t) or re.fullmatch(r"(\w+)", t)
    return cls_name(m.group(1)) if m else t


def availability_guards(path):
    """(first line, last line, version) of each `if (@available(macOS X, *)) { ... }`."""
    text = path.read_text()
    guards = []
    for m in re.finditer(r"if\s*\(\s*@available\(\s*macOS\s+(\d+)(?:\.(\d+))?", text):
        brace = text.find("{", m.end())
        depth, i = 0, brace
        while i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                break
            i += 1
        first = text.count("\n", 0, brace) + 1
        last = text.count("\n", 0, i) + 1
        guards.append((first, last, (int(m.group(1)), int(m.group(2) or 0))))
    return guards


def messages(ast, path):
    """(selector, receiver class, [arg types], result type, file, line) per send."""
    out = []
    state = {"line": 0, "file": str(path)}  # clang's JSON omits what did not change

    def seen(loc):
        loc = loc.get("expansionLoc", loc)
        if "file" in loc:
            state["file"] = loc["file"]
        if "line" in loc:
            state["line"] = loc["line"]

    def walk(n):
        if not isinstance(n, dict):
            return
        seen(n.get("loc") or {})
        where = (state["file"], state["line"])
        rng = n.get("range") or {}
        seen(rng.get("begin") or {})
        seen(rng.get("end") or {})
        inner = n.get("inner", [])
        if n.get("kind") == "ObjCMessageExpr":
            sel = n["selector"]
            args = inner[1:] if n.get("receiverKind") == "instance" else inner
            if n.get("receiverKind") == "class":
                recv = cls_name(n["classType"]["qualType"])
            else:
                recv = receiver_class(inner[0]["type"]["qualType"]) if inner else "?"
            arg_types = [a["type"].get("desugaredQualType", a["type"].get("qualType", "?"))
                         for a in args[: sel.count(":")]]
            result = n["type"].get("desugaredQualType", n["type"]["qualType"])
            out.append((sel, recv, arg_types, result, where[0], where[1]))
        for c in inner:
            walk(c)

    walk(ast)
    return out


def driver_ast(mm):
    flags = ["-fsyntax-only", "-x", "objective-c++", "-std=c++17", "-fobjc-arc", "-fblocks",
             "-fobjc-runtime=macosx-14.0", "-isystem", str(ROOT / "tests/apple_syntax"),
             "-I", str(ROOT / "backend/runtime/include"), "-I", str(ROOT / "backend/runtime/metal"),
             "-DMETALX_HAVE_METAL=1", "-Xclang", "-ast-dump=json"]
    clang = os.environ.get("CLANG", "clang++")
    r = subprocess.run([clang, *flags, str(mm)], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"clang could not parse {mm}:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout)


def minimum_macos():
    text = (ROOT / "CMakeLists.txt").read_text()
    m = re.search(r'CMAKE_OSX_DEPLOYMENT_TARGET\s+"(\d+)\.(\d+)"', text)
    if not m:
        fail("CMakeLists.txt declares no CMAKE_OSX_DEPLOYMENT_TARGET")
    return (int(m.group(1)), int(m.group(2)))


# Scalar types by what the ABI passes: NSUInteger and uint64_t are both 64-bit
# unsigned on every Mac metalx runs on, so the driver may use either for the other.
ABI_CLASS = {
    "NS::UInteger": "u64", "uint64_t": "u64", "size_t": "u64", "unsigned long": "u64",
    "unsigned long long": "u64", "NS::Integer": "i64", "int64_t": "i64", "long": "i64",
    "long long": "i64", "uint8_t": "u8", "unsigned char": "u8", "uint32_t": "u32",
    "unsigned int": "u32", "int32_t": "i32", "int": "i32", "double": "f64",
    "CFTimeInterval": "f64", "NS::TimeInterval": "f64", "_NSRange": "NS::Range",
    "NSObject<OS_dispatch_queue>*": "dispatch_queue_t", "NSObject<OS_dispatch_data>*": "dispatch_data_t",
}


def types_match(objc, cpp):
    if cpp == "block" or objc == "block":
        return True  # metal-cpp takes std::function/blocks through its own typedefs
    objc, cpp = ABI_CLASS.get(objc, objc), ABI_CLASS.get(cpp, cpp)
    if objc == cpp or (objc == "void*" and cpp == "const void*"):
        return True
    # metal-cpp returns `instancetype` methods (init) as the class; NS::Object* for id.
    return cpp.endswith("*") and objc == "NS::Object*"


def check(current, macos15, sources):
    minimum = minimum_macos()
    problems, checked = [], 0
    for mm in sources:
        rel = mm.relative_to(ROOT)
        guards = {}
        for sel, recv, args, result, file, line in messages(driver_ast(mm), mm):
            if not file.startswith(str(ROOT / "backend")):
                continue  # the stand-in declarations' own code
            checked += 1
            path = Path(file)
            if path not in guards:
                guards[path] = availability_guards(path)
            guard = max([g[2] for g in guards[path] if g[0] <= line <= g[1]], default=(0, 0))
            where = f"{path.relative_to(ROOT)}:{line}: [{recv} {sel}]"
            if sel in NSOBJECT_SELECTORS or sel in FOUNDATION_ONLY:
                continue
            decls = current.methods.get(sel)
            if not decls:
                problems.append(f"{where}: metal-cpp has no selector '{sel}'")
                continue
            lineage = current.lineage(recv)
            own = [d for d in decls if d[0] in lineage]
            if not own:
                problems.append(f"{where}: '{sel}' is not a method of {recv} in metal-cpp "
                                f"(it is of {', '.join(sorted({d[0] for d in decls}))})")
                continue
            want = [objc_to_cpp(a) for a in args]
            if not any(len(d[2]) == len(want) and all(types_match(w, p) for w, p in zip(want, d[2])) for d in own):
                sigs = "; ".join(f"({', '.join(d[2])})" for d in own)
                problems.append(f"{where}: arguments ({', '.join(want)}) do not match metal-cpp's {sigs}")
                continue
            ret = objc_to_cpp(result)
            if not any(types_match(ret, d[1]) or d[1] in ("void",) and ret == "void" for d in own):
                problems.append(f"{where}: returns {ret}, metal-cpp's returns {own[0][1]}")
            introduced = MACOS15_SELECTORS.get(sel)
            if sel not in macos15.methods:
                introduced = (26, 0)
            if introduced and introduced > minimum and guard < introduced:
                problems.append(f"{where}: needs macOS {introduced[0]}.{introduced[1]} (the build's minimum is "
                                f"{minimum[0]}.{minimum[1]}): guard it with if (@available(macOS "
                                f"{introduced[0]}.{introduced[1]}, *))")
    return checked, problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--metal-cpp", type=Path)
    ap.add_argument("--metal-cpp-macos15", type=Path)
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="metal-cpp-") as tmp:
        current = MetalCpp(opts.metal_cpp or fetch_metal_cpp(CURRENT_WHEEL, tmp))
        macos15 = MetalCpp(opts.metal_cpp_macos15 or fetch_metal_cpp(MACOS15_WHEEL, tmp))
    if len(current.methods) < 500:
        fail(f"metal-cpp parsed to only {len(current.methods)} selectors: its layout changed?")
    sources = sorted((ROOT / "backend/runtime/metal").glob("*.mm"))
    checked, problems = check(current, macos15, sources)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        fail(f"{len(problems)} of {checked} Objective-C messages disagree with Apple's metal-cpp")
    print(f"check_apple_api: {checked} Objective-C messages in {len(sources)} files match metal-cpp "
          f"({len(current.methods)} selectors; minimum macOS {'.'.join(map(str, minimum_macos()))})")


if __name__ == "__main__":
    main()
