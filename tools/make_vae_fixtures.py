#!/usr/bin/python3
"""Generate the Wan2.1 video-VAE test fixtures under tests/data/vae/ with the format owners' own code.

Run from the repository root, then commit the output:

    /usr/bin/python3 tools/make_vae_fixtures.py [--wan-repo DIR] [--diffusers-repo DIR]

--wan-repo / --diffusers-repo name git repositories (bare mirrors are fine; a directory holding the git
dir as `repo/` is accepted too) of Wan-Video/Wan2.1 and huggingface/diffusers; the defaults are the
mirrors under /work/.mirror. The script reads, at HEAD of each:
  Wan2.1     wan/modules/vae.py                                      (WanVAE_, WanVAE's latent mean/std)
  diffusers  src/diffusers/models/autoencoders/autoencoder_kl_wan.py (AutoencoderKLWan)
             scripts/convert_wan_to_diffusers.py                     (convert_vae, taken out with `ast`)
It writes them into a temporary directory and imports them from there; nothing of theirs is copied into
this repository. What torch 1.13 (Debian python3-torch, /usr/bin/python3) or this machine lacks is stood in
for, only where absent: `einops.rearrange` (just the two patterns vae.py uses),
F.scaled_dot_product_attention (textbook softmax(q k^T / sqrt(d)) v), the diffusers package's helper
imports (ConfigMixin/ModelMixin and friends: plain nn.Module / empty classes, get_activation("silu") =
nn.SiLU), and, for convert_vae, hf_hub_download / torch.load / accelerate.init_empty_weights. The C++
test suite reads the committed files and never needs torch.

Outputs (tests/data/vae/):
  tiny_config.json            {"dim": 8, "z_dim": 16, "dim_mult": [1,2,2,2], "num_res_blocks": 1,
                              "attn_scales": [], "temperal_downsample": [false,true,true],
                              "latents_mean": [16], "latents_std": [16]}; mean/std read from Wan's WanVAE.
  tiny_vae.pth                torch.save(WanVAE_(that config).state_dict()): PyTorch zip format, float32,
                              OrderedDict with `_metadata`, like Wan2.1_VAE.pth but small. Weights seeded:
                              every conv weight N(0,1)/sqrt(fan_in) (attention `proj` too, which Wan
                              zero-initialises), biases 0.05*N(0,1), RMS gammas 1+0.1*N(0,1);
                              decoder.head.2.weight then scaled by 0.5.
  tiny_vae.safetensors        the same tensors, names and order, F32.
  tiny_vae_bf16.safetensors   the same tensors in BF16 (round to nearest even, torch's .to(bfloat16)).
  clip.safetensors            `video` [1,3,13,16,24] F32 in [-1,1] (smooth seeded noise plus grain) and
                              Wan's own outputs, computed in float64 by WanVAE_ (model.double(), weights =
                              the stored float32 values, Wan's Upsample float32 round trip bypassed):
                                latents    = encode(video, [mean, 1/std])           F32 [1,16,4,2,3]
                                decoded    = decode(latents, [mean, 1/std]).clamp(-1,1)
                                                                                   F32 [1,3,13,16,24]
                              where decode's input is the stored F32 `latents`; likewise latents_f1 /
                              decoded_f1 for video[:, :, :1] and latents_f5 / decoded_f5 for
                              video[:, :, :5].
  diffusers_default_names.json  [[diffusers_name, wan_name, shape], ...]: diffusers' own convert_vae run
                              on the state dict of Wan's default-config WanVAE_ (194 rows, Wan order).
  diffusers_tiny_names.json   [[name, shape], ...]: AutoencoderKLWan(base_dim=4, ...tiny config...)
                              .state_dict() in its own order (no mapping: convert_vae hard-codes the
                              default config's block indices).
  expected.json               commits used, config, clip shape, what each file holds, clamped fractions.

Deterministic: seeded generators, one CPU thread, fixed JSON formatting; a rerun with the same sources and
torch gives byte-identical files (tiny_vae.pth is torch's own zip writer: identical in practice, not
promised).
"""
import argparse
import ast
import collections
import contextlib
import copy
import importlib.util
import inspect
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import types

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "tests", "data", "vae")
DEFAULT_WAN_REPO = "/work/.mirror/Wan-Video+Wan2.1/repo"
DEFAULT_DIFFUSERS_REPO = "/work/.mirror/huggingface+diffusers/repo"

