"""The Python package's ctypes mirror of the public API
(python/zeus_pipe/_lib.py: Field, Batch, RunInfo and the constants) has the
layout and the values of pipeline/include/zeus_pipe.h as the compiler sees
them, the API version included: zp-abi-layout (tests/abi_layout.c, built
against the header alone) prints every ZP_CLIENT_* constant and each public
struct's size, alignment and fields' offsets and sizes; this test holds the
ctypes structures' Field.offset, field sizes, ctypes.sizeof and
ctypes.alignment against them, and the listing itself against the header's
text (every constant and every member the header declares, in order), so
that a field moved, added, retyped or forgotten on either side fails.
Stdlib only: _lib.py is loaded from its file, without the package's numpy
and torch."""
import ctypes
import importlib.util
import json
import os
import re
import subprocess
import zp

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
HEADER = os.path.join(ROOT, "pipeline", "include", "zeus_pipe.h")
MIRROR = os.path.join(ROOT, "python", "zeus_pipe", "_lib.py")
LAYOUT = os.path.join(os.path.dirname(os.path.abspath(zp.BIN)), "zp-abi-layout")

# the header's structs and the _lib.py classes that mirror them
STRUCTS = {"zp_client_field_t": "Field", "zp_client_batch_t": "Batch", "zp_client_run_t": "RunInfo"}
# ZP_CLIENT_<X> element types and their names in _lib.DTYPES
DTYPE_NAMES = {"F32": "float32", "U8": "uint8", "I8": "int8", "I16": "int16", "I32": "int32",
               "I64": "int64", "F16": "float16", "BF16": "bfloat16", "F64": "float64"}
# constants the package has no need of, and why
UNMIRRORED = {"ITEM_TUPLE": "the package tells a dict Dataset by ITEM_DICT, a tuple otherwise"}
ERROR = re.compile(r"E[A-Z]+")  # ZP_CLIENT_E*: the package reports them through zp_client_strerror


def c_layout():
    """What zp-abi-layout prints: {"constants": {name: value}, "structs": {name:
    {"size", "align", "fields": [[name, offset, size], ...]}}}."""
    p = subprocess.run([LAYOUT], capture_output=True, text=True, timeout=30)
    zp.check(p.returncode == 0, "%s: exit %d\n%s" % (LAYOUT, p.returncode, p.stderr))
    return json.loads(p.stdout)


def header_declarations():
    """What the header's text declares: the ZP_CLIENT_* names given a value (an
    enumerator or a #define), and each typedef'd struct's member names in order."""
    with open(HEADER) as f:
        code = re.sub(r"/\*.*?\*/|//[^\n]*", " ", f.read(), flags=re.S)
    constants = re.findall(r"#define\s+(ZP_CLIENT_\w+)\s+\S", code)
    for body in re.findall(r"\benum\s*\{(.*?)\}", code, flags=re.S):
        constants += [re.match(r"\s*(\w+)", e).group(1) for e in body.split(",") if e.strip()]
    structs = {}
    for body, name in re.findall(r"typedef\s+struct\s*\{(.*?)\}\s*(\w+)\s*;", code, flags=re.S):
        members = []
        for decl in filter(str.strip, body.split(";")):
            first, *more = decl.split(",")  # `int64_t c, h, w`: the type, then declarators
            members.append(re.search(r"(\w+)\s*(\[[^\]]*\])?\s*$", first).group(1))
            members += [re.search(r"(\w+)", d.replace("*", " ")).group(1) for d in more]
        structs[name] = members
    return constants, structs


def mirror():
    """python/zeus_pipe/_lib.py, loaded from its file."""
    spec = importlib.util.spec_from_file_location("zeus_pipe_lib_mirror", MIRROR)
    lib = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lib)
    return lib


def layout_problems(name, cls, c, members):
    """How ctypes structure `cls` differs from C struct `name` (c: its layout from
    zp-abi-layout; members: its member names in the header's order): a list of
    sentences, empty when they agree."""
    bad = []
    mine = [f[0] for f in cls._fields_]
    if mine != members:
        bad.append("%s: the fields %s, the header's %s" % (cls.__name__, mine, members))
    for field, offset, size in c["fields"]:
        got = cls.__dict__.get(field)  # ctypes' field descriptor: offset, size
        if got is None:
            bad.append("%s.%s: no such field (%s has it at offset %d)" % (cls.__name__, field, name,
                                                                          offset))
        elif (got.offset, got.size) != (offset, size):
            bad.append("%s.%s: offset %d, size %d; %s.%s: offset %d, size %d" % (
                cls.__name__, field, got.offset, got.size, name, field, offset, size))
    if ctypes.sizeof(cls) != c["size"] or ctypes.alignment(cls) != c["align"]:
        bad.append("%s: sizeof %d, alignment %d; %s: sizeof %d, alignment %d" % (
            cls.__name__, ctypes.sizeof(cls), ctypes.alignment(cls), name, c["size"], c["align"]))
    return bad


