#!/usr/bin/python3
"""Generate the PyTorch-zip (.pth) test fixtures under tests/data/pth/.

Run once from the repository root, then commit the output:

    /usr/bin/python3 tools/make_pth_fixtures.py

Needs Debian's python3-torch (torch 1.13, installed for /usr/bin/python3 only); the C++ test suite
reads the committed files and never needs torch. The output is deterministic: every random tensor is
seeded and every zip built here uses the fixed timestamp 1980-01-01 00:00:00.

Valid fixtures (written by torch.save, default zip serialization unless noted):
  f32.pth             OrderedDict of two F32 tensors plus a 0-dim scalar.
  bf16.pth            BF16 tensors.
  f16.pth             F16 tensor.
  f64_i64.pth         F64 and I64 (negative values) tensors.
  nested.pth          nested dicts inside a "state_dict" wrapper with non-tensor siblings (int, float,
                      str); torch 1.13's own weights_only loader refuses it (no BINFLOAT support).
  model_wrap.pth      state dict wrapped in "model" next to a non-tensor sibling.
  views.pth           four views of one storage: transposed, offset+strided, strided column.
  tied.pth            one tensor object stored under two names (memoised, BINGET on reload).
  parameter.pth       an nn.Parameter (torch._utils._rebuild_parameter) and a Linear state_dict()
                      (OrderedDict carrying _metadata, so the pickle has a BUILD opcode).
  renamed_folder.pth  saved under the name Wan2.1_VAE_tiny.pth, so its top folder is "Wan2.1_VAE_tiny"
                      (neither "archive" nor the fixture's own file stem).
  archive_folder.pth  saved to a buffer, so its top folder is "archive".
  zip64.pth           a torch.save'd archive rewritten as ZIP64 by Python's zipfile: zip64 extra fields
                      in local and central headers, zip64 end record + locator, and an end record whose
                      counts/size/offset are all 0xFFFF/0xFFFFFFFF. Entries are not 64-byte aligned.
  legacy.pth          the legacy (pre-1.6, non-zip) format; a reader must refuse it and tell the user
                      to re-save with torch.save.

expected.json describes every valid zip fixture (all but legacy.pth):
  {file: {"top_folder": str, "tensors": {name: {"dtype": "F32"|"BF16"|"F16"|"F64"|"I64",
                                                 "shape": [...], "values": [...]}}}}
Tensor names are flattened as a loader would: a top-level "state_dict" or "model" dict is unwrapped,
nested dicts are joined with ".", non-tensor entries are left out. "values" lists the logical elements
in row-major order (a 0-dim tensor gives one value), each exactly as stored (float(x); ints for I64).

Hostile fixtures (hostile_*.pth) are hand-built stored zips laid out like torch's (archive/data.pkl,
archive/data/<key>, archive/version) with hand-written protocol-2 pickles, starting from a valid base
(one FloatStorage "0" of 15 floats, one tensor "w" of shape (3, 5)) and breaking one thing each;
hostile.json maps each file to a one-line description of its defect. The script records how torch
1.13's own weights_only loader treats each one (printed, not stored) and asserts that it refuses the
pickle-level ones.
"""
import collections
import io
import json
import os
import pickle
import resource
import struct
import subprocess
import sys
import tempfile
import zipfile

import torch

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "pth")
FIXED_DATE = (1980, 1, 1, 0, 0, 0)
DTYPE_NAMES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16",
               torch.float64: "F64", torch.int64: "I64"}
WRAPPER_KEYS = ("state_dict", "model")
# Valid fixtures that torch 1.13's weights_only unpickler cannot read (it lacks BINFLOAT); they are
# checked with a plain torch.load instead, which is safe because this script wrote them.
WEIGHTS_ONLY_UNSUPPORTED = {"nested.pth"}
# Depth of the nested-list pickle bomb. Two bytes per level, so this fixture alone is ~200 KB.
NEST_DEPTH = 5000


def out_path(name):
    return os.path.join(OUT_DIR, name)