WAN_VAE_PY = "wan/modules/vae.py"
DIFFUSERS_AKW_PY = "src/diffusers/models/autoencoders/autoencoder_kl_wan.py"
DIFFUSERS_CONVERT_PY = "scripts/convert_wan_to_diffusers.py"

TINY = collections.OrderedDict([("dim", 4), ("z_dim", 16), ("dim_mult", [1, 2, 2, 2]), ("num_res_blocks", 1),
                                ("attn_scales", []), ("temperal_downsample", [False, True, True])])
WAN_DEFAULT = dict(dim=96, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[],
                   temperal_downsample=[False, True, True])          # Wan's _video_vae() config
CLIP_SHAPE = (1, 3, 13, 16, 24)
SUBCLIPS = (("", 13), ("_f1", 1), ("_f5", 5))
WEIGHT_SEED = 20250301
VIDEO_SEED = 1301
HEAD_GAIN = 0.5                                                        # decoder.head.2.weight scale
F64 = torch.float64


# ------------------------------------------------------------------------------------------------------------
# sources from the git mirrors
# ------------------------------------------------------------------------------------------------------------
def git(gitdir, *args):
    return subprocess.run(["git", "-C", gitdir, *args], check=True, capture_output=True).stdout


def resolve_gitdir(path):
    for cand in (path, os.path.join(path, "repo")):
        if os.path.isdir(cand) and subprocess.run(["git", "-C", cand, "rev-parse", "--git-dir"],
                                                  capture_output=True).returncode == 0:
            return cand
    sys.exit(f"make_vae_fixtures: no git repository at {path}")


def source_info(gitdir, path):
    return {"path": path,
            "blob": git(gitdir, "rev-parse", f"HEAD:{path}").decode().strip(),
            "last_commit": git(gitdir, "log", "-1", "--format=%H", "HEAD", "--", path).decode().strip()}


def extract(gitdir, path, dest):
    with open(dest, "wb") as f:
        f.write(git(gitdir, "show", f"HEAD:{path}"))
    return dest


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


