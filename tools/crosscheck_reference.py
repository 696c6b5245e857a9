#!/usr/bin/python3
"""Manual cross-check of `megaslide forward --backward` against ../shared/reference/wan_ref.py (float64 PyTorch).

Not part of the test suite (the tests carry their own float64 reference in C++). Needs Debian's
python3-torch and python3-numpy. Usage: tools/crosscheck_reference.py build/megaslide [workdir]
"""
import json, os, struct, subprocess, sys, tempfile
import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "reference"))
from wan_ref import forward, random_weights  # noqa: E402
def save(path, tensors):
    header, off, blobs = {}, 0, []
    for k, v in tensors.items():
        a = np.ascontiguousarray(v.detach().numpy().astype(np.float32))
        b = a.tobytes(); header[k] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        off += len(b); blobs.append(b)
    h = json.dumps(header).encode(); h += b" " * ((8 - len(h) % 8) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))

def load(path):
    d = open(path, "rb").read(); n = struct.unpack("<Q", d[:8])[0]; hdr = json.loads(d[8:8+n]); out = {}
    for k, v in hdr.items():
        if k == "__metadata__": continue
        s, e = v["data_offsets"]; out[k] = np.frombuffer(d[8+n+s:8+n+e], dtype=np.float32).reshape(v["shape"])
    return out


def main():
    binary = os.path.abspath(sys.argv[1])
    os.chdir(sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="megaslide-xcheck-"))
    cfg = dict(dim=36, ffn_dim=50, num_heads=3, num_layers=2, in_dim=4, out_dim=3, text_dim=13, freq_dim=16, text_len=9, eps=1e-6, patch_size=[1,2,2], model_type="t2v")
    W = random_weights(cfg, seed=4)
    json.dump(cfg, open("config.json", "w"))
    save("w.safetensors", W)
    torch.manual_seed(2)
    lat = torch.randn(2, 4, 3, 6, 8); t = torch.tensor([35.0, 912.0]); ctx = torch.randn(2, 5, 13)
    save("in.safetensors", {"latents": lat, "timestep": t, "context": ctx})
    subprocess.run([binary, "forward", "--model", "w.safetensors", "--config", "config.json", "--inputs", "in.safetensors", "--out", "out.safetensors"], check=True)
    y = forward(W, cfg, lat, t, ctx).numpy()
    ours = load("out.safetensors")["velocity"]
    print("relative L2 (megaslide f32 vs wan_ref f64):", np.linalg.norm(ours - y) / np.linalg.norm(y))
    g = torch.randn(*y.shape, dtype=torch.float64)
    save("in.safetensors", {"latents": lat, "timestep": t, "context": ctx, "grad_velocity": g})
    subprocess.run([binary, "forward", "--model", "w.safetensors", "--config", "config.json", "--inputs", "in.safetensors", "--out", "out.safetensors", "--backward"], check=True, capture_output=True)
    ours = load("out.safetensors")
    Wd = {k: v.double().requires_grad_() for k, v in W.items()}
    latd = lat.double().requires_grad_(); ctxd = ctx.double().requires_grad_()
    (forward(Wd, cfg, latd, t, ctxd) * g).sum().backward()
    worst = max((np.linalg.norm(ours["grad." + k] - v.grad.numpy()) / np.linalg.norm(v.grad.numpy()), k) for k, v in Wd.items())
    print("worst param grad rel L2:", worst)
    print("latents grad:", np.linalg.norm(ours["grad.latents"] - latd.grad.numpy()) / np.linalg.norm(latd.grad.numpy()))
    print("context grad:", np.linalg.norm(ours["grad.context"] - ctxd.grad.numpy()) / np.linalg.norm(ctxd.grad.numpy()))


if __name__ == "__main__":
    main()