# --------------------------------------------------------------------------------------------------
# Zip helpers
# --------------------------------------------------------------------------------------------------

def read_entries(data):
    """(name, bytes) for every entry of a zip held in memory, in directory order."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return [(info.filename, z.read(info)) for info in z.infolist()]


def build_zip(entries, compression=zipfile.ZIP_STORED):
    """A zip (bytes) holding the given (name, bytes) entries with fixed timestamps."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=FIXED_DATE)
            info.compress_type = compression
            z.writestr(info, data)
    return buf.getvalue()


def torch_save_bytes(obj):
    """torch.save to a buffer (top folder "archive")."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def top_folder(data):
    names = {name.split("/", 1)[0] for name, _ in read_entries(data)}
    assert len(names) == 1, names
    return names.pop()


def central_directory(data):
    """Parse the end records and central directory by hand (ZIP64 aware).

    Returns (end_record, zip64_end_record or None, entries); each entry is a dict holding the raw
    32-bit fields, the zip64 extra values, the resolved sizes/offset and the entry's byte offset."""
    eocd_at = data.rindex(b"PK\x05\x06")
    (_, _, _, count_disk, count, cd_size, cd_offset, _) = struct.unpack_from("<IHHHHIIH", data, eocd_at)
    end = {"entries_on_disk": count_disk, "entries": count, "cd_size": cd_size, "cd_offset": cd_offset}
    zip64_end = None
    locator_at = eocd_at - 20
    if locator_at >= 0 and data[locator_at:locator_at + 4] == b"PK\x06\x07":
        (_, _, rec_at, _) = struct.unpack_from("<IIQI", data, locator_at)
        assert data[rec_at:rec_at + 4] == b"PK\x06\x06"
        (_, _, _, _, _, _, count_disk, count, cd_size, cd_offset) = struct.unpack_from(
            "<IQHHIIQQQQ", data, rec_at)
        zip64_end = {"at": rec_at, "entries_on_disk": count_disk, "entries": count,
                     "cd_size": cd_size, "cd_offset": cd_offset}
    cd_at = (zip64_end or end)["cd_offset"]
    entries = []
    for _ in range((zip64_end or end)["entries"]):
        (sig, _, _, flags, method, _, _, _, csize, usize, name_len, extra_len, comment_len,
         _, _, _, local_at) = struct.unpack_from("<IHHHHHHIIIHHHHHII", data, cd_at)
        assert sig == 0x02014B50
        name = data[cd_at + 46:cd_at + 46 + name_len].decode()
        extra = data[cd_at + 46 + name_len:cd_at + 46 + name_len + extra_len]
        entry = {"name": name, "at": cd_at, "flags": flags, "method": method, "raw_csize": csize,
                 "raw_usize": usize, "raw_local_at": local_at, "zip64_extra": []}
        # The zip64 extra field (id 1) holds, in this order, only the fields saturated at 0xFFFFFFFF.
        pos = 0
        while pos < len(extra):
            field_id, field_len = struct.unpack_from("<HH", extra, pos)
            if field_id == 1:
                entry["zip64_extra"] = list(struct.unpack_from("<%dQ" % (field_len // 8), extra, pos + 4))
            pos += 4 + field_len
        values = iter(entry["zip64_extra"])
        entry["usize"] = next(values) if usize == 0xFFFFFFFF else usize
        entry["csize"] = next(values) if csize == 0xFFFFFFFF else csize
        entry["local_at"] = next(values) if local_at == 0xFFFFFFFF else local_at
        entries.append(entry)
        cd_at += 46 + name_len + extra_len + comment_len
    return end, zip64_end, entries


def cd_entry(data, name):
    return next(e for e in central_directory(data)[2] if e["name"].endswith(name))


# --------------------------------------------------------------------------------------------------
# Pickle helpers
# --------------------------------------------------------------------------------------------------

class _Stub(dict):
    """Stand-in for every global while scanning a pickle: callable with any arguments, accepts
    SETITEM and BUILD (a dict subclass has a __dict__)."""

    def __init__(self, *args, **kwargs):
        super().__init__()


class _StorageKeyCollector(pickle.Unpickler):
    """Runs a torch data.pkl without torch, recording the storage key of every persistent id."""

    def __init__(self, data):
        super().__init__(io.BytesIO(data))
        self.keys = []

    def find_class(self, module, name):
        return _Stub

    def persistent_load(self, pid):
        self.keys.append(pid[2])
        return _Stub()


def storage_keys(zip_data):
    """Storage keys referenced by an archive's data.pkl (one per tensor, repeats included)."""
    pkl = next(data for name, data in read_entries(zip_data) if name.endswith("/data.pkl"))
    collector = _StorageKeyCollector(pkl)
    collector.load()
    return collector.keys


# Hand-written protocol-2 opcodes, so the hostile pickles contain exactly what is intended.
def op_global(module, name):
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def op_str(s):
    raw = s.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def op_int(n):
    if 0 <= n < 256:
        return b"K" + bytes([n])
    if -2**31 <= n < 2**31:
        return b"J" + struct.pack("<i", n)
    raw = pickle.encode_long(n)
    return b"\x8a" + bytes([len(raw)]) + raw


def op_tuple(*items):
    return b"(" + b"".join(items) + b"t" if items else b")"


def op_call(func, *args):
    """func(*args) via REDUCE; func is opcode bytes that push a callable."""
    return func + op_tuple(*args) + b"R"


def op_tensor(key="0", numel=15, offset=0, shape=(3, 5), stride=(5, 1), tag="storage"):
    """torch._utils._rebuild_tensor_v2 over a persistent FloatStorage, laid out like torch's."""
    storage = op_tuple(op_str(tag), op_global("torch", "FloatStorage"), op_str(key), op_str("cpu"),
                       op_int(numel)) + b"Q"
    return op_call(op_global("torch._utils", "_rebuild_tensor_v2"), storage, op_int(offset),
                   op_tuple(*map(op_int, shape)), op_tuple(*map(op_int, stride)), b"\x89",
                   op_call(op_global("collections", "OrderedDict")))


def op_state_dict(items, new_dict=op_call(op_global("collections", "OrderedDict"))):
    """An OrderedDict filled with SETITEM from (key, value opcodes) pairs."""
    return new_dict + b"".join(op_str(key) + value + b"s" for key, value in items)


def program(body, proto=2):
    return b"\x80" + bytes([proto]) + body + b"."


# --------------------------------------------------------------------------------------------------
# Valid fixtures
# --------------------------------------------------------------------------------------------------

def flatten(obj):
    """Tensor name -> tensor, as a loader sees the checkpoint (see the module docstring)."""
    for key in WRAPPER_KEYS:
        if isinstance(obj.get(key), dict):
            obj = obj[key]
            break
    out = {}

    def walk(d, prefix):
        for k, v in d.items():
            if isinstance(v, torch.Tensor):
                out[prefix + k] = v
            elif isinstance(v, dict):
                walk(v, prefix + k + ".")
    walk(obj, "")
    return out


def describe(tensor):
    values = tensor.reshape(-1)
    values = values.tolist() if tensor.dtype == torch.int64 else values.float().tolist()
    return {"dtype": DTYPE_NAMES[tensor.dtype], "shape": list(tensor.shape), "values": values}


def load_valid(name):
    """torch.load of a valid fixture, weights_only where torch 1.13 can."""
    try:
        return torch.load(out_path(name), weights_only=True)
    except pickle.UnpicklingError:
        if name not in WEIGHTS_ONLY_UNSUPPORTED:
            raise
        print(f"  {name}: torch 1.13 weights_only load refuses it, checked with a plain torch.load")
        return torch.load(out_path(name))


def valid_checkpoints():
    """File name -> object to save. Each fixture has its own seed, so editing one leaves the others."""
    ck = {}
    torch.manual_seed(1)
    ck["f32.pth"] = collections.OrderedDict(
        [("a.weight", torch.randn(3, 5)), ("a.bias", torch.randn(7)), ("scalar", torch.tensor(1.5))])
    torch.manual_seed(2)
    ck["bf16.pth"] = {"w": torch.randn(4, 3).bfloat16(), "b": torch.randn(5).bfloat16()}
    torch.manual_seed(3)
    ck["f16.pth"] = {"w": torch.randn(5, 2).half()}
    torch.manual_seed(4)
    ck["f64_i64.pth"] = {"d": torch.randn(3).double(), "i": torch.arange(-2, 5)}
    torch.manual_seed(5)
    ck["nested.pth"] = {"state_dict": {"enc": {"w": torch.randn(2, 3)}, "dec.b": torch.randn(4)},
                        "epoch": 3, "lr": 0.1, "name": "run-a"}
    torch.manual_seed(6)
    ck["model_wrap.pth"] = {"model": collections.OrderedDict(
        [("x.weight", torch.randn(3, 3)), ("x.bias", torch.randn(3))]), "optimizer_step": 10}
    torch.manual_seed(7)
    a = torch.randn(4, 6)
    ck["views.pth"] = {"base": a, "t": a.t(), "s": a[1:, 2:5], "col": a[:, 3]}
    torch.manual_seed(8)
    w = torch.randn(3, 2)
    ck["tied.pth"] = {"enc.w": w, "dec.w": w}
    torch.manual_seed(9)
    ck["parameter.pth"] = {"p": torch.nn.Parameter(torch.randn(2, 3)),
                           "lin": torch.nn.Linear(3, 4).state_dict()}
    torch.manual_seed(10)
    ck["renamed_folder.pth"] = {"w": torch.randn(2, 5), "b": torch.randn(2)}
    torch.manual_seed(11)
    ck["archive_folder.pth"] = {"w": torch.randn(3, 2), "b": torch.randn(3)}
    torch.manual_seed(12)
    ck["zip64.pth"] = {"w": torch.randn(3, 4), "b": torch.randn(4).half()}
    return ck


def write_zip64(path, obj):
    """Rewrite torch.save's entries as a ZIP64 archive (same names, same bytes, stored).

    With both limits at 0, zipfile puts zip64 extra fields in every local and central header and
    writes the zip64 end record and locator. It still stores the real (small) counts and sizes in the
    classic end record, so those are then saturated by hand: a reader must follow the locator."""
    entries = read_entries(torch_save_bytes(obj))
    saved = zipfile.ZIP64_LIMIT, zipfile.ZIP_FILECOUNT_LIMIT
    zipfile.ZIP64_LIMIT = zipfile.ZIP_FILECOUNT_LIMIT = 0
    try:
        data = bytearray(build_zip(entries))
    finally:
        zipfile.ZIP64_LIMIT, zipfile.ZIP_FILECOUNT_LIMIT = saved
    eocd_at = data.rindex(b"PK\x05\x06")
    struct.pack_into("<HHII", data, eocd_at + 8, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF)
    with open(path, "wb") as f:
        f.write(data)
    return entries


def verify_zip64(path, original_entries):
    data = open(path, "rb").read()
    end, zip64_end, entries = central_directory(data)
    print("  end record:", end)
    print("  zip64 end record:", zip64_end)
    assert end == {"entries_on_disk": 0xFFFF, "entries": 0xFFFF, "cd_size": 0xFFFFFFFF,
                   "cd_offset": 0xFFFFFFFF}
    assert zip64_end is not None and zip64_end["entries"] == len(original_entries)
    for e in entries:
        print("  central entry %-22s raw csize=0x%08X usize=0x%08X local_at=0x%08X zip64 extra=%s"
              % (e["name"], e["raw_csize"], e["raw_usize"], e["raw_local_at"], e["zip64_extra"]))
        assert e["raw_csize"] == e["raw_usize"] == 0xFFFFFFFF
        # zipfile only saturates the offset when it is above the limit, i.e. not for the first entry.
        assert e["raw_local_at"] == (0xFFFFFFFF if e["local_at"] > 0 else 0)
        local = data[e["local_at"]:e["local_at"] + 30]
        assert struct.unpack_from("<II", local, 18) == (0xFFFFFFFF, 0xFFFFFFFF), "local header not zip64"
    assert read_entries(data) == original_entries


def write_legacy(path):
    """The legacy format. torch keys its storages by memory address; that key is renamed "0" (in the
    main pickle and in the storage-key list pickle) so the file is the same on every run."""
    torch.manual_seed(13)
    w = torch.randn(2, 3)
    buf = io.BytesIO()
    torch.save({"w": w}, buf, _use_new_zipfile_serialization=False)
    address_key = op_str(str(w.storage()._cdata))
    data = buf.getvalue()
    assert data.count(address_key) == 2
    with open(path, "wb") as f:
        f.write(data.replace(address_key, op_str("0")))
    assert not zipfile.is_zipfile(path)
    assert torch.equal(torch.load(path, weights_only=True)["w"], w)


def write_valid():
    manifest = {}
    for name, obj in valid_checkpoints().items():
        path = out_path(name)
        if name == "zip64.pth":
            original_entries = write_zip64(path, obj)
            print("ZIP64 verification (zip64.pth):")
            verify_zip64(path, original_entries)
        elif name == "renamed_folder.pth":
            # torch names the top folder after the stem of the path it saves to.
            with tempfile.TemporaryDirectory() as tmp:
                tmp_path = os.path.join(tmp, "Wan2.1_VAE_tiny.pth")
                torch.save(obj, tmp_path)
                with open(tmp_path, "rb") as src, open(path, "wb") as dst:
                    dst.write(src.read())
        elif name == "archive_folder.pth":
            with open(path, "wb") as f:
                f.write(torch_save_bytes(obj))
        else:
            torch.save(obj, path)

        data = open(path, "rb").read()
        expected = flatten(obj)
        loaded = flatten(load_valid(name))
        assert list(loaded) == list(expected), (name, list(loaded), list(expected))
        for key, tensor in expected.items():
            assert loaded[key].dtype == tensor.dtype and torch.equal(loaded[key], tensor), (name, key)
        manifest[name] = {"top_folder": top_folder(data),
                          "tensors": {key: describe(t) for key, t in expected.items()}}

    # All views, and both tied names, must point at one storage written once. The tied tensor is
    # pickled once (its second name is a memo BINGET), so its storage is referenced once.
    expected_keys = {"views.pth": ["0"] * 4, "tied.pth": ["0"]}
    for name, keys in expected_keys.items():
        data = open(out_path(name), "rb").read()
        assert storage_keys(data) == keys, (name, storage_keys(data))
        assert sum("/data/" in n for n, _ in read_entries(data)) == 1, name

    write_legacy(out_path("legacy.pth"))

    with open(out_path("expected.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


# --------------------------------------------------------------------------------------------------
# Hostile fixtures
# --------------------------------------------------------------------------------------------------

def base_storage():
    torch.manual_seed(100)
    values = torch.randn(15)
    return values, struct.pack("<15f", *values.tolist())


def hostile_zip(pkl, storages=None, extra=(), folder="archive"):
    """A stored zip laid out like torch's; storages defaults to the valid base storage "0"."""
    if storages is None:
        storages = {"0": base_storage()[1]}
    entries = [(f"{folder}/data.pkl", pkl)]
    entries += [(f"{folder}/data/{key}", data) for key, data in storages.items()]
    entries += [(f"{folder}/version", b"3\n")] + [(f"{folder}/{n}", d) for n, d in extra]
    return build_zip(entries)


BASE_PKL = program(op_state_dict([("w", op_tensor())]))


def patch_flags(data, bit):
    """Set a general-purpose flag bit in every local and central header."""
    data = bytearray(data)
    for e in central_directory(bytes(data))[2]:
        struct.pack_into("<H", data, e["at"] + 8, e["flags"] | bit)
        (local_flags,) = struct.unpack_from("<H", data, e["local_at"] + 6)
        struct.pack_into("<H", data, e["local_at"] + 6, local_flags | bit)
    return bytes(data)


def patch_local_offset(data, name, new_offset):
    data = bytearray(data)
    struct.pack_into("<I", data, cd_entry(bytes(data), name)["at"] + 42, new_offset)
    return bytes(data)


def patch_sizes(data, name, size):
    """Set both the compressed and uncompressed size of one central-directory entry."""
    data = bytearray(data)
    struct.pack_into("<II", data, cd_entry(bytes(data), name)["at"] + 20, size, size)
    return bytes(data)


def nested_lists(depth):
    """depth lists, each appended into the one before it."""
    return b"]" * depth + b"a" * (depth - 1)


def shared_lists(levels):
    """L0 = [1]; L(k+1) = [Lk, Lk] through the memo: 2**levels leaves from a few hundred bytes.

    The empty lists L(levels)..L0 are pushed first, so each finished Lk sits right above L(k+1): it
    is memoised, appended (popping it) and appended again from the memo. No POP opcode needed."""
    ops = b"]" * (levels + 1) + op_int(1) + b"a"
    for k in range(levels):
        ops += b"q" + bytes([k]) + b"a" + b"h" + bytes([k]) + b"a"
    return ops


def proto4_state_dict():
    """The base state dict as a framed protocol-4 pickle whose globals use STACK_GLOBAL."""
    def stack_global(module, name):
        return b"\x8c" + bytes([len(module)]) + module.encode() + b"\x8c" + bytes([len(name)]) + \
            name.encode() + b"\x93"
    body = BASE_PKL[2:]  # without PROTO 2
    for module, name in (("collections", "OrderedDict"), ("torch._utils", "_rebuild_tensor_v2"),
                         ("torch", "FloatStorage")):
        body = body.replace(op_global(module, name), stack_global(module, name))
    return b"\x80\x04\x95" + struct.pack("<Q", len(body)) + body


def hostile_fixtures():
    """File name -> (description, bytes, pickle_level); torch's weights_only loader must refuse the
    pickle-level ones."""
    valid_base = hostile_zip(BASE_PKL)
    storage = base_storage()[1]
    saved = torch_save_bytes({"w": base_storage()[0].reshape(3, 5)})
    echo = op_str("echo pwned")
    return {
        "hostile_os_system.pth": (
            "top-level object is os.system('echo pwned') via GLOBAL + REDUCE",
            hostile_zip(program(op_call(op_global("os", "system"), echo))), True),
        "hostile_builtins_eval.pth": (
            "top-level object is builtins.eval('1+1') via GLOBAL + REDUCE",
            hostile_zip(program(op_call(op_global("builtins", "eval"), op_str("1+1")))), True),
        "hostile_builtin_eval_py2.pth": (
            "top-level object is __builtin__.eval('1+1') (Python 2 module name) via GLOBAL + REDUCE",
            hostile_zip(program(op_call(op_global("__builtin__", "eval"), op_str("1+1")))), True),
        "hostile_subprocess.pth": (
            "valid state dict whose second value is subprocess.Popen(('echo', 'pwned'))",
            hostile_zip(program(op_state_dict([
                ("w", op_tensor()),
                ("x", op_call(op_global("subprocess", "Popen"),
                              op_tuple(op_str("echo"), op_str("pwned"))))]))), True),
        "hostile_other_reduce.pth": (
            "value built by REDUCE of collections.defaultdict (same module as the allowed OrderedDict)",
            hostile_zip(program(op_state_dict([
                ("w", op_tensor()), ("d", op_call(op_global("collections", "defaultdict")))]))), True),
        "hostile_torch_class.pth": (
            "value built by REDUCE of torch.nn.modules.linear.Linear(3, 4), a torch class not allow-listed",
            hostile_zip(program(op_state_dict([
                ("w", op_tensor()),
                ("lin", op_call(op_global("torch.nn.modules.linear", "Linear"), op_int(3), op_int(4))),
            ]))), True),
        "hostile_opcode_inst.pth": (
            "state dict created with opcode INST (i) instead of GLOBAL + REDUCE",
            hostile_zip(program(op_state_dict([("w", op_tensor())],
                                              new_dict=b"(i" + b"collections\nOrderedDict\n"))), True),
        "hostile_opcode_proto4.pth": (
            "the valid base state dict as a protocol-4 pickle (FRAME, SHORT_BINUNICODE, STACK_GLOBAL)",
            hostile_zip(proto4_state_dict()), True),
        "hostile_persid_not_storage.pth": (
            "BINPERSID tuple starts with 'module' instead of 'storage'",
            hostile_zip(program(op_state_dict([("w", op_tensor(tag="module"))]))), True),
        "hostile_view_past_storage.pth": (
            "tensor of shape (100,) over a 15-element storage",
            hostile_zip(program(op_state_dict([("w", op_tensor(shape=(100,), stride=(1,)))]))), False),
        "hostile_offset_past_storage.pth": (
            "tensor of shape (3, 5) at storage offset 14 of a 15-element storage",
            hostile_zip(program(op_state_dict([("w", op_tensor(offset=14))]))), False),
        "hostile_storage_size_mismatch.pth": (
            "FloatStorage of 15 elements (60 bytes) whose data entry holds 40 bytes",
            hostile_zip(BASE_PKL, storages={"0": storage[:40]}), False),
        "hostile_missing_storage.pth": (
            "pickle references storage key '7', which has no data entry (data/0 is present)",
            hostile_zip(program(op_state_dict([("w", op_tensor(key="7"))]))), False),
        "hostile_huge_numel.pth": (
            "storage numel 2**62 (LONG1) for a 60-byte data entry; must not allocate",
            hostile_zip(program(op_state_dict([("w", op_tensor(numel=2**62))]))), False),
        "hostile_nested_lists.pth": (
            f"value of 'w' is {NEST_DEPTH} nested lists "
            f"(EMPTY_LIST x{NEST_DEPTH}, APPEND x{NEST_DEPTH - 1})",
            hostile_zip(program(op_state_dict([("w", nested_lists(NEST_DEPTH))]))), False),
        "hostile_shared_lists.pth": (
            "valid state dict whose value 's' is a list with 2**60 leaves via memo sharing: L0=[1], "
            "L(k+1)=[Lk, Lk] up to L60",
            hostile_zip(program(op_state_dict([("w", op_tensor()), ("s", shared_lists(60))]))), False),
        "hostile_self_append.pth": (
            "value of 'w' is a list appended into itself (EMPTY_LIST, BINPUT 0, BINGET 0, APPEND)",
            hostile_zip(program(op_state_dict([("w", b"]q\x00h\x00a")]))), False),
        "hostile_compressed.pth": (
            "valid torch.save'd archive re-zipped with ZIP_DEFLATED",
            build_zip(read_entries(saved), zipfile.ZIP_DEFLATED), False),
        "hostile_encrypted.pth": (
            "valid base with the encryption flag (bit 0) set in every local and central header",
            patch_flags(valid_base, 1), False),
        "hostile_overlap.pth": (
            "central directory points data/0 at the data.pkl local header, so two entries overlap",
            patch_local_offset(valid_base, "/data/0", 0), False),
        "hostile_entry_past_end.pth": (
            "central directory sizes of data/0 (both) equal the file length, running past its end",
            patch_sizes(valid_base, "/data/0", len(valid_base)), False),
        "hostile_truncated.pth": (
            "first 60% of a valid torch.save'd archive (no central directory)",
            saved[:len(saved) * 6 // 10], False),
        "hostile_no_pickle.pth": (
            "zip with archive/data/0 and archive/version but no data.pkl",
            build_zip([("archive/data/0", storage), ("archive/version", b"3\n")]), False),
        "hostile_big_endian.pth": (
            "valid base plus archive/byteorder reading 'big'",
            hostile_zip(BASE_PKL, extra=[("byteorder", b"big")]), False),
        "hostile_repeated_view.pth": (
            "200 names for transposed (64, 64) views of one 16 KB storage: copying each view would take 3.2 MB "
            "from a 50 KB file",
            hostile_zip(program(op_state_dict([(f"t{i}", op_tensor(numel=4096, shape=(64, 64), stride=(1, 64)))
                                               for i in range(200)])),
                        storages={"0": struct.pack("<4096f", *[float(i % 97) for i in range(4096)])}), False),
        "hostile_long_key.pth": (
            "valid tensor under a 5000-byte key",
            hostile_zip(program(op_state_dict([("k" * 5000, op_tensor())]))), False),
        "hostile_stride0_huge.pth": (
            "a (2**63-1, 2**63-1) view with strides (0, 0) over a 15-element storage: inside it, "
            "but its element count overflows",
            hostile_zip(program(op_state_dict([("w", op_tensor(shape=(2**63 - 1, 2**63 - 1),
                                                                stride=(0, 0)))]))), False),
        "hostile_empty_huge.pth": (
            "an empty (0, 2**62, 2**62) view: no element, but the product of its other sizes overflows",
            hostile_zip(program(op_state_dict([("w", op_tensor(shape=(0, 2**62, 2**62),
                                                                stride=(1, 1, 1)))]))), False),
    }


# Loads one file with torch's weights_only loader in a child process (a crash or a runaway
# allocation cannot take this script down) and prints one line about the outcome.
TORCH_PROBE = """
import sys, torch
try:
    obj = torch.load(sys.argv[1], weights_only=True)
except BaseException as e:
    # torch wraps unpickler errors in a long warning; keep only the cause.
    cause = str(e).split("WeightsUnpickler error: ")[-1]
    print("rejected:", type(e).__name__ + ":", " ".join(cause.split())[:300])
else:
    print("accepted:", type(obj).__name__, {k: type(v).__name__ for k, v in obj.items()}
          if isinstance(obj, dict) else "")
"""


def torch_probe(path):
    def limit_memory():
        resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
    try:
        run = subprocess.run([sys.executable, "-c", TORCH_PROBE, path], capture_output=True,
                             text=True, timeout=120, preexec_fn=limit_memory)
    except subprocess.TimeoutExpired:
        return "hung (killed after 120 s)"
    if run.returncode != 0:
        return f"crashed (exit {run.returncode}): {run.stderr.strip()[-160:]}"
    return run.stdout.strip()


def write_hostile():
    # The base the hostile files start from must itself be a loadable checkpoint.
    with tempfile.TemporaryDirectory() as tmp:
        base_path = os.path.join(tmp, "base.pth")
        with open(base_path, "wb") as f:
            f.write(hostile_zip(BASE_PKL))
        loaded = torch.load(base_path, weights_only=True)
        assert torch.equal(loaded["w"], base_storage()[0].reshape(3, 5))

    print("torch 1.13 torch.load(weights_only=True) on the hostile fixtures:")
    descriptions = {}
    for name, (description, data, pickle_level) in hostile_fixtures().items():
        path = out_path(name)
        with open(path, "wb") as f:
            f.write(data)
        outcome = torch_probe(path)
        print(f"  {name}: {outcome}")
        if pickle_level:
            assert outcome.startswith("rejected:"), (name, outcome)
        descriptions[name] = description
    with open(out_path("hostile.json"), "w") as f:
        json.dump(descriptions, f, indent=1)
        f.write("\n")


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    write_valid()
    write_hostile()
    total = 0
    for name in sorted(os.listdir(OUT_DIR)):
        size = os.path.getsize(out_path(name))
        total += size
        print(f"{size:8d}  {name}")
    print(f"{total:8d}  total")


if __name__ == "__main__":
    main()