# ------------------------------------------------------------------------------------------------------------
# stand-ins for what torch 1.13 / this machine lacks (installed only where absent)
# ------------------------------------------------------------------------------------------------------------
def _rearrange(x, pattern, **sizes):
    """The two einops.rearrange patterns in Wan's vae.py, nothing else."""
    spec = " ".join(pattern.replace("->", " -> ").split())
    if spec == "b c t h w -> (b t) c h w":
        b, c, t, h, w = x.shape
        return x.transpose(1, 2).reshape(b * t, c, h, w)
    if spec == "(b t) c h w -> b c t h w":
        bt, c, h, w = x.shape
        t = sizes["t"]
        return x.reshape(bt // t, t, c, h, w).transpose(1, 2)
    raise NotImplementedError(f"einops stand-in: pattern {pattern!r}")


def _attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    """softmax(q k^T / sqrt(d)) v: what torch>=2's F.scaled_dot_product_attention computes by default."""
    if attn_mask is not None or dropout_p != 0.0 or is_causal:
        raise NotImplementedError("attention stand-in: mask / dropout / causal")
    s = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    return torch.softmax(q @ k.transpose(-2, -1) * s, dim=-1) @ v


def install_standins():
    used = {}
    try:
        import einops  # noqa: F401
        used["einops"] = "einops " + getattr(einops, "__version__", "?")
    except ImportError:
        sys.modules["einops"] = types.SimpleNamespace(rearrange=_rearrange)
        used["einops"] = "stand-in (2 patterns)"
    if hasattr(F, "scaled_dot_product_attention"):
        used["scaled_dot_product_attention"] = "torch"
    else:
        F.scaled_dot_product_attention = _attention
        used["scaled_dot_product_attention"] = "stand-in (softmax(q k^T / sqrt(d)) v)"
    return used


def install_diffusers_stubs(pkg="diffusers"):
    """Just enough of the diffusers package for autoencoder_kl_wan.py's relative imports."""
    def mod(name, **attrs):
        m = types.ModuleType(name)
        m.__path__ = []
        m.__dict__.update(attrs)
        sys.modules[name] = m
        return m

    class ConfigMixin:
        pass

    class FromOriginalModelMixin:
        pass

    class AutoencoderMixin:
        pass

    import logging
    mod(pkg)
    mod(pkg + ".models")
    mod(pkg + ".models.autoencoders")
    mod(pkg + ".configuration_utils", ConfigMixin=ConfigMixin, register_to_config=lambda f: f)
    mod(pkg + ".loaders", FromOriginalModelMixin=FromOriginalModelMixin)
    mod(pkg + ".utils", logging=types.SimpleNamespace(get_logger=logging.getLogger))
    mod(pkg + ".utils.accelerate_utils", apply_forward_hook=lambda f: f)
    mod(pkg + ".models.activations", get_activation=lambda s: {"silu": nn.SiLU}[s]())
    mod(pkg + ".models.modeling_outputs", AutoencoderKLOutput=object)
    mod(pkg + ".models.modeling_utils", ModelMixin=nn.Module)
    mod(pkg + ".models.autoencoders.vae", AutoencoderMixin=AutoencoderMixin, DecoderOutput=object,
        DiagonalGaussianDistribution=object)
    return pkg + ".models.autoencoders.autoencoder_kl_wan"


@contextlib.contextmanager
def no_init():
    """Skip random init of convs (like accelerate's init_empty_weights, the tensors' values are unused)."""
    conv = nn.modules.conv._ConvNd
    saved = conv.reset_parameters
    conv.reset_parameters = lambda self: None
    try:
        yield
    finally:
        conv.reset_parameters = saved


def latent_constants(vae_py_path, class_name="WanVAE"):
    """The `mean` and `std` lists assigned in class_name.__init__ (as lists, or as the list torch.tensor is given),
    read from the source (no evaluation)."""
    tree = ast.parse(open(vae_py_path).read())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name)
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    found = {}
    for node in ast.walk(init):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id in ("mean", "std"):
            value = node.value.args[0] if isinstance(node.value, ast.Call) else node.value
            found[node.targets[0].id] = [float(v) for v in ast.literal_eval(value)]
    return found["mean"], found["std"]


def function_from_source(path, name, namespace):
    tree = ast.parse(open(path).read())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    exec(compile(ast.Module(body=[fn], type_ignores=[]), path, "exec"), namespace)
    return namespace[name]


def run_convert(conv_py, name, akw, wan_sd, ckpt, construct=None, ns_extra=None):
    """Runs the convert script's function `name` on the state dict wan_sd (its hf_hub_download and torch.load stood
    in; `construct` in place of AutoencoderKLWan when given) and returns what it returned and the state dict it
    loaded into AutoencoderKLWan (diffusers' names, Wan's tensors)."""
    captured = {}
    real_load = akw.AutoencoderKLWan.load_state_dict

    def capture_load(self, state_dict, strict=True, assign=False):
        captured.update(state_dict)
        return real_load(self, state_dict, strict=True)

    ns = {"hf_hub_download": lambda *args, **kw: ckpt, "torch": types.SimpleNamespace(load=lambda *args, **kw: wan_sd),
          "init_empty_weights": no_init, "AutoencoderKLWan": construct or akw.AutoencoderKLWan, **(ns_extra or {})}
    fn = function_from_source(conv_py, name, ns)
    akw.AutoencoderKLWan.load_state_dict = capture_load
    try:
        result = fn()
    finally:
        akw.AutoencoderKLWan.load_state_dict = real_load
    return result, captured


