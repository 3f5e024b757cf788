"""tests/io/tensorboard_interop.py: the Python side of tests/io/test_interop_tensorboard.c.

    tensorboard_interop.py read DIR      TensorBoard's EventAccumulator reads DIR/purged (two event
                                         files: a run and its resumption with purge_step) and
                                         DIR/single; every scalar equals DIR/expected.jsonl's
                                         (rounded to float32, as simple_value holds it), with its
                                         step and wall time; the text reads back.
    tensorboard_interop.py torch DIR     PyTorch's SummaryWriter logs the same sequence as
                                         DIR/single (sequence() below, which the C side repeats)
                                         into DIR/torch; every record after the file_version one
                                         (whose wall time is the clock's) must be byte for byte
                                         cuttle's.
    tensorboard_interop.py cli DIR EXPECTED [METRICS]
                                         tests/cli/test_cli_tensorboard.c: the event files that
                                         `cuttle train --tensorboard DIR` wrote. EventAccumulator
                                         reads every scalar that the C reader read (EXPECTED, JSON
                                         lines, after TensorBoard's purge of a resumed run's
                                         superseded steps), with its step and wall time; and every
                                         per-epoch scalar equals the value of the --metrics line
                                         (METRICS) of its epoch, at the line's "step", within the
                                         digits the line prints and float32's rounding.

Prints what it compared; exits non-zero with a message on any difference."""
import glob
import json
import os
import struct
import sys

TEXT = "| option | value |\n|---|---|\n| lr | 0.001 |\n| model | cnn \u00fc |"


def sequence():
    """The calls of DIR/single: (kind, tag, value, step, wall time); tests/io/test_interop_tensorboard.c
    makes the same ones."""
    out = []
    for s in range(20):
        w = 1700000000.0 + s * 0.5
        out.append(("scalar", "train/loss", 2.0 / (s + 1) + 0.001 * s, s, w))
        out.append(("scalar", "train/images_per_s", 1000.0 + 37.25 * s, s, w))
    out.append(("text", "options", TEXT, 0, 1700000100.0))
    out.append(("scalar", "test/accuracy", 0.8125, 3, 1700000200.0))
    return out


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def accumulate(path):
    from tensorboard.backend.event_processing import event_accumulator as ea

    acc = ea.EventAccumulator(path, size_guidance={ea.SCALARS: 0, ea.TENSORS: 0})
    acc.Reload()
    return acc


def check_scalars(acc, expected, where):
    tags = sorted({e["tag"] for e in expected})
    got_tags = sorted(acc.Tags()["scalars"])
    if got_tags != tags:
        sys.exit(f"{where}: scalar tags {got_tags}, expected {tags}")
    n = 0
    for tag in tags:
        want = sorted((e for e in expected if e["tag"] == tag), key=lambda e: e["step"])
        got = acc.Scalars(tag)
        if [g.step for g in got] != [w["step"] for w in want]:
            sys.exit(f"{where}: {tag}: steps {[g.step for g in got]}, expected {[w['step'] for w in want]}")
        for g, w in zip(got, want):
            if g.value != f32(w["value"]) or g.wall_time != w["wall_time"]:
                sys.exit(f"{where}: {tag} step {g.step}: value {g.value!r} at {g.wall_time!r}, expected "
                         f"{f32(w['value'])!r} (float32 of {w['value']!r}) at {w['wall_time']!r}")
            n += 1
    print(f"{where}: EventAccumulator read {n} scalars of {len(tags)} tags, each equal to the expected value")


def read(d):
    with open(os.path.join(d, "expected.jsonl")) as f:
        lines = [json.loads(l) for l in f if l.strip()]
    check_scalars(accumulate(os.path.join(d, "purged")), [l for l in lines if l["run"] == "purged"], "purged")
    single = [l for l in lines if l["run"] == "single"]
    acc = accumulate(os.path.join(d, "single"))
    check_scalars(acc, single, "single")
    if acc.Tags()["tensors"] != ["options/text_summary"]:
        sys.exit(f"single: tensor tags {acc.Tags()['tensors']}")
    t = acc.Tensors("options/text_summary")
    text = t[0].tensor_proto.string_val[0].decode("utf-8")
    if len(t) != 1 or text != TEXT or t[0].step != 0 or t[0].wall_time != 1700000100.0:
        sys.exit(f"single: text {text!r} at step {t[0].step}, expected {TEXT!r}")
    meta = acc.SummaryMetadata("options/text_summary")
    if meta.plugin_data.plugin_name != "text":
        sys.exit(f"single: the text's plugin is {meta.plugin_data.plugin_name!r}")
    print("single: the text reads back through the text plugin's metadata")


