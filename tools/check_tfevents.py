#!/usr/bin/python3
"""Checks `megaslide train`'s TensorBoard event files with a reader independent of megaslide's writer.

Usage: check_tfevents.py MEGASLIDE   (works in a temporary directory)

Trains the default job for a few steps (samples every 3 steps), then reads OUT/events.out.tfevents.* as TensorBoard
does: the TFRecord framing with both masked CRC32Cs verified (crcmod's CRC-32C, not megaslide's), each record parsed
by python3-protobuf with message classes built here from the field numbers of TensorBoard's event.proto and
summary.proto. The scalars must equal metrics.jsonl's (as float32), the images must be the contact sheets' PNG files,
and a resumed run's new file must begin with a SessionLog START at the checkpoint's step. A corrupted copy of the file
must be rejected: the check itself can fail. Exits non-zero with a message on the first mismatch.
"""
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile

import crcmod.predefined
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

CRC32C = crcmod.predefined.mkCrcFun("crc-32c")
F = descriptor_pb2.FieldDescriptorProto


def masked(data):
    c = CRC32C(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def message_classes():
    """Event, Summary, Summary.Value, Summary.Image and SessionLog: the fields megaslide writes, by number."""
    f = descriptor_pb2.FileDescriptorProto(name="tb_subset.proto", package="tb", syntax="proto3")

    def add(msg, name, number, kind, type_name=None, label=F.LABEL_OPTIONAL):
        field = msg.field.add(name=name, number=number, type=kind, label=label)
        if type_name:
            field.type_name = type_name

    image = f.message_type.add(name="Image")
    add(image, "height", 1, F.TYPE_INT32)
    add(image, "width", 2, F.TYPE_INT32)
    add(image, "colorspace", 3, F.TYPE_INT32)
    add(image, "encoded_image_string", 4, F.TYPE_BYTES)
    value = f.message_type.add(name="Value")
    add(value, "tag", 1, F.TYPE_STRING)
    add(value, "simple_value", 2, F.TYPE_FLOAT)
    add(value, "image", 4, F.TYPE_MESSAGE, ".tb.Image")
    summary = f.message_type.add(name="Summary")
    add(summary, "value", 1, F.TYPE_MESSAGE, ".tb.Value", F.LABEL_REPEATED)
    session = f.message_type.add(name="SessionLog")
    add(session, "status", 1, F.TYPE_INT32)  # an enum in session_log's proto: START = 1
    event = f.message_type.add(name="Event")
    add(event, "wall_time", 1, F.TYPE_DOUBLE)
    add(event, "step", 2, F.TYPE_INT64)
    add(event, "file_version", 3, F.TYPE_STRING)
    add(event, "summary", 5, F.TYPE_MESSAGE, ".tb.Summary")
    add(event, "session_log", 7, F.TYPE_MESSAGE, ".tb.SessionLog")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.MessageFactory(pool).GetPrototype(pool.FindMessageTypeByName("tb.Event"))


Event = message_classes()


def records(data):
    """The records of a TFRecord file's bytes; raises ValueError on a bad length, CRC or a truncated record."""
    at = 0
    while at < len(data):
        if at + 12 > len(data):
            raise ValueError(f"truncated header at byte {at}")
        header = data[at:at + 8]
        (n,), (crc,) = struct.unpack("<Q", header), struct.unpack("<I", data[at + 8:at + 12])
        if crc != masked(header):
            raise ValueError(f"length CRC mismatch at byte {at}")
        body = data[at + 12:at + 12 + n]
        if len(body) != n or at + 16 + n > len(data):
            raise ValueError(f"truncated record at byte {at}")
        (crc,) = struct.unpack("<I", data[at + 12 + n:at + 16 + n])
        if crc != masked(body):
            raise ValueError(f"data CRC mismatch at byte {at}")
        yield body
        at += 16 + n


def events(path):
    with open(path, "rb") as fh:
        data = fh.read()
    out = []
    for body in records(data):
        e = Event()
        e.ParseFromString(body)
        if e.SerializeToString() != body:  # every byte is one of the known fields, in order
            raise ValueError(f"{path}: a record holds fields other than the ones expected")
        out.append(e)
    return data, out


def fail(msg):
    print("check_tfevents: FAIL: " + msg)
    sys.exit(1)


def run(args):
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        fail(" ".join(args) + " exited " + str(r.returncode) + ":\n" + r.stdout)
    return r.stdout


def png_size(png):
    if png[:8] != b"\x89PNG\r\n\x1a\n" or png[12:16] != b"IHDR":
        fail("an image is not a PNG file")
    return struct.unpack(">II", png[16:24])


def check(megaslide, work):
    out = os.path.join(work, "run")
    run([megaslide, "train", "--steps", "6", "--sample-every", "3", "--sample-steps", "4", "--out", out])
    files = glob.glob(os.path.join(out, "events.out.tfevents.*"))
    if len(files) != 1:
        fail(f"expected one event file in {out}, found {files}")
    data, evs = events(files[0])
    if evs[0].file_version != "brain.Event:2":
        fail(f"the first event is not the file version: {evs[0]}")
    metrics = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
    scalars, images = {}, {}
    for e in evs[1:]:
        for v in e.summary.value:
            if v.HasField("image"):
                images[e.step] = v
            else:
                scalars[(e.step, v.tag)] = v.simple_value
    for m in metrics:
        for key in ("loss", "lr", "grad_norm", "tokens_per_second"):
            got, want = scalars.get((m["step"], "train/" + key)), struct.unpack("<f", struct.pack("<f", m[key]))[0]
            if got != want:
                fail(f"step {m['step']} train/{key}: event file {got}, metrics.jsonl {m[key]} (float32 {want})")
    if len(scalars) != 4 * len(metrics) or len(metrics) != 6:
        fail(f"{len(scalars)} scalars for {len(metrics)} metrics lines")
    for step in (3, 6):
        v = images.get(step)
        if v is None or v.tag != "samples" or v.image.colorspace != 3:
            fail(f"no RGB image 'samples' at step {step}: {v}")
        sheet = os.path.join(out, "samples", f"step-{step}.png")
        png = open(sheet, "rb").read()
        if v.image.encoded_image_string != png or png_size(png) != (v.image.width, v.image.height):
            fail(f"the image of step {step} is not {sheet} at its size")
    # A byte flipped in a record's body: the reader must refuse the file.
    bad = bytearray(data)
    bad[len(bad) // 2] ^= 0x40
    try:
        list(records(bytes(bad)))
        fail("a corrupted event file was read without error")
    except ValueError:
        pass
    # A resumed run writes a new file that starts over from the checkpoint: SessionLog START at its step.
    run([megaslide, "train", "--resume", out, "--steps", "8"])
    resumed = sorted(set(glob.glob(os.path.join(out, "events.out.tfevents.*"))) - set(files))
    if len(resumed) != 1:
        fail(f"the resumed run wrote {resumed}")
    _, evs = events(resumed[0])
    if len(evs) < 2 or not evs[1].HasField("session_log") or evs[1].session_log.status != 1 or evs[1].step != 6:
        fail(f"the resumed run's file does not begin with SessionLog START at step 6: {evs[:2]}")
    steps = sorted({e.step for e in evs[2:] if e.HasField("summary")})
    if steps != [7, 8]:
        fail(f"the resumed run's summaries are at steps {steps}, not 7 and 8")
    print(f"check_tfevents: OK: {len(scalars)} scalars and {len(images)} images over {len(metrics)} steps match "
          "metrics.jsonl and the PNG sheets; CRCs verified; a corrupted copy refused; resume marked at step 6")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        check(sys.argv[1], tmp)