# ------------------------------------------------------------------------------------------------------------
# weights, video
# ------------------------------------------------------------------------------------------------------------
def seed_weights(model, seed):
    g = torch.Generator().manual_seed(seed)
    params = dict(model.named_parameters())
    names = list(model.state_dict())
    assert sorted(names) == sorted(params), "WanVAE_ has buffers or unregistered tensors?"
    with torch.no_grad():
        for name in names:
            p = params[name]
            r = torch.randn(p.shape, generator=g, dtype=torch.float32)
            if name.endswith(".gamma"):
                p.copy_(1.0 + 0.1 * r)
            elif name.endswith(".bias"):
                p.copy_(0.05 * r)
            elif name.endswith(".weight") and p.dim() in (4, 5):
                p.copy_(r / math.sqrt(p[0].numel()))
            else:
                raise ValueError(f"unexpected parameter {name} {tuple(p.shape)}")
        params["decoder.head.2.weight"].mul_(HEAD_GAIN)


def make_video(shape, seed):
    g = torch.Generator().manual_seed(seed)
    b, c, t, h, w = shape
    coarse = torch.randn(b, c, 4, 4, 6, generator=g, dtype=F64)
    v = F.interpolate(coarse, size=(t, h, w), mode="trilinear", align_corners=True)
    v = 0.6 * v + 0.08 * torch.randn(shape, generator=g, dtype=F64)
    return v.clamp(-1.0, 1.0).float()


# ------------------------------------------------------------------------------------------------------------
# writers
# ------------------------------------------------------------------------------------------------------------
_ST = {torch.float32: ("F32", "<f4"), torch.bfloat16: ("BF16", "<i2"), torch.float64: ("F64", "<f8")}