def records(path):
    """The raw records of a TFRecord file, the CRCs checked by TensorBoard's own reader."""
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import PyRecordReader_New

    r = PyRecordReader_New(path.encode(), 0, b"", None)
    out = []
    while True:
        try:
            r.GetNext()
        except Exception as e:  # errors.OutOfRangeError at the end
            if type(e).__name__ != "OutOfRangeError":
                raise
            return out
        out.append(r.record())


def torch_compare(d):
    from torch.utils.tensorboard import SummaryWriter

    w = SummaryWriter(os.path.join(d, "torch"))
    for kind, tag, value, step, wall in sequence():
        if kind == "scalar":
            w.add_scalar(tag, value, step, walltime=wall)
        else:
            w.add_text(tag, value, step, walltime=wall)
    w.close()
    (tp,) = glob.glob(os.path.join(d, "torch", "events.out.tfevents.*"))
    (cp,) = glob.glob(os.path.join(d, "single", "events.out.tfevents.*"))
    t, c = records(tp), records(cp)
    if len(t) != len(c):
        sys.exit(f"PyTorch wrote {len(t)} records, cuttle {len(c)}")
    from tensorboard.compat.proto import event_pb2

    for i in range(len(t)):
        if i == 0:
            a, b = event_pb2.Event.FromString(t[0]), event_pb2.Event.FromString(c[0])
            if a.file_version != b.file_version or a.step != b.step:
                sys.exit(f"first event: PyTorch {a}, cuttle {b}")
            continue
        if t[i] != c[i]:
            sys.exit(f"record {i} differs:\nPyTorch {event_pb2.Event.FromString(t[i])}\ncuttle  {event_pb2.Event.FromString(c[i])}")
    print(f"PyTorch's SummaryWriter and cuttle wrote the same {len(t) - 1} records byte for byte (after file_version)")


# cuttle train's per-epoch tags and the --metrics keys of their values (tools/cuttle/tensorboard_log.h)
EPOCH_TAGS = {"train/loss_epoch": "train_loss", "images_per_s_epoch": "images_per_s", "test/accuracy": "test_acc",
              "test/loss": "test_loss", "epoch": "epoch"}


def cli(d, expected, metrics=None):
    with open(expected) as f:
        exp = [json.loads(l) for l in f if l.strip()]
    acc = accumulate(d)
    check_scalars(acc, exp, d)
    if metrics is None:
        return
    with open(metrics) as f:  # the numbers as printed, to know their digits
        lines = [json.loads(l, parse_float=str) for l in f if l.strip()]
    n = 0
    for line in lines:
        step = line["step"]
        for tag, key in EPOCH_TAGS.items():
            text = line[key]
            if isinstance(text, int):
                want, tol = float(text), 0.0
            else:
                want = float(text)
                digits = len(text.split(".")[1]) if "." in text else 0
                tol = (0.5 * 10.0 ** -digits + abs(want) * 2.0 ** -23) * (1 + 1e-9)
            got = [s.value for s in acc.Scalars(tag) if s.step == step]
            if len(got) != 1 or abs(got[0] - want) > tol:
                sys.exit(f"{d}: {tag} at step {step}: EventAccumulator has {got}, the --metrics line of epoch "
                         f"{line['epoch']} says {key} {text} (tolerance {tol:g})")
            n += 1
    print(f"{d}: the {n} per-epoch scalars EventAccumulator read equal the --metrics lines' values")


if __name__ == "__main__":
    mode, d = sys.argv[1], sys.argv[2]
    if mode == "cli":
        cli(d, *sys.argv[3:5])
    else:
        {"read": read, "torch": torch_compare}[mode](d)