def the_c_listing_has_every_constant_and_member_the_header_declares():
    c = c_layout()
    constants, structs = header_declarations()
    zp.check(sorted(c["constants"]) == sorted(constants),
             "zp-abi-layout's constants differ from the header's: missing %s, extra %s "
             "(tests/abi_layout.c lists them)" % (sorted(set(constants) - set(c["constants"])),
                                                  sorted(set(c["constants"]) - set(constants))))
    zp.check(sorted(c["structs"]) == sorted(structs),
             "zp-abi-layout's structs %s, the header's %s" % (sorted(c["structs"]), sorted(structs)))
    for name, members in structs.items():
        listed = [f[0] for f in c["structs"][name]["fields"]]
        zp.check(listed == members, "%s: zp-abi-layout lists %s, the header declares %s "
                 "(tests/abi_layout.c lists them)" % (name, listed, members))


def the_ctypes_structs_have_the_c_layout():
    c, lib = c_layout(), mirror()
    _, structs = header_declarations()
    zp.check(set(structs) <= set(STRUCTS), "the header's structs %s have no ctypes mirror in "
             "python/zeus_pipe/_lib.py (or none named in test_abi.py's STRUCTS)"
             % sorted(set(structs) - set(STRUCTS)))
    bad = []
    for name, members in structs.items():
        bad += layout_problems(name, getattr(lib, STRUCTS[name]), c["structs"][name], members)
    zp.check(not bad, "python/zeus_pipe/_lib.py's ctypes structs differ from zeus_pipe.h:\n  " +
             "\n  ".join(bad))


def the_package_constants_have_the_c_values():
    c, lib = c_layout(), mirror()
    bad = []
    for full, value in c["constants"].items():
        name = full[len("ZP_CLIENT_"):]
        mirrored = False
        if hasattr(lib, name):
            mirrored = True
            if getattr(lib, name) != value:
                bad.append("%s is %r, %s is %r" % (name, getattr(lib, name), full, value))
        if name in DTYPE_NAMES:
            mirrored = True
            if lib.DTYPES.get(value) != DTYPE_NAMES[name]:
                bad.append("DTYPES[%d] is %r, want %r (%s)" % (value, lib.DTYPES.get(value),
                                                              DTYPE_NAMES[name], full))
        if not mirrored and name not in UNMIRRORED and not ERROR.fullmatch(name):
            bad.append("%s: the package has no %s: mirror it in _lib.py, or say in "
                       "test_abi.py's UNMIRRORED why it needs none" % (full, name))
    # and every constant of the package is one of the header's
    for name, value in vars(lib).items():
        if name.isupper() and isinstance(value, int) and "ZP_CLIENT_" + name not in c["constants"]:
            bad.append("_lib.%s: the header has no ZP_CLIENT_%s" % (name, name))
    want = {c["constants"]["ZP_CLIENT_" + k]: v for k, v in DTYPE_NAMES.items()}
    if lib.DTYPES != want:
        bad.append("DTYPES %s, the header's element types %s" % (lib.DTYPES, want))
    if lib.API_VERSION != c["constants"]["ZP_CLIENT_API_VERSION"]:
        bad.append("API_VERSION %d, the header's %d: the package's structs and calls are of "
                   "its version; bring _lib.py up to the header's and change API_VERSION"
                   % (lib.API_VERSION, c["constants"]["ZP_CLIENT_API_VERSION"]))
    zp.check(not bad, "python/zeus_pipe/_lib.py's constants differ from zeus_pipe.h:\n  " +
             "\n  ".join(bad))


def a_field_moved_in_the_mirror_is_caught():
    """The comparison itself: Batch with kind and split swapped (same type, same
    size: only their offsets tell) is reported, naming both."""
    c, lib = c_layout(), mirror()
    _, structs = header_declarations()
    fields = list(lib.Batch._fields_)
    fields[0], fields[1] = fields[1], fields[0]
    moved = type("Batch", (ctypes.Structure,), {"_fields_": fields})
    zp.check(ctypes.sizeof(moved) == ctypes.sizeof(lib.Batch), "the swap changed the size")
    bad = layout_problems("zp_client_batch_t", moved, c["structs"]["zp_client_batch_t"],
                          structs["zp_client_batch_t"])
    said = "\n".join(bad)
    zp.check("Batch.kind: offset 4" in said and "Batch.split: offset 0" in said,
             "a moved field was not reported: %r" % bad)


if __name__ == "__main__":
    zp.main([the_c_listing_has_every_constant_and_member_the_header_declares,
             the_ctypes_structs_have_the_c_layout,
             the_package_constants_have_the_c_values,
             a_field_moved_in_the_mirror_is_caught])