def write_safetensors(path, tensors, metadata=None):
    """8-byte LE header length, JSON header (dtype/shape/data_offsets) padded with spaces to a multiple of 8,
    then the data in header order."""
    header, blobs, off = collections.OrderedDict(), [], 0
    if metadata:
        header["__metadata__"] = dict(metadata)
    for name, t in tensors.items():
        t = t.detach().contiguous()
        code, npdt = _ST[t.dtype]
        arr = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy()
        raw = np.ascontiguousarray(arr, dtype=npdt).tobytes()         # explicit little-endian
        assert len(raw) == t.numel() * t.element_size()
        header[name] = {"dtype": code, "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for raw in blobs:
            f.write(raw)


def write_json_rows(path, rows):
    with open(path, "w") as f:
        f.write("[\n" + ",\n".join(json.dumps(r) for r in rows) + "\n]\n")


def write_json_object(path, obj):
    with open(path, "w") as f:
        f.write("{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in obj.items()) + "\n}\n")


# ------------------------------------------------------------------------------------------------------------
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--wan-repo", default=DEFAULT_WAN_REPO)
    ap.add_argument("--diffusers-repo", default=DEFAULT_DIFFUSERS_REPO)
    ap.add_argument("--out", default=OUT_DIR, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    wan_git, dif_git = resolve_gitdir(a.wan_repo), resolve_gitdir(a.diffusers_repo)
    os.makedirs(a.out, exist_ok=True)
    out = lambda n: os.path.join(a.out, n)  # noqa: E731

    with tempfile.TemporaryDirectory(prefix="vae_fixtures_") as tmp:
        standins = install_standins()
        wan_py = extract(wan_git, WAN_VAE_PY, os.path.join(tmp, "wan_vae_snapshot.py"))
        akw_py = extract(dif_git, DIFFUSERS_AKW_PY, os.path.join(tmp, "autoencoder_kl_wan.py"))
        conv_py = extract(dif_git, DIFFUSERS_CONVERT_PY, os.path.join(tmp, "convert_wan_to_diffusers.py"))
        wan = load_module("wan_vae_snapshot", wan_py)
        akw = load_module(install_diffusers_stubs(), akw_py)
        mean, std = latent_constants(wan_py)
        assert len(mean) == len(std) == 16

        # 1. config -------------------------------------------------------------------------------------------
        cfg = collections.OrderedDict(TINY)
        cfg["latents_mean"], cfg["latents_std"] = mean, std
        write_json_object(out("tiny_config.json"), cfg)

        # 2./3. weights ---------------------------------------------------------------------------------------
        torch.manual_seed(0)                   # module construction draws from the global generator
        model = wan.WanVAE_(**TINY, dropout=0.0).float().eval()
        seed_weights(model, WEIGHT_SEED)
        sd = model.state_dict()
        torch.save(sd, out("tiny_vae.pth"))
        W32 = collections.OrderedDict((k, v.detach().clone()) for k, v in sd.items())
        write_safetensors(out("tiny_vae.safetensors"), W32, {"format": "pt"})
        write_safetensors(out("tiny_vae_bf16.safetensors"),
                          collections.OrderedDict((k, v.to(torch.bfloat16)) for k, v in W32.items()),
                          {"format": "pt"})
        n_params = sum(v.numel() for v in W32.values())

        # 4. clip: Wan's own encode/decode in float64 ---------------------------------------------------------
        model64 = copy.deepcopy(model).double().eval()
        scale = [torch.tensor(mean, dtype=F64), 1.0 / torch.tensor(std, dtype=F64)]
        video = make_video(CLIP_SHAPE, VIDEO_SEED)
        clip = collections.OrderedDict([("video", video)])
        clamped, info = {}, {}
        up_forward = wan.Upsample.forward
        wan.Upsample.forward = nn.Upsample.forward    # Wan's bf16 workaround would round to float32
        try:
            with torch.no_grad():
                for tag, frames in SUBCLIPS:
                    lat64 = model64.encode(video[:, :, :frames].double(), scale)
                    lat = lat64.float()
                    raw = model64.decode(lat.double(), scale)
                    raw_unrounded = model64.decode(lat64, scale)
                    clip["latents" + tag] = lat
                    clip["decoded" + tag] = raw.clamp(-1.0, 1.0).float()
                    clamped["decoded" + tag] = float((raw.abs() > 1).double().mean())
                    info["decoded" + tag] = float((raw - raw_unrounded).abs().max())
        finally:
            wan.Upsample.forward = up_forward
        write_safetensors(out("clip.safetensors"), clip)

        # 5. diffusers' convert_vae on Wan's default-config state dict --------------------------------------
        with no_init():
            wan_default_sd = wan.WanVAE_(**WAN_DEFAULT, dropout=0.0).state_dict()
        dif_default, captured = run_convert(conv_py, "convert_vae", akw, wan_default_sd, "Wan2.1_VAE.pth")
        by_id = {id(v): k for k, v in wan_default_sd.items()}
        dif_default_sd = dif_default.state_dict()
        assert set(captured) == set(dif_default_sd) and len(captured) == len(wan_default_sd)
        order = {k: i for i, k in enumerate(wan_default_sd)}
        rows = []
        for dname, v in captured.items():
            wname = by_id[id(v)]
            assert tuple(dif_default_sd[dname].shape) == tuple(wan_default_sd[wname].shape)
            rows.append([dname, wname, list(v.shape)])
        rows.sort(key=lambda r: order[r[1]])
        assert len({r[1] for r in rows}) == len(rows)
        write_json_rows(out("diffusers_default_names.json"), rows)
        n_default = sum(v.numel() for v in wan_default_sd.values())
        del wan_default_sd, dif_default, dif_default_sd, captured, by_id

        # 6. diffusers' tiny model names ----------------------------------------------------------------------
        with no_init():
            dif_tiny = akw.AutoencoderKLWan(base_dim=TINY["dim"], z_dim=TINY["z_dim"], dim_mult=TINY["dim_mult"],
                                            num_res_blocks=TINY["num_res_blocks"], attn_scales=TINY["attn_scales"],
                                            temperal_downsample=TINY["temperal_downsample"])
        tiny_rows = [[k, list(v.shape)] for k, v in dif_tiny.state_dict().items()]
        write_json_rows(out("diffusers_tiny_names.json"), tiny_rows)
        sig = inspect.signature(akw.AutoencoderKLWan.__init__).parameters
        dif_mean_std_same = (list(sig["latents_mean"].default) == mean and list(sig["latents_std"].default) == std)

        # 7. expected.json ------------------------------------------------------------------------------------
        expected = collections.OrderedDict()
        expected["generator"] = "tools/make_vae_fixtures.py (/usr/bin/python3, torch %s)" % torch.__version__
        expected["sources"] = {
            "Wan-Video/Wan2.1": {"commit": git(wan_git, "rev-parse", "HEAD").decode().strip(),
                                 "files": [source_info(wan_git, WAN_VAE_PY)]},
            "huggingface/diffusers": {"commit": git(dif_git, "rev-parse", "HEAD").decode().strip(),
                                      "files": [source_info(dif_git, DIFFUSERS_AKW_PY),
                                                source_info(dif_git, DIFFUSERS_CONVERT_PY)]},
        }
        expected["standins"] = standins
        expected["config"] = cfg
        expected["params"] = n_params
        expected["tensors"] = len(W32)
        expected["weights_init"] = (f"torch.Generator seed {WEIGHT_SEED}, state-dict order, one randn(float32) "
                                    "per tensor: conv weights N(0,1)/sqrt(fan_in) (attention proj included), "
                                    "biases 0.05*N(0,1), gammas 1+0.1*N(0,1); then decoder.head.2.weight *= "
                                    f"{HEAD_GAIN}")
        expected["clip"] = {"video": list(CLIP_SHAPE), "seed": VIDEO_SEED,
                            "frames": {"latents" + t + ", decoded" + t: n for t, n in SUBCLIPS}}
        expected["scale"] = "[latents_mean, 1 / latents_std] (float64), as WanVAE passes to WanVAE_.encode/decode"
        expected["files"] = collections.OrderedDict([
            ("tiny_config.json", "the tiny config; latents_mean/std = Wan's WanVAE constants"
                                 + (" (= diffusers AutoencoderKLWan defaults)" if dif_mean_std_same else "")),
            ("tiny_vae.pth", "torch.save(WanVAE_(tiny config).state_dict()): zip, F32, OrderedDict with _metadata"),
            ("tiny_vae.safetensors", "same tensors/names/order, F32, __metadata__ {format: pt}"),
            ("tiny_vae_bf16.safetensors", "same tensors/names/order, BF16 (round to nearest even)"),
            ("clip.safetensors", collections.OrderedDict(
                [(k, {"dtype": "F32", "shape": list(v.shape)}) for k, v in clip.items()]
                + [("how", "video in [-1,1]; latents* = WanVAE_.encode(video[:, :, :F], scale) (normalised mu, "
                           "Wan's streaming chunks); decoded* = WanVAE_.decode(latents* as stored, scale)"
                           ".clamp(-1, 1); computed in float64 (weights = the F32 values, Upsample's float32 "
                           "round trip bypassed), stored F32")])),
            ("diffusers_default_names.json", f"[diffusers_name, wan_name, shape] x {len(rows)}: diffusers "
                                             "convert_vae on Wan's default config (dim 96, dim_mult [1,2,4,4], "
                                             f"2 res blocks; {n_default} params), Wan state-dict order"),
            ("diffusers_tiny_names.json", f"[name, shape] x {len(tiny_rows)}: AutoencoderKLWan(base_dim={TINY['dim']}, "
                                          "tiny config).state_dict(), its order"),
        ])
        expected["clamped_fraction"] = {k: round(v, 6) for k, v in clamped.items()}
        write_json_object(out("expected.json"), expected)

    for name in sorted(os.listdir(a.out)):
        print(f"  {os.path.getsize(out(name)):>8}  {name}")
    print(f"{n_params:,} parameters in {len(W32)} tensors; clip {list(CLIP_SHAPE)} -> latents "
          f"{list(clip['latents'].shape)}; clamped fraction "
          + ", ".join(f"{k} {100 * v:.2f}%" for k, v in clamped.items())
          + "; decode(stored F32 latents) vs decode(float64 latents) max|d| "
          + ", ".join(f"{v:.1e}" for v in info.values())
          + f"; {len(rows)} convert_vae rows, {len(tiny_rows)} tiny diffusers names; stand-ins: {standins}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
